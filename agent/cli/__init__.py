"""``flopfleet-agent``: parses flags, builds the config, calls plain functions, renders what they return.

One module per command (``info``, ``run``, ``check``, ``push``), the options they share (``options``), the one step
from options to a ``RunConfig`` and the steps before measuring (``common``), the settings they resolve
(``settings``) and the rendering (``render``); ``app`` assembles the command and holds ``main``."""

from .app import app, main
from .common import EXIT_FAILED, EXIT_KEPT, EXIT_REFUSED

__all__ = ["EXIT_FAILED", "EXIT_KEPT", "EXIT_REFUSED", "app", "main"]
