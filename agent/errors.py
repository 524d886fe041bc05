"""The agent's errors; the CLI catches ``AgentError`` once and exits non-zero with its message.

AgentError
 ├── ConfigError          a flag or option has a value the agent cannot use
 ├── DeviceError          the requested device is not there
 ├── UploadError          the collector refused the run (4xx): sending again will not help
 └── SpoolError           a run cannot be written to the spool, or a spooled file cannot be read
      └── NotARegularFile a spool entry is a FIFO, a symbolic link, a directory …: skipped, never opened
Benchmark-level failures are not errors here: they become a result's status (see ``runner``).
"""

from __future__ import annotations


class AgentError(Exception):
    """Base of every error the agent reports to a user."""


class ConfigError(AgentError):
    pass


class DeviceError(AgentError):
    pass


class UploadError(AgentError):
    pass


class SpoolError(AgentError):
    pass


class NotARegularFile(SpoolError):
    """Never opened blocking or followed: a FIFO would hang ``push``, a link would send a file from elsewhere."""


class Unsupported(Exception):
    """Raised by a benchmark case the device cannot run; the runner records status 'unsupported'."""


def is_oom(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, or the CPU allocator's refusal: both become an 'oom' result."""
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
