"""What the host and its GPUs say about themselves (NVML, nvidia-smi, /proc): read, never measured; no torch."""
