"""Text that came from a run or a collector, made safe to show in a terminal (both CLIs use it).

Names, reasons and collector messages are data, not formatting: Rich would read ``[link=…]`` or ``[/]`` in them as
markup (or crash on it), and a terminal would obey ESC sequences and carriage returns in them. Here every control
character becomes a visible escape and the result is a Rich ``Text``, which Rich never parses for markup.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

#: C0 and C1 controls (ESC, CR, BEL, newline, tab …) and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(value: object) -> str:
    """``value`` as text with every control character shown as an escape (``\\n``, ``\\e``, ``\\x07``)."""
    return _CONTROL.sub(_escape, str(value))


def literal(value: object, style: str = "") -> Text:
    """``printable(value)`` as a Rich ``Text``: printed as it is, never read as markup."""
    from rich.text import Text

    return Text(printable(value), style=style)


#: How each verdict level is coloured in both CLIs (``schemas.verdicts.Level`` values).
LEVEL_STYLE = {"ok": "green", "suspect": "yellow", "slow": "bold red", "faulty": "bold red", "unknown": "dim"}


def console(stderr: bool = False) -> Console:
    """The terminal's width on a terminal (or ``COLUMNS``); piped into a file, ``grep``, ``tee`` or a scheduler's log
    (cron, Slurm, CI), lines and tables at their own width instead of rich's default 80 columns, which cut a table's
    cells (``training…``) and a message's names in two. Both CLIs print through these."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or os.environ.get("COLUMNS"):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=1_000, soft_wrap=True)
