"""The contract's version, and what each side does with a version not its own (docs/contract.md says it in words).

A run says its version as ``schema_version`` (the major) and ``schema_minor`` (left out when 0). Within a major a
minor only adds (optional fields, values of a flag or another list of markers, benchmark kinds), so a reader of an
older minor keeps what it knows and says what it left (the collector: ``collector/analysis/newer.py``); anything
else is a new major, which a reader of another major refuses, naming the majors it reads. A collector states its
version on every answer (``CONTRACT_HEADER``), so an agent can tell a collector too old for a run and keep the run
instead of sending it again and again (``agent/run/upload.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The contract this code speaks: ``MAJOR.MINOR``.
MAJOR = 1
MINOR = 1
#: The majors a run may have for this code to read it.
READS_MAJORS: tuple[int, ...] = (1,)
#: The newest minor whose runs carry nothing a 1.0 reader lacks: 1.1 added only the readers' tolerance (and
#: ``schema_minor`` itself). A run of such a minor is written as 1.0 (``RUN_MINOR``), so that a collector from before
#: the versioned contract, which is strict and states no version, stores it. A minor that adds to the run leaves
#: this as it is.
PLAIN_MINOR = 1
#: The minor this code writes on its runs: its own, or 0 while its runs are plain 1.0 runs.
RUN_MINOR = MINOR if MINOR > PLAIN_MINOR else 0
#: The collector's answers say its version (``1.1``) and the majors it reads (``1``), whatever the status; an agent's
#: verdicts requests say its own version, so that the collector answers in a shape it reads (``answer_exclude``).
CONTRACT_HEADER = "Flopfleet-Contract"
MAJORS_HEADER = "Flopfleet-Contract-Majors"


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """``"1.2"`` as a version; None for anything else."""
        major, dot, minor = text.strip().partition(".")
        if not (dot and major.isdigit() and minor.isdigit()):
            return None
        return cls(int(major), int(minor))


THIS = Version(MAJOR, MINOR)


def run_version(data: Mapping[str, Any]) -> Version | None:
    """A run's version from its JSON object (``schema_minor`` absent: 0); None where it has no whole-number one."""
    major, minor = data.get("schema_version"), data.get("schema_minor", 0)
    if type(major) is not int or type(minor) is not int:
        return None
    return Version(major, minor)


def majors_text(majors: tuple[int, ...]) -> str:
    return ", ".join(f"{m}.x" for m in majors)


def answer_headers() -> dict[str, str]:
    """What a collector says of its contract on every answer."""
    return {CONTRACT_HEADER: str(THIS), MAJORS_HEADER: ",".join(str(m) for m in READS_MAJORS)}


@dataclass(frozen=True)
class Peer:
    """What a collector said of its contract on an answer: its version and the majors it reads. ``version`` None: a
    collector from before the versioned contract (no header), which reads plain 1.0 runs alone."""

    version: Version | None
    majors: tuple[int, ...] = (1,)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Peer:
        version = Version.parse(headers.get(CONTRACT_HEADER, ""))
        if version is None:
            return cls(None)
        said = [m.strip() for m in headers.get(MAJORS_HEADER, "").split(",")]
        majors = tuple(int(m) for m in said if m.isdigit()) or (version.major,)
        return cls(version, majors)

    def refuses(self, run: Version) -> str | None:
        """Why this collector cannot store a run of version ``run``, so that sending it again will not help until the
        collector is upgraded; None when it can."""
        if self.version is None:
            if run.major == 1 and run.minor <= PLAIN_MINOR:
                return None
            return (f"the collector predates flopfleet's versioned contract (it states no version and reads plain 1.0 "
                    f"runs alone); this run is {run}: upgrade the collector")  # fmt: skip
        if run.major not in self.majors:
            fix = "upgrade the collector" if run.major > max(self.majors) else "send it to a collector that reads it"
            said = f"the collector reads contract {majors_text(self.majors)} (it is {self.version})"
            return f"{said}; this run is {run}: {fix}"
        return None


#: A verdict's figure as readers from before the versioned contract know it. They read answers strictly (every reader
#: since 1.1 ignores fields it does not know), so a request that states no contract is answered without the fields a
#: figure gained since: which reference judged it (``held_to``, ``healthy_down_to``) and whose baseline it was held
#: against (``baseline_kind``).
FIGURE_VERDICT_1_0 = frozenset({
    "figure", "level", "value", "unit", "peers", "peer_count", "history", "baseline", "baseline_threshold",
    "baseline_of", "floor", "threshold", "failing", "window", "reason", "note",
})  # fmt: skip


def request_headers() -> dict[str, str]:
    """What an agent says of its contract when it asks for verdicts (``answer_exclude``)."""
    return {CONTRACT_HEADER: str(THIS)}


def answer_exclude(headers: Mapping[str, str], figure_fields: frozenset[str]) -> dict[str, Any] | None:
    """What to leave out of a verdicts answer (``GpuVerdict.model_dump``'s ``exclude``) for a reader that sent
    ``headers``: a reader that states no contract gets the 1.0 figure's fields alone; None: everything."""
    if Version.parse(headers.get(CONTRACT_HEADER, "")) is not None:
        return None
    return {"figures": {"__all__": set(figure_fields - FIGURE_VERDICT_1_0)}}
