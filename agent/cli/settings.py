"""The agent's settings from three places, flags over environment over file: what ``run`` and ``check`` take.

A fleet configures the agent once per machine (``/etc/flopfleet/agent.toml``, or ``--config`` /
``FLOPFLEET_CONFIG``), a scheduler per job through the environment (``FLOPFLEET_<KEY>``), a person per command with
flags. The token is read from a file (``token_file``, ``--token-file``, ``FLOPFLEET_TOKEN_FILE``) so that it never
sits in a process list, a manifest or the config file itself; ``FLOPFLEET_TOKEN`` and ``--token`` still work.
``resolve`` says where each value came from, which ``flopfleet-agent config show`` prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

SYSTEM_PATH = Path("/etc/flopfleet/agent.toml")
CONFIG_ENV = "FLOPFLEET_CONFIG"
#: A token file larger than this is no token (a path mistyped to a log, say).
MAX_TOKEN_BYTES = 4096


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a non-empty string")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("a number")
    try:
        return float(value)
    except ValueError:
        raise ValueError("a number") from None


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ValueError("true or false")


def _tags(value: object) -> dict[str, str]:
    """A TOML table, or ``key=value,key=value`` from the environment."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        pairs = [p for p in value.split(",") if p.strip()]
        if not all("=" in p for p in pairs):
            raise ValueError("key=value pairs separated by commas")
        return {k.strip(): v.strip() for k, v in (p.split("=", 1) for p in pairs)}
    raise ValueError("a table of key = value")


@dataclass(frozen=True)
class Key:
    parse: Callable[[object], Any]
    help: str
    default: Any = None


#: Every setting ``run`` and ``check`` read from a file or the environment, by its name in the file.
KEYS: dict[str, Key] = {
    "collector": Key(_text, "collector base URL"),
    "token_file": Key(_text, "file holding the bearer token for writes"),
    "spool_dir": Key(_text, "where undelivered runs wait"),
    "suite": Key(_text, "suite of `run` (check measures `health`)", "quick"),
    "device": Key(_text, "cuda or cpu (default: cuda when present)"),
    "gpus": Key(_text, "GPU indices, e.g. 0,1 (default: all)"),
    "isolation": Key(_text, "process or inline", "process"),
    "case_timeout": Key(_number, "seconds a case may make no progress"),
    "time_budget": Key(_number, "seconds; later cases are skipped"),
    "attn": Key(_text, "attention implementation", "sdpa"),
    "parallel": Key(_flag, "measure the GPUs at once", False),
    "tags": Key(_tags, "labels stored with every run", {}),
    "when_busy": Key(_text, "a GPU another process uses: skip, wait or measure", "skip"),
    "busy_wait": Key(_number, "seconds `wait` waits for busy GPUs", 600.0),
    "priority": Key(
        _text, "the agent's CPU and I/O priority: normal or low (yields to the host's other work)", "normal"
    ),
    "jitter": Key(_number, "seconds: start after a random delay up to this", 0.0),
}


def env_name(setting: str) -> str:
    return "FLOPFLEET_" + setting.upper()


@dataclass(frozen=True)
class Resolved:
    """Each setting's value and where it came from: ``flag``, ``env NAME``, ``file PATH`` or ``default``."""

    values: dict[str, Any]
    sources: dict[str, str]
    file: Path | None
    token: str | None = None
    token_source: str = "none"

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def config_path(flag: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The file to read: ``--config``, else ``FLOPFLEET_CONFIG``, else the system file if it exists."""
    if flag is not None:
        return flag
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    return SYSTEM_PATH if SYSTEM_PATH.is_file() else None


def load_file(path: Path) -> dict[str, Any]:
    """The file's settings, each checked; ConfigError naming the file and the key."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not TOML: {exc}") from None
    if "token" in raw:
        raise ConfigError(f"config file {path}: put the token in a file of its own and name it with token_file")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(KEYS)}")
    return {name: _parsed(name, value, f"config file {path}") for name, value in raw.items()}


def _parsed(name: str, value: object, where: str) -> Any:
    try:
        return KEYS[name].parse(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {name} must be {exc}, not {value!r}") from None


def resolve(
    flags: Mapping[str, Any], environ: Mapping[str, str], config: Path | None = None, token_flag: str | None = None
) -> Resolved:
    """Every setting, flags (those not None) over ``FLOPFLEET_<KEY>`` over the file over the default; the token
    from ``--token``, ``FLOPFLEET_TOKEN`` or the resolved ``token_file``, in that order."""
    path = config_path(config, environ)
    from_file = load_file(path) if path is not None else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, key in KEYS.items():
        env = env_name(name)
        if flags.get(name) is not None:
            values[name], sources[name] = flags[name], "flag"
        elif environ.get(env):
            values[name], sources[name] = _parsed(name, environ[env], f"environment {env}"), f"env {env}"
        elif name in from_file:
            values[name], sources[name] = from_file[name], f"file {path}"
        else:
            values[name], sources[name] = key.default, "default"
    token, token_source = None, "none"
    if token_flag:
        token, token_source = token_flag, "flag"
    elif environ.get("FLOPFLEET_TOKEN"):
        token, token_source = environ["FLOPFLEET_TOKEN"], "env FLOPFLEET_TOKEN"
    elif values["token_file"]:
        token, token_source = read_token(Path(values["token_file"])), f"token_file ({sources['token_file']})"
    return Resolved(values, sources, path, token, token_source)


def read_token(path: Path) -> str:
    """The token in ``path`` (its first line, stripped); ConfigError when it cannot be read or is empty."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"token file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise ConfigError(f"token file {path} is over {MAX_TOKEN_BYTES} bytes: not a token")
    lines = data.decode("utf-8", errors="replace").strip().splitlines()
    if not lines or not lines[0].strip():
        raise ConfigError(f"token file {path} is empty")
    return lines[0].strip()
