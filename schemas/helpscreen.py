"""Help screens that read like the tools people know (``--output PATH``, ``--quiet``), for both CLIs.

typer (0.29) prints each parameter's Python type where a value's name goes: ``--quiet <bool>``, ``--tag
<list[str]>``, even ``--help <bool>``. ``plain_help`` gives every option without a metavar of its own one as
argparse would: none for a flag, the choices of an enum, PATH, N, SECONDS (a float is a duration in both CLIs),
or the option's name in capitals; an argument is shown by its name alone.

The screen is click's plain one, as argparse lays it out, not typer's Rich panels: at 80 columns those squeeze an
option's help into a column a fifth of the width, cut words longer than it (``FLOPFLEET_COLLECTO…``) and break a
docstring's paragraphs at its source line ends. Here every paragraph is filled to the width, words are never cut
or split at their hyphens (``--token-file``), and a command list shows each command's first paragraph whole.
"""

from __future__ import annotations

import textwrap
from typing import Any, get_args

import typer
from typer.main import get_command


def plain_help(app: typer.Typer) -> Any:
    """``app`` as the click command that ``app()`` would run, with plain metavars throughout."""
    command = get_command(app)
    _plain(command)
    return command


def _plain(command: Any) -> None:
    command.rich_markup_mode = None  # click's layout (typer uses Rich for help and usage errors otherwise)
    command.context_class = type("PlainContext", (command.context_class,),
                                 {"formatter_class": _formatter(command.context_class.formatter_class)})  # fmt: skip
    if command.help and not command.short_help:
        command.short_help = " ".join(command.help.strip().split("\n\n")[0].split())
    help_option = command.get_help_option(command.context_class(command))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if param.param_type_name == "argument":
            param.metavar = param.metavar or param.name.upper()
            param.display_type_rich = _no_type  # typer shows an argument's type beside its name, metavar or not
        elif param.metavar is None:
            param.metavar = _metavar(param)
    for sub in getattr(command, "commands", {}).values():
        _plain(sub)


def _no_type(ctx: Any) -> None:
    return None


def _metavar(option: Any) -> str:
    """typer 0.29 describes an option's type in ``type_descriptor``; the releases before it (GPU images carry them)
    are click's, whose ``type`` has a ``name``: "boolean", "choice", "path", "integer", "float"."""
    if getattr(option, "is_flag", False):
        return ""
    kind = getattr(option, "type_descriptor", None)
    if kind is not None:
        value = get_args(kind.annotation)[0] if kind.is_list else kind.annotation
        name = ("boolean" if value is bool else "choice" if kind.is_choice else "path" if kind.is_path or kind.is_file
                else {int: "integer", float: "float"}.get(value, ""))  # fmt: skip
        choices = kind.choices or ()
    else:
        name = getattr(option.type, "name", "")
        choices = getattr(option.type, "choices", ())
    if name == "boolean":
        return ""
    if name == "choice":
        return "|".join(str(getattr(c, "value", c)) for c in choices)
    if name in ("path", "filename", "file"):
        return "PATH"
    return {"integer": "N", "float": "SECONDS"}.get(name, str(option.name).upper())


def wrap(text: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    """``text``'s paragraphs (blank-line separated) each filled to ``width``, a blank line between them: never a
    word cut or split at a hyphen; a paragraph after a line holding only ``\\b`` is kept as written (click's rule)."""
    lines: list[str] = []
    for paragraph in textwrap.dedent(text).strip().split("\n\n"):
        if lines:
            lines.append("")
        start = indent if first is None or lines else first
        if paragraph.startswith("\b\n"):
            lines += [(start if i == 0 else indent) + line for i, line in enumerate(paragraph[2:].splitlines())]
            continue
        lines += textwrap.wrap(" ".join(paragraph.split()), width, initial_indent=start, subsequent_indent=indent,
                               break_long_words=False, break_on_hyphens=False) or [start.rstrip()]  # fmt: skip
    return lines


def _formatter(base: type) -> type:
    """click's help formatter (``base``), wrapping text and definition lists with ``wrap``."""

    class PlainFormatter(base):  # type: ignore[misc]
        def write_text(self, text: str) -> None:
            indent = " " * self.current_indent
            self.write("\n".join(wrap(text, self.width, indent)) + "\n")

        def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
            rows = [(str(first), str(second or "")) for first, second in rows]
            first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
            column = " " * (self.current_indent + first_col)
            for first, second in rows:
                lead = " " * self.current_indent + first
                if not second:
                    self.write(lead + "\n")
                    continue
                if len(first) > first_col - col_spacing:  # too long: its help starts on the next line
                    self.write(lead + "\n")
                    lead = column
                lines = wrap(second, self.width, column, lead.ljust(len(column)))
                self.write("\n".join(lines) + "\n")

    return PlainFormatter
