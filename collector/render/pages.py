"""Jinja templates for the report and the web pages: one environment, with number filters, autoescaped."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from schemas.api import RUNS_PATH, SQL_PATH
from schemas.health_figures import HEALTH_FIGURES
from schemas.labels import HOSTNAME, SOFTWARE, software_text
from schemas.verdicts import REFERENCE_WORDS

from ..analysis.fleet import LEVELS, PAGE, Filter
from .fleet import list_url
from .numbers import number, percent
from .query import shown


def _when(value: datetime | str | None) -> str:
    """A time for people: to the minute, in UTC."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _version(value: str | None) -> str:
    """A software version, or ``none`` where the run had none (a CPU run's CUDA), never ``None``."""
    return "none" if value is None else value


def _signed_pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("collector", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pct=percent, signed_pct=_signed_pct, when=_when, number=number, version=_version,
                       software=software_text, shown=shown)  # fmt: skip
    # The words a column is headed with, defined once (schemas.labels, schemas.verdicts).
    env.globals.update(
        HOSTNAME=HOSTNAME,
        SOFTWARE=SOFTWARE,
        HEALTH_FIGURES=HEALTH_FIGURES,
        REFERENCE_WORDS=REFERENCE_WORDS,
        RUNS_PATH=RUNS_PATH,
        SQL_PATH=SQL_PATH,
        LEVELS=LEVELS,
        EVERY_GPU=Filter(),
        PAGE=PAGE,
        list_url=list_url,
    )
    return env


def render(template: str, **context: Any) -> str:
    context.setdefault("standalone", False)
    return environment().get_template(template).render(**context)
