"""What a collector keeps of a run of a newer minor: what it knows, stored as usual; what it does not, said on the run.

A minor only adds (docs/contract.md), so each validation error of a newer minor's run is one of three things this
collector may leave: a field it does not know (kept in the stored run only); a value it does not know in a list of
markers (a flag, a throttle reason: stored as sent, and a result carrying a flag not known here is kept out of every
figure, ``store/figures.TRUSTED``); or a result it cannot read (a benchmark kind, or a value of one of its fields,
it does not know: kept in the stored run only). Any other error is the run's own, refused as at this collector's
version. The run is validated again without what was left, and the store reads its rows from that document, while
the payload it keeps is the body as sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails, to_json

from schemas import RunSubmission
from schemas.api import MAX_NOT_UNDERSTOOD

#: Fields whose value is a list of markers: one value not known here is left, and the list kept.
MARKERS = frozenset({"flags", "throttle_reasons_seen", "throttle_reasons"})
#: What a value this collector does not know looks like to pydantic.
_UNKNOWN_VALUE = frozenset({"literal_error", "enum"})
#: The longest name or value quoted in a note: a note names, it does not carry, what was left.
_QUOTED = 64

Loc = tuple[int | str, ...]


@dataclass(frozen=True)
class Understood:
    """A newer minor's run as this collector reads it: what it knows (``run``), the document the store reads rows
    from (the body less what it cannot read, markers kept as sent), and what it did not understand."""

    run: RunSubmission
    document: bytes
    not_understood: tuple[str, ...]


class _Notes:
    """What was left, one entry per kind of thing, with how many results (or places) carried it."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int | str]] = {}

    def add(self, text: str, path: Sequence[int | str]) -> None:
        where: int | str = path[1] if _result_index(path) is not None else ".".join(map(str, path))
        self._seen.setdefault(text, set()).add(where)

    def texts(self) -> tuple[str, ...]:
        out = []
        for text, where in self._seen.items():
            n = len(where)
            if all(isinstance(w, int) for w in where):
                text += f" ({n} result{'s' if n != 1 else ''})"
            elif n > 1:
                text += f" ({n} places)"
            out.append(text)
        if len(out) > MAX_NOT_UNDERSTOOD:
            out[MAX_NOT_UNDERSTOOD - 1 :] = [f"and {len(out) - MAX_NOT_UNDERSTOOD + 1} more"]
        return tuple(out)


def understood(data: dict[str, Any], errors: list[ErrorDetails], invalid: Callable[..., Exception]) -> Understood:
    """The run in ``data`` (a newer minor's, whose validation gave ``errors``) less what this collector does not know;
    ``invalid(errors, index)`` is raised for the errors that are the run's own (``index``: a result's place in the
    document validated, to its place in the run as sent)."""
    notes = _Notes()
    own: list[ErrorDetails] = []
    dropped: set[int] = set()
    markers: list[tuple[list[Any], Any]] = []  # (the list, the value): left out of what is validated, stored as sent
    for error in errors:
        path = _path(data, error["loc"])
        kind, index = error["type"], _result_index(path)
        parent, last = _at(data, path[:-1]), path[-1] if path else None
        if kind == "union_tag_invalid" and index is not None and len(path) == 2:
            dropped.add(index)
            tag = data["results"][index].get("benchmark")
            notes.add(f"benchmark {_quoted(tag)}: its results kept in the stored run only", path)
        elif kind == "extra_forbidden" and isinstance(parent, dict) and isinstance(last, str):
            parent.pop(last, None)
            notes.add(f"field {_generic(path)}: kept in the stored run only", path)
        elif kind in _UNKNOWN_VALUE and isinstance(parent, list) and isinstance(last, int) and _marker(path):
            value = parent[last]
            markers.append((parent, value))
            what = "flag" if _marker(path) == "flags" else "value"
            why = "stored; results carrying it are left out of figures" if what == "flag" else "stored as sent"
            notes.add(f"{what} {_quoted(value)} of {_generic(path[:-1])}: {why}", path)
        elif kind in _UNKNOWN_VALUE and index is not None:
            dropped.add(index)
            value = error.get("input")
            notes.add(f"value {_quoted(value)} of {_generic(path)}: those results kept in the stored run only", path)
        else:
            own.append(error)
    if own:
        raise invalid(own, None)
    results = data.get("results")
    kept = list(range(len(results))) if isinstance(results, list) else []
    if dropped and isinstance(results, list):
        kept = [i for i in kept if i not in dropped]
        data["results"] = [results[i] for i in kept]
    document = to_json(data)
    for values, value in markers:
        if value in values:
            values.remove(value)
    try:
        run = RunSubmission.model_validate_json(to_json(data))
    except ValidationError as exc:
        raise invalid(exc.errors(), kept) from None
    return Understood(run, document, notes.texts())


def _path(data: Any, loc: Loc) -> list[int | str]:
    """``loc`` as keys into the JSON: pydantic names a result's kind after its index (``results.0.matmul.timing``),
    which the JSON does not have."""
    node, path = data, []
    for part in loc:
        if isinstance(node, dict) and part not in node and node.get("benchmark") == part:
            continue
        path.append(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return path


def _at(data: Any, path: Sequence[int | str]) -> Any:
    node = data
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _result_index(path: Sequence[int | str]) -> int | None:
    return path[1] if len(path) >= 2 and path[0] == "results" and isinstance(path[1], int) else None


def _marker(path: Sequence[int | str]) -> str | None:
    """The list-of-markers field a value's path is in (its nearest named part), or None."""
    named = [p for p in path if isinstance(p, str)]
    return named[-1] if named and named[-1] in MARKERS else None


def _generic(path: Sequence[int | str]) -> str:
    """``results.3.timing.x`` → ``results.*.timing.x``: one note for every result that carries it."""
    return ".".join("*" if isinstance(p, int) else _cut(p) for p in path)


def _quoted(value: Any) -> str:
    return repr(_cut(value)) if isinstance(value, str) else _cut(json.dumps(value))


def _cut(text: str) -> str:
    return text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"
