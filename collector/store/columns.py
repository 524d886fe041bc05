"""Columns read from the wire models: each names the field it holds, and its SQL type follows that field's annotation.

The run's shape is declared once, in ``schemas``; a table (``tables``) says only which fields it keeps as typed
columns, under which names, and what it supplies itself. A field that is renamed or removed in the models fails
here, when the tables are defined, instead of leaving a column NULL.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from uuid import UUID

from annotated_types import Ge, Gt, Le, Lt
from pydantic import AwareDatetime, BaseModel
from pydantic.fields import FieldInfo

#: The widest integer an ``INTEGER`` column holds: a field bounded within it gets one, any other a ``BIGINT``.
INT32 = 2**31 - 1


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    path: tuple[str, ...] = ()  # the field within the run (runs) or the element (other tables); () = supplied
    nullable: bool = True

    @property
    def whole(self) -> bool:
        """Whether the column keeps its field whole, as JSON (params, metrics, tags: nothing sent is lost)."""
        return self.sql == "JSON"


def supplied(name: str, sql: str, nullable: bool = True) -> Column:
    """A column the store fills itself (the run's id in every table, its arrival, its payload)."""
    return Column(name, sql, (), nullable)


class Fields:
    """Columns from the fields of ``models``: one model, or the kinds of a union (a column then holds the field of
    whichever kind has it, NULL for the others). ``columnar``: each field is a tuple whose entries are the rows."""

    def __init__(self, *models: type[BaseModel], columnar: bool = False) -> None:
        self.models = models
        self.columnar = columnar

    def column(self, name: str, *path: str, sql: str | None = None, nullable: bool = True) -> Column:
        """The field at ``path`` (default: ``name``) as a column; ``sql`` overrides the derived type (a width fixed
        by the first layout: a column keeps its type once files exist)."""
        path = path or (name,)
        found = [sql_type(_element(f) if self.columnar else f) for f in self.field_infos(path)]
        if not found:
            raise KeyError(f"no model of {[m.__name__ for m in self.models]} has a field {'.'.join(path)}")
        derived = found[0]
        if any(other != derived for other in found):
            raise TypeError(f"the models disagree on the type of {'.'.join(path)}: {found}")
        return Column(name, sql or derived, path, nullable)

    def json(self, name: str, *path: str, nullable: bool = True) -> Column:
        """The field at ``path`` kept whole, as JSON."""
        path = path or (name,)
        if not self.field_infos(path):
            raise KeyError(f"no model of {[m.__name__ for m in self.models]} has a field {'.'.join(path)}")
        return Column(name, "JSON", path, nullable)

    def each(
        self,
        *under: str,
        but: Iterable[str] = (),
        sql: Mapping[str, str] | None = None,
        name: str = "{}",
        not_null: Iterable[str] = (),
    ) -> tuple[Column, ...]:
        """A column for every field of the model at ``under`` (every kind's, in order of first appearance) but those
        in ``but``; ``name`` formats each column's name from its field's; ``not_null``: fields always given."""
        left = set(but)
        widths = sql or {}
        every = dict.fromkeys(f for model in self.submodels(under) for f in model.model_fields)
        required = set(not_null)
        if unknown := (left | set(widths) | required) - set(every):
            raise KeyError(f"{'.'.join(under) or 'the models'} have no fields {sorted(unknown)}")
        fields = [f for f in every if f not in left]
        return tuple(self.column(name.format(f), *under, f, sql=widths.get(f), nullable=f not in required)
                     for f in fields)  # fmt: skip

    def submodels(self, path: tuple[str, ...]) -> list[type[BaseModel]]:
        """The models found at ``path`` (the roots themselves for ``()``)."""
        found = list(self.models)
        for part in path:
            found = [m for model in found if part in model.model_fields for m in _models(model.model_fields[part])]
        return found

    def field_infos(self, path: tuple[str, ...]) -> list[FieldInfo]:
        *head, last = path
        return [m.model_fields[last] for m in self.submodels(tuple(head)) if last in m.model_fields]


def _models(info: FieldInfo) -> list[type[BaseModel]]:
    """The models a field holds (one, or the kinds of a union; None left out), or its entries hold (a tuple)."""
    kind, _ = _unwrap(info.annotation, [])
    args = get_args(kind)
    if get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis:
        kind, _ = _unwrap(args[0], [])
    options = get_args(kind) if get_origin(kind) in (Union, types.UnionType) else (kind,)
    return [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]


def _element(info: FieldInfo) -> FieldInfo:
    """A tuple field's entries, as a field of their own (a columnar table's rows)."""
    kind, _ = _unwrap(info.annotation, [])
    args = get_args(kind)
    if get_origin(kind) is not tuple or len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"a columnar field must be a tuple of entries, not {kind}")
    return FieldInfo.from_annotation(args[0])


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    """The type under Optional and Annotated, and every constraint met on the way."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            for item in extra:
                metadata += item.metadata if isinstance(item, FieldInfo) else [item]
        elif origin in (Union, types.UnionType) and type(None) in get_args(annotation):
            options = [a for a in get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation, metadata
            annotation = options[0]
        else:
            return annotation, metadata


def sql_type(info: FieldInfo) -> str:
    """The SQL type of a field: text (strings, literals) VARCHAR, numbers DOUBLE, integers INTEGER when bounded
    within 32 bits and BIGINT otherwise, tuples of text VARCHAR[]."""
    kind, metadata = _unwrap(info.annotation, list(info.metadata))
    if get_origin(kind) is Literal and all(isinstance(a, str) for a in get_args(kind)):
        return "VARCHAR"
    if get_origin(kind) is tuple:
        args = get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"{sql_type(FieldInfo.from_annotation(args[0]))}[]"
    simple = {str: "VARCHAR", bool: "BOOLEAN", float: "DOUBLE", UUID: "UUID"}
    if kind in simple:
        return simple[kind]
    if kind in (datetime, AwareDatetime):
        return "TIMESTAMPTZ"
    if kind is int:
        lows: list[Any] = [m.ge if isinstance(m, Ge) else m.gt for m in metadata if isinstance(m, Ge | Gt)]
        highs: list[Any] = [m.le if isinstance(m, Le) else m.lt for m in metadata if isinstance(m, Le | Lt)]
        small = bool(lows and highs) and max(lows) >= -INT32 - 1 and min(highs) <= INT32
        return "INTEGER" if small else "BIGINT"
    raise TypeError(f"no SQL type for {kind}: keep such a field whole as JSON")
