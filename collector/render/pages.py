"""Jinja templates for the report and the web pages: one environment, with number filters, autoescaped."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from schemas.health_figures import HEALTH_FIGURES

from .numbers import number


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _when(value: datetime | str | None) -> str:
    """A time for people: to the minute, in UTC."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


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
    env.filters.update(num=_num, pct=_pct, signed_pct=_signed_pct, when=_when, number=number)
    env.globals["health_figures"] = HEALTH_FIGURES  # the health table's columns, labelled as everywhere else
    return env


def render(template: str, **context: Any) -> str:
    context.setdefault("standalone", False)
    return environment().get_template(template).render(**context)
