"""The agent's settings: file, environment and flags in that order of precedence, the token from a file, ``config
show`` saying where each value came from, and a run configured by file alone reaching a real collector."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli.settings import load_file, read_token, resolve
from agent.errors import ConfigError
from tests.conftest import agent_cli
from tests.servers import serve_collector

PLUGINS = {"FLOPFLEET_PLUGINS": "tests.agent.tiny_suite"}


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path, 'suite = "standard"\ndevice = "cpu"\ncase_timeout = 60\n[tags]\nrack = "b7"\n')
    env = {"FLOPFLEET_SUITE": "full", "FLOPFLEET_CASE_TIMEOUT": "90"}
    got = resolve({"case_timeout": 30.0}, env, path)
    assert (got["suite"], got.sources["suite"]) == ("full", "env FLOPFLEET_SUITE")
    assert (got["case_timeout"], got.sources["case_timeout"]) == (30.0, "flag")
    assert (got["device"], got.sources["device"]) == ("cpu", f"file {path}")
    assert got["tags"] == {"rack": "b7"} and (got["isolation"], got.sources["isolation"]) == ("process", "default")
    assert resolve({}, {"FLOPFLEET_TAGS": "rack=c1, row=4"}, path)["tags"] == {"rack": "c1", "row": "4"}


def test_the_token_comes_from_a_file_and_never_from_the_config_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("ffk_secret\n", encoding="utf-8")
    path = _file(tmp_path, f'token_file = "{secret}"\n')
    got = resolve({}, {}, path)
    assert got.token == "ffk_secret" and got.token_source == f"token_file (file {path})"
    assert resolve({}, {"FLOPFLEET_TOKEN": "ffk_env"}, path).token == "ffk_env"
    assert resolve({}, {}, path, token_flag="ffk_flag").token_source == "flag"
    with pytest.raises(ConfigError, match="put the token in a file of its own"):
        load_file(_file(tmp_path, 'token = "ffk_plain"\n'))
    with pytest.raises(ConfigError, match="is empty"):
        read_token(_file(tmp_path, "\n"))
    with pytest.raises(ConfigError, match="No such file"):
        resolve({}, {"FLOPFLEET_TOKEN_FILE": str(tmp_path / "missing")})


def test_a_bad_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) colector"):
        load_file(_file(tmp_path, 'colector = "http://x"\n'))
    with pytest.raises(ConfigError, match=r"case_timeout must be a number, not 'soon'"):
        load_file(_file(tmp_path, 'case_timeout = "soon"\n'))
    with pytest.raises(ConfigError, match="is not TOML"):
        load_file(_file(tmp_path, "suite = \n"))
    with pytest.raises(ConfigError, match="parallel must be true or false"):
        resolve({}, {"FLOPFLEET_PARALLEL": "sometimes"})


def test_config_show_says_what_is_in_force_and_where_it_came_from(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("ffk_never_printed\n", encoding="utf-8")
    path = _file(tmp_path, f'collector = "http://collector:8000"\ntoken_file = "{secret}"\nsuite = "standard"\n')
    done = agent_cli("config", "show", "--json", "--config", str(path), env={"FLOPFLEET_SUITE": "health"})
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["file"] == str(path)
    assert shown["settings"]["suite"] == {"value": "health", "source": "env FLOPFLEET_SUITE"}
    assert shown["settings"]["collector"]["source"] == f"file {path}"
    assert shown["token"] == {"set": True, "source": f"token_file (file {path})"}
    table = agent_cli("config", "show", "--config", str(path)).stdout
    assert "http://collector:8000" in table and "ffk_never_printed" not in table + done.stdout


def test_a_run_configured_by_its_file_alone_reaches_the_collector(tmp_path: Path) -> None:
    with serve_collector(tmp_path / "c.duckdb") as site:
        secret = tmp_path / "token"
        secret.write_text(site.token + "\n", encoding="utf-8")
        path = _file(tmp_path, f'collector = "{site.url}"\ntoken_file = "{secret}"\nsuite = "tiny"\ndevice = "cpu"\n'
                               f'spool_dir = "{tmp_path / "spool"}"\n[tags]\nrack = "b7"\n')  # fmt: skip
        done = agent_cli("run", "-q", env={**PLUGINS, "FLOPFLEET_CONFIG": str(path)})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "stored by the collector" in done.stdout
    from collector.store import Store

    with Store(site.db, read_only=True) as store:
        assert store.sql("SELECT suite, tags->>'rack' FROM runs").rows == [("tiny", "b7")]
