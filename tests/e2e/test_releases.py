"""Two releases exchange runs both ways: this checkout and an earlier commit of this repository (its source, taken
from git, run in child processes), each agent's real run to the other's collector, nothing lost and nothing refused
that the contract allows (docs/contract.md).

``EARLIER`` is the last commit before the versioned contract: its collector is strict and states no version, so this
checkout's agent writes runs it reads (``schemas.contract.PLAIN_MINOR``) and holds one it cannot (a newer minor's,
made here from a real run). When a minor adds to the run, this agent's runs are no longer plain 1.0 runs and the
first test fails: ``EARLIER`` then moves to a release that has the contract's tolerance, whose collector must store
them, and the held run's test to a collector from before it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.run.config import UploadConfig
from agent.run.upload import deliver, new_client
from schemas import RunSubmission
from schemas.contract import THIS
from tests.conftest import HANG_GUARD_S, ROOT, agent_cli
from tests.servers import Collector, CollectorProcess, serve_collector

#: 2026-12-04: the last commit before the versioned contract.
EARLIER = "469ec1872e456640dfbf59f08a27b9f42233c968"
#: What of it the test runs: the three packages and the tiny suite's plugin.
TAKEN = ("agent", "collector", "schemas", "tests/__init__.py", "tests/agent/__init__.py", "tests/agent/tiny_suite.py")
TINY = {"FLOPFLEET_PLUGINS": "tests.agent.tiny_suite"}
#: An agent's run command and the run file it wrote.
Measured = tuple[subprocess.CompletedProcess[str], Path]
POSTS = re.compile(r'^flopfleet_http_requests_total\{method="POST",route="/api/v1/runs",[^}]*\} (\S+)$', re.M)


@dataclass
class Earlier:
    root: Path
    collector: CollectorProcess
    token: str

    def env(self, **more: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.root), "COLUMNS": "200", **more}

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _source(into: Path) -> Path:
    """The earlier commit's source (``git archive``), or a skip that says why a checkout without history cannot."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the earlier release comes from the repository's history")
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{EARLIER}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"commit {EARLIER[:10]} is not in this clone (a shallow one?): fetch the history to run this")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", EARLIER, *TAKEN], capture_output=True,
                             check=True)  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Earlier]:
    """The earlier release's collector, serving in its own process from its own source."""
    root = _source(tmp_path_factory.mktemp("earlier"))
    db = tmp_path_factory.mktemp("earlier-db") / "earlier.duckdb"
    env = {**os.environ, "PYTHONPATH": str(root)}
    made = subprocess.run([sys.executable, "-m", "collector", "token", "create", "--name", "agents", "--db", str(db),
                           "--create", "--scope", "write", "--scope", "read"], capture_output=True, text=True, cwd=root,
                          env=env, timeout=HANG_GUARD_S)  # fmt: skip
    assert made.returncode == 0, made.stderr
    collector = CollectorProcess(db, env={"PYTHONPATH": str(root)}, root=root)
    try:
        yield Earlier(root, collector, made.stdout.strip())
    finally:
        collector.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with serve_collector(tmp_path_factory.mktemp("this") / "this.duckdb") as collector:
        yield collector


@pytest.fixture(scope="module")
def this_run(earlier: Earlier, tmp_path_factory: pytest.TempPathFactory) -> Measured:
    """This checkout's agent measuring a real run and posting it to the earlier collector."""
    out = tmp_path_factory.mktemp("this-run") / "run.json"
    spool = out.parent / "spool"
    done = agent_cli("run", "--suite", "tiny", "--device", "cpu", "--collector", earlier.collector.url, "--token",
                     earlier.token, "--output", str(out), "-q", "--spool-dir", str(spool), env=TINY)  # fmt: skip
    return done, out


def _stored(url: str, run_id: str, auth: dict[str, str]) -> Any:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}", headers=auth)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _posts(url: str, auth: dict[str, str]) -> float:
    """Runs posted to the collector so far, whatever its answers."""
    return sum(float(n) for n in POSTS.findall(httpx.get(f"{url}/metrics", headers=auth).text))


def test_this_agent_s_run_is_stored_whole_by_the_earlier_collector(this_run: Measured, earlier: Earlier) -> None:
    done, out = this_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored by the collector (HTTP 201)" in done.stdout
    sent = json.loads(out.read_text())
    assert _stored(earlier.collector.url, sent["run_id"], earlier.auth) == sent
    assert sent["schema_version"] == THIS.major and "schema_minor" not in sent  # a plain 1.0 run, as it has to be


def test_an_earlier_agent_s_run_is_stored_whole_by_this_collector(
    earlier: Earlier, served: Collector, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    done = subprocess.run(
        [sys.executable, "-m", "agent", "run", "--suite", "tiny", "--device", "cpu", "--collector", served.url,
         "--token", served.token, "--output", str(out), "-q", "--spool-dir", str(tmp_path / "spool")],
        capture_output=True, text=True, cwd=earlier.root, env=earlier.env(**TINY), timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored by the collector (HTTP 201)" in done.stdout  # its strict reading of this collector's receipt
    sent = json.loads(out.read_text())
    assert _stored(served.url, sent["run_id"], served.auth) == sent
    listed = httpx.get(f"{served.url}/api/v1/runs", headers=served.auth).json()["data"]
    mine = next(r for r in listed if r["run_id"] == sent["run_id"])
    assert (mine["contract"], mine["not_understood"]) == ("1.0", [])


def _newer(run: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A real run as a newer agent would write it: a field and a flag this checkout does not know."""
    newer = {**json.loads(json.dumps(run)), **changes, "fleet_zone": "eu-1"}
    newer["results"][0]["timing"]["gpu_busy_share"] = 0.97
    newer["results"][0]["flags"] = [*newer["results"][0].get("flags", []), "cold_cache"]
    return newer


def _spool(folder: Path, run: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"20261206T000000Z-{run['run_id']}.json"
    path.write_text(json.dumps(run))
    return path


def _push(url: str, token: str, spool: Path) -> subprocess.CompletedProcess[str]:
    return agent_cli("push", "--collector", url, "--token", token, "--spool-dir", str(spool))


def test_a_newer_minor_s_run_is_stored_here_and_held_for_the_earlier_collector(
    this_run: Measured, earlier: Earlier, served: Collector, tmp_path: Path
) -> None:
    run = json.loads(this_run[1].read_text())
    newer = _newer(run, schema_minor=THIS.minor + 1)
    path = _spool(tmp_path / "spool", newer)
    before = _posts(earlier.collector.url, earlier.auth)
    held = _push(earlier.collector.url, earlier.token, path.parent)
    assert held.returncode == 78, held.stdout + held.stderr
    said = " ".join(held.stderr.split())
    assert "held, not sent: the collector predates flopfleet's versioned contract" in said
    assert f"this run is {THIS.major}.{THIS.minor + 1}: upgrade the collector" in said
    assert path.exists() and _posts(earlier.collector.url, earlier.auth) == before  # asked, not sent

    # A run refused on its post (no push to ask first): held too, by what the refusal lacks (no contract said).
    plain = RunSubmission.model_validate_json(this_run[1].read_text())
    with new_client() as client:
        config = UploadConfig(collector_url=earlier.collector.url, token=earlier.token, spool_dir=tmp_path / "kept")
        delivery = deliver(plain.model_copy(update={"schema_minor": THIS.minor + 1}), config, client)
    assert delivery.status == "held" and "predates flopfleet's versioned contract" in delivery.detail, delivery
    assert delivery.path is not None and delivery.path.exists()

    stored = _push(served.url, served.token, path.parent)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    said = " ".join(stored.stdout.split())
    assert f"stored by the collector (HTTP 201; the collector ({THIS}) did not understand:" in said
    assert "flag 'cold_cache' of results.*.flags: stored; results carrying it are left out of figures" in said
    assert not path.exists()
    assert _stored(served.url, newer["run_id"], served.auth) == newer  # whole, as sent


def test_a_run_of_a_newer_major_is_held_and_not_sent_again(
    this_run: Measured, served: Collector, tmp_path: Path
) -> None:
    run = json.loads(this_run[1].read_text())
    path = _spool(tmp_path / "spool", _newer(run, schema_version=THIS.major + 1))
    before = _posts(served.url, served.auth)
    for _ in range(2):  # said each push, once for the runs it holds; sent never
        held = _push(served.url, served.token, path.parent)
        assert held.returncode == 78, held.stdout + held.stderr
        said = " ".join(held.stderr.split())
        assert said.count("held, not sent:") == 1
        assert (f"the collector reads contract {THIS.major}.x (it is {THIS}); this run is {THIS.major + 1}.0: upgrade "
                "the collector; the runs stay in the spool") in said  # fmt: skip
        assert path.exists() and _posts(served.url, served.auth) == before


_READ_VERDICTS = """
import sys, httpx
from pydantic import TypeAdapter
from schemas.verdicts import GpuVerdict
answer = httpx.get(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
verdicts = TypeAdapter(list[GpuVerdict]).validate_json(answer.content)
print(len(verdicts), len(verdicts[0].figures), verdicts[0].level.value)
"""


def test_an_earlier_agent_reads_this_collector_s_verdicts_and_this_one_gets_what_they_gained(
    earlier: Earlier, served: Collector
) -> None:
    from schemas.contract import request_headers
    from tests.factories import bandwidth, gpu, layer, make_run, matmul

    results = [matmul(8192, "bf16", 700.0), bandwidth(1 << 28, 3000.0), layer("bert_layer", "fwd+bwd", 64, 512, 440.0)]
    host = gpu(uuid="GPU-0e0e0e0e-0000-4000-8000-000000000001")
    run = make_run(results, gpus=[host], hostname="verdict-host")
    posted = httpx.post(f"{served.url}/api/v1/runs", content=run.model_dump_json(), headers={
        **served.auth, "Content-Type": "application/json"})  # fmt: skip
    assert posted.status_code in (200, 201), posted.text
    url = f"{served.url}/api/v1/verdicts?host=verdict-host"
    # The earlier release's strict models, in a process of its own, read the answer it gets (no contract stated).
    done = subprocess.run([sys.executable, "-c", _READ_VERDICTS, url, served.token], capture_output=True, text=True,
                          cwd=earlier.root, env=earlier.env(), timeout=HANG_GUARD_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["1", "3"]
    # This checkout's agent states its contract and gets which reference judged each figure.
    figures = httpx.get(url, headers={**served.auth, **request_headers()}).json()[0]["figures"]
    assert all(f["held_to"] and f["healthy_down_to"] is not None for f in figures)
    plain = httpx.get(url, headers=served.auth).json()[0]["figures"]
    assert all("held_to" not in f for f in plain)
