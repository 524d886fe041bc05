"""Kept for ``tests/agent`` (another branch's), which imports ``collector.tokens``: the token store is
``collector.web.tokens``; remove this once that import follows."""

from .web.tokens import TokenStore

__all__ = ["TokenStore"]
