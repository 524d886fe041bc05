"""Every exception the agent defines, in one tree; the CLI catches ``AgentError`` once and exits non-zero.

Exception
 ├── AgentError               what a user is told: one line, the bad value and what is allowed; no traceback
 │    ├── ConfigError         a flag or option has a value the agent cannot use
 │    ├── DeviceError         the requested device is not there
 │    ├── CollectorRefused    the collector refused the token, or the URL is not a flopfleet collector: a permanent
 │    │                       error (exit 78), found by the first contact before anything is measured
 │    ├── HostBusy            at low priority the host is too busy to measure (``--when-busy skip``, or ``wait``
 │    │                       ran out): nothing measured, try later (exit 75)
 │    └── SpoolError          a run cannot be written to the spool, or a spooled file cannot be read
 │         └── NotARegularFile  a spool entry is a FIFO, a symbolic link, a directory …: skipped, never opened
 ├── Unsupported              a case this device cannot run: the case's status becomes 'unsupported'
 ├── NoAnswer                 the collector was not reached, hung up, or missed the deadline: ``upload`` retries
 └── ChildGone                a measuring child process died or hung: its case fails, a fresh child goes on
The last three never reach a user as errors: they become a result's status or a delivery's reason. So does every
other failure inside a benchmark (out of memory: ``is_oom``; any exception: 'error', with its traceback logged).
"""

from __future__ import annotations


class AgentError(Exception):
    """Base of every error the agent reports to a user."""


class ConfigError(AgentError):
    pass


class DeviceError(AgentError):
    pass


class CollectorRefused(AgentError):
    """Sending again will not help: a person must fix the token or the URL (``contact.first_contact``)."""


class HostBusy(AgentError):
    """Said before anything starts (``starvation.decide_host``): a run at nice 19 on a busy host would take many times
    its usual time and measure the host, not the GPU."""


class SpoolError(AgentError):
    pass


class NotARegularFile(SpoolError):
    """Never opened blocking or followed: a FIFO would hang ``push``, a link would send a file from elsewhere."""


class Unsupported(Exception):
    """Raised by a benchmark case the device cannot run; the runner records status 'unsupported'."""


class NoAnswer(Exception):
    """The collector could not be reached, hung up, or did not answer before the deadline."""


class ChildGone(Exception):
    """The child stopped answering: died, or hung and was stopped; the message says which."""


def is_oom(exc: BaseException) -> bool:
    """A device allocator's OutOfMemoryError, or the CPU allocator's refusal: both become an 'oom' result."""
    import torch

    # torch >= 2.5 names it for every device; older releases only under torch.cuda (the same class).
    out_of_memory = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    if isinstance(exc, out_of_memory):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
