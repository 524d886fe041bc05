"""Where this machine sits among the machines of a multi-node run, from flags or from the launcher's environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError

DEFAULT_PORT = 29511


@dataclass(frozen=True)
class Nodes:
    """``count`` machines; this is number ``rank``; their rendezvous is ``master_addr:master_port``.

    A single machine (the default) picks a free local port for each worker group.
    """

    count: int = 1
    rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"--nnodes {self.count} must be at least 1")
        if not 0 <= self.rank < self.count:
            raise ConfigError(f"--node-rank {self.rank} must be in 0..{self.count - 1}")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise ConfigError(f"--master-port {self.master_port} is not a TCP port")
        if self.count > 1 and self.master_port is None:
            raise ConfigError("a multi-node run needs --master-port (the same on every node)")
        if not re.match(r"^[A-Za-z0-9_.:\-\[\]]{1,253}$", self.master_addr):
            raise ConfigError(f"--master-addr {self.master_addr!r} is not a host name or address")

    @property
    def multi(self) -> bool:
        return self.count > 1


def from_launcher(environ: Mapping[str, str]) -> Nodes:
    """The layout a launcher that started one agent per node describes in the environment.

    torchrun (``--nproc-per-node 1``) sets GROUP_RANK, WORLD_SIZE (= nodes), MASTER_ADDR and MASTER_PORT; its
    own rendezvous store holds MASTER_PORT, so the workers meet on the next port. Slurm's ``srun`` (one task per
    node) sets SLURM_NNODES and SLURM_NODEID; the first host of SLURM_JOB_NODELIST (or MASTER_ADDR) is master.
    """
    if "TORCHELASTIC_RUN_ID" in environ or "GROUP_RANK" in environ:
        try:
            return Nodes(
                count=int(environ["WORLD_SIZE"]),
                rank=int(environ["GROUP_RANK"]),
                master_addr=environ["MASTER_ADDR"],
                master_port=int(environ["MASTER_PORT"]) + 1,
            )
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"torchrun's environment is incomplete ({exc}); start with --nproc-per-node 1") from None
    if "SLURM_NODEID" in environ:
        try:
            count = int(environ.get("SLURM_NNODES") or environ["SLURM_JOB_NUM_NODES"])
            rank = int(environ["SLURM_NODEID"])
        except (KeyError, ValueError) as exc:
            raise ConfigError(
                f"Slurm's environment is incomplete ({exc}); start with srun --ntasks-per-node 1"
            ) from None
        master = environ.get("MASTER_ADDR") or first_host(environ.get("SLURM_JOB_NODELIST", ""))
        if not master:
            raise ConfigError("cannot tell the master node: set MASTER_ADDR or run under srun with SLURM_JOB_NODELIST")
        port = int(environ.get("MASTER_PORT") or DEFAULT_PORT)
        return Nodes(count=count, rank=rank, master_addr=master, master_port=port)
    raise ConfigError("--nodes-from-env: neither torchrun (GROUP_RANK) nor Slurm (SLURM_NODEID) variables are set")


def first_host(nodelist: str) -> str | None:
    """The first host of a Slurm node list: 'gpu[03-05,09],cpu1' -> 'gpu03'."""
    text = nodelist.strip()
    if not text:
        return None
    match = re.match(r"^([^,\[]+)(?:\[([^\]]+)\])?", text)
    if not match:
        return None
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first
