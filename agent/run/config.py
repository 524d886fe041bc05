"""The one validated, frozen configuration a run takes from the CLI into plain functions."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from schemas.results import AttentionImplementation

from ..devices import KINDS, device
from ..distributed.nodes import Nodes
from ..errors import ConfigError
from ..launchers import ISOLATIONS, Isolation
from ..machine.occupancy import DEFAULT_WAIT_S, WhenBusy, check_when_busy
from ..machine.priority import Priority, check_priority

ATTENTION: tuple[AttentionImplementation, ...] = ("sdpa", "eager", "flash_attention_2")
_TAG = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.+-]{0,63})=(.{0,256})$")
#: One label of a host name (underscores too: container and compose service names have them).
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def default_spool_dir(environ: Mapping[str, str]) -> Path:
    """Under the user's cache directory, honouring XDG_CACHE_HOME."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(cache) / "flopfleet" / "spool"


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for pair in pairs:
        match = _TAG.match(pair)
        if not match:
            raise ConfigError(f"--tag {pair!r} is not key=value (key: letters, digits, _.+-; up to 64 characters)")
        tags[match.group(1)] = match.group(2)
    return tags


def parse_gpus(text: str | None) -> tuple[int, ...] | None:
    """'all' or None -> every GPU; '0,2' -> (0, 2)."""
    if text is None or text.strip().lower() == "all":
        return None
    try:
        indices = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--gpus {text!r} is not 'all' or a comma-separated list of indices like 0,1") from None
    if not indices or any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise ConfigError(f"--gpus {text!r} must name distinct non-negative indices")
    return indices


def check_collector_url(url: str) -> str:
    """``url`` if a run can be sent to it: http(s), a host name or IP address, a port in 1..65535, no credentials,
    query or fragment. Checked before anything is measured, so a typo costs no run."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"--collector {url!r} is not an http(s) URL like http://host:8000: {why}")

    if any(c.isspace() or not c.isprintable() for c in url):
        raise bad("it contains a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # an unclosed [IPv6 address], a port that is not a number or out of range
        raise bad(str(exc)) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise bad(f"the scheme is {parts.scheme or 'missing'!r}, not http or https")
    if parts.username is not None or parts.password is not None:
        raise bad("credentials do not belong in it (the token goes in --token-file)")
    if parts.query or parts.fragment:
        raise bad("a collector's base URL has no query or fragment")
    if port == 0:
        raise bad("port 0 is not a port a collector listens on")
    if not parts.hostname:
        raise bad("it names no host")
    if not _is_host(parts.hostname, bracketed="[" in parts.netloc):
        raise bad(f"{parts.hostname!r} is not a host name or an IP address")
    return url


def _is_host(host: str, *, bracketed: bool) -> bool:
    """An IPv6 address in brackets, an IPv4 address, or a host name (IDNA-encodable, labels of up to 63)."""
    try:
        if bracketed:
            ipaddress.IPv6Address(host.split("%", 1)[0])
            return True
        labels = host.encode("idna").decode("ascii").rstrip(".").split(".")
    except (ValueError, UnicodeError):
        return False
    if all(label.isdigit() for label in labels):  # dotted numbers are an IPv4 address or nothing
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
        return True
    return len(host) <= 253 and all(_LABEL.match(label) for label in labels)


@dataclass(frozen=True)
class UploadConfig:
    collector_url: str | None = None
    token: str | None = None
    spool_dir: Path = field(default_factory=lambda: default_spool_dir(os.environ))
    retries: int = 4
    timeout_s: float = 30.0  # one deadline per attempt: connect, send and the whole answer

    def __post_init__(self) -> None:
        if self.collector_url is not None:
            check_collector_url(self.collector_url)
        if self.retries < 0:
            raise ConfigError("retries must be >= 0")
        if not 0 < self.timeout_s <= 3600:
            raise ConfigError(f"the upload timeout {self.timeout_s} s is not between 0 and 3600 seconds")


@dataclass(frozen=True)
class RunConfig:
    suite: str = "quick"
    device: str = "cpu"
    gpus: tuple[int, ...] | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    time_budget_s: float | None = None
    attn_implementation: AttentionImplementation = "sdpa"
    tags: dict[str, str] = field(default_factory=dict)
    output: Path | None = None
    upload: UploadConfig = field(default_factory=UploadConfig)
    nodes: Nodes = field(default_factory=Nodes)
    parallel: bool = False  # measure the GPUs at once (one process each) instead of one after another
    isolation: Isolation = "process"  # where device cases run: a child process per device, or the agent's own
    case_timeout_s: float | None = None  # a device case making no progress this long is a hang (None: generous)
    when_busy: WhenBusy = "skip"  # a GPU another process uses: skipped (reason given), waited for, or measured
    busy_wait_s: float = DEFAULT_WAIT_S  # how long ``wait`` waits for busy GPUs (or a busy host, at low) to be idle
    priority: Priority = "normal"  # the agent's CPU and I/O priority (``priority.apply``; the CLI applies it)

    def __post_init__(self) -> None:
        if self.device not in KINDS:
            raise ConfigError(f"--device {self.device!r} is not one of: {', '.join(KINDS)}")
        if self.parallel and not device(self.device).is_gpu:
            raise ConfigError("--parallel measures several GPUs at once; it needs --device cuda")
        if self.isolation not in ISOLATIONS:
            raise ConfigError(f"--isolation {self.isolation!r} is not one of: {', '.join(ISOLATIONS)}")
        if self.parallel and self.isolation != "process":
            raise ConfigError("--parallel measures each GPU in its own process; it needs --isolation process")
        if self.case_timeout_s is not None and not 0 < self.case_timeout_s <= 86_400:
            raise ConfigError(f"--case-timeout {self.case_timeout_s} must be a number of seconds in (0, 86400]")
        check_when_busy(self.when_busy)
        check_priority(self.priority)
        if not 0 <= self.busy_wait_s <= 86_400:
            raise ConfigError(f"--busy-wait {self.busy_wait_s} must be a number of seconds in [0, 86400]")
        if self.attn_implementation not in ATTENTION:
            raise ConfigError(f"--attn {self.attn_implementation!r} is not one of: {', '.join(ATTENTION)}")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ConfigError(f"--time-budget {self.time_budget_s} must be a positive number of seconds")
        if len(self.tags) > 32:
            raise ConfigError("at most 32 --tag options")
