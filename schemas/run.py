"""The run envelope: everything one agent run sends to a collector, versioned and idempotent on ``run_id``."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AwareDatetime,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import Self

from .base import Label, Slug, TagValue, Text, WireModel
from .contract import MAJOR, READS_MAJORS
from .environment import Gpu, GpuSamples, Host, Software
from .results import Result
from .timeline import Timeline

#: The major this code writes (``schemas/contract.py``: the minor beside it, and what each side does with another).
SCHEMA_VERSION = MAJOR
#: The majors this code reads; a run of another is refused with a message naming these.
ACCEPTED_SCHEMA_VERSIONS: tuple[int, ...] = READS_MAJORS
#: The error type of a run whose major this code does not read (``collector/analysis/parse.py`` answers it apart).
UNREAD_MAJOR = "unsupported_version"

MAX_RESULTS = 20_000
MAX_GPUS = 64
MAX_TAGS = 32


class RunSubmission(WireModel):
    schema_version: int = Field(json_schema_extra={"enum": list(ACCEPTED_SCHEMA_VERSIONS)})
    #: The contract's minor the run was written to (left out when 0): a reader of an older minor keeps what it knows
    #: of the run and says what it left.
    schema_minor: Annotated[int, Field(ge=0, le=10_000)] = 0
    run_id: UUID
    agent_version: Label
    suite: Slug
    device: Literal["cuda", "cpu"]
    started_at: AwareDatetime
    finished_at: AwareDatetime
    host: Host
    software: Software
    gpus: tuple[Gpu, ...] = Field(default=(), max_length=MAX_GPUS)
    results: tuple[Result, ...] = Field(max_length=MAX_RESULTS)
    gpu_samples: GpuSamples = Field(default_factory=GpuSamples)
    tags: dict[Slug, TagValue] = Field(default_factory=dict, max_length=MAX_TAGS)
    topology: Annotated[str, StringConstraints(max_length=20_000)] | None = None  # `nvidia-smi topo -m`
    timeline: Timeline | None = None  # where the run's wall time went (schemas/timeline.py)
    #: Why the run ended before its plan did (the signal that stopped it: a job's time limit, a drain, Ctrl-C);
    #: its unfinished cases are ``skipped`` with the reason. None: the run went to its end.
    interrupted: Text | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value not in ACCEPTED_SCHEMA_VERSIONS:
            accepted = ", ".join(str(v) for v in ACCEPTED_SCHEMA_VERSIONS)
            newer = "newer than" if value > max(ACCEPTED_SCHEMA_VERSIONS) else "not one of"
            raise PydanticCustomError(
                UNREAD_MAJOR,
                "schema_version {value} is {newer} the versions accepted here ({accepted})",
                {"value": value, "newer": newer, "accepted": accepted},
            )
        return value

    @model_serializer(mode="wrap")
    def _plain(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A run of minor 0 is written without ``schema_minor``, exactly as before the field was: every collector, one
        from before the versioned contract included, reads it."""
        data = handler(self)
        if self.schema_minor == 0 and isinstance(data, dict):
            data.pop("schema_minor", None)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        indices = [gpu.index for gpu in self.gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"gpus repeat an index: {indices}")
        known = set(indices)
        strays = sorted(set(self.gpu_samples.gpu_index) - known)
        if strays:
            raise ValueError(f"gpu_samples.gpu_index names GPUs {strays} not in gpus {sorted(known)}")
        for i, result in enumerate(self.results):
            if result.gpu_index is not None and result.gpu_index not in known:
                raise ValueError(f"results[{i}].gpu_index {result.gpu_index} names no GPU in gpus {sorted(known)}")
        return self
