"""Benchmarks that span several processes: torchrun-style worker groups, collectives and data-parallel training.

The agent stays the one process a user starts; it launches one worker per GPU (``launch``), each worker joins a
``torch.distributed`` group (``worker``) and runs the cases (``collectives``, ``ddp``), and the local rank 0 of
every node streams the records back.
"""
