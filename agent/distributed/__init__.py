"""Worker groups for benchmarks that span several processes: torchrun-style launch, join and report.

The agent stays the one process a user starts; it launches one worker per GPU (``launch``), each worker joins a
``torch.distributed`` group (``worker``, ``rank``) and runs the task's rank code, which its benchmark family
names and owns (``benchmarks/collective_rank``, ``benchmarks/data_parallel_rank``), and the local rank 0 of every
node streams the records back. Nothing here imports a benchmark.
"""
