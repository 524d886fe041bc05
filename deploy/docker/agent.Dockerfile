# The agent on NVIDIA's PyTorch image, using the image's own torch (and CUDA, NCCL): nothing here installs torch.
#   docker build -f deploy/docker/agent.Dockerfile -t flopfleet-agent .
#   docker run --rm --gpus all -v /etc/flopfleet:/etc/flopfleet:ro -v flopfleet-kernels:/var/cache/flopfleet \
#       flopfleet-agent run --suite standard
# PYTORCH_IMAGE: any NGC PyTorch release with torch >= 2.1 (nvcr.io/nvidia/pytorch:YY.MM-py3).
ARG PYTORCH_IMAGE=nvcr.io/nvidia/pytorch:25.10-py3
FROM ${PYTORCH_IMAGE}

WORKDIR /opt/flopfleet
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY schemas ./schemas
COPY collector ./collector
# The package without its dependencies, then the agent's own ones but torch: pip never replaces the image's torch
# (NGC's is a pre-release build such as 2.9.0a0+...). transformers is kept if the image has one recent enough.
RUN python -m pip install --no-cache-dir --no-deps . \
 && python -m pip install --no-cache-dir "transformers>=4.40" "httpx>=0.27" "nvidia-ml-py>=12.535" \
        "pydantic>=2.7,<3" "typer>=0.12" "rich>=13" \
 && python -c "import torch, transformers, agent; print('flopfleet-agent on torch', torch.__version__)"

# Compiled kernels (the driver's, Triton's) in a volume, so that a new container starts warm: mount one that outlives
# it (docker run -v flopfleet-kernels:/var/cache/flopfleet ...; docs/agent.md, "A first run and later ones").
ENV FLOPFLEET_CONFIG=/etc/flopfleet/agent.toml \
    FLOPFLEET_SPOOL_DIR=/var/lib/flopfleet/spool \
    CUDA_CACHE_PATH=/var/cache/flopfleet/cuda \
    TRITON_CACHE_DIR=/var/cache/flopfleet/triton \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/flopfleet/spool", "/var/cache/flopfleet"]
ENTRYPOINT ["flopfleet-agent"]
CMD ["check"]
