"""Help screens that read like the tools people know (``--output PATH``, ``--quiet``), for both CLIs.

typer (0.29) prints each parameter's Python type where a value's name goes: ``--quiet <bool>``, ``--tag
<list[str]>``, even ``--help <bool>``. ``plain_help`` gives every option without a metavar of its own one as
argparse would: none for a flag, the choices of an enum, PATH, N, SECONDS (a float is a duration in both CLIs),
or the option's name in capitals; an argument is shown by its name alone.
"""

from __future__ import annotations

from typing import Any, get_args

import typer
from typer.main import get_command


def plain_help(app: typer.Typer) -> Any:
    """``app`` as the click command that ``app()`` would run, with plain metavars throughout."""
    command = get_command(app)
    _plain(command)
    return command


def _plain(command: Any) -> None:
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
