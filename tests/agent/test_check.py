"""``flopfleet-agent check``: its exit codes and lines against a real collector and without one, and the agent's own
judgement of a machine's runs (its GPUs against each other, a re-measurement, the bundled floors, the counters)."""

from __future__ import annotations

import json
import socket
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.run.check import judge_locally, not_measured
from collector.store import Store
from schemas import RunSubmission
from schemas.verdicts import Level
from tests.conftest import agent_cli
from tests.factories import T0, gpu, make_run, matmul
from tests.servers import serve_collector

H200 = "NVIDIA H200"
HERE = socket.gethostname()


def _machine(bf16: list[float], *, host: str = HERE, name: str = H200, hour: int = 0,
             gpus: list[dict[str, Any]] | None = None) -> RunSubmission:  # fmt: skip
    """One run of a machine with a GPU per value of ``bf16`` (its BF16 matmul TFLOPS)."""
    cards = gpus or [gpu(name, index=i, memory_gib=141, host=host) for i in range(len(bf16))]
    results = [matmul(8192, "bf16", v, gpu_index=card["index"]) for v, card in zip(bf16, cards, strict=True)]
    run_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-{hour}-{name}"))
    return make_run(results, gpus=cards, hostname=host, started=T0 + timedelta(hours=hour), run_id=run_id)


def test_a_machines_gpus_are_judged_against_each_other_and_the_floor() -> None:
    verdicts = judge_locally([_machine([680.0, 684.0, 678.0, 560.0])])
    assert [v.level for v in verdicts] == [Level.ok, Level.ok, Level.ok, Level.suspect]
    (figure,) = verdicts[3].figures
    assert (figure.peers, figure.peer_count, figure.failing) == (680.0, 3, 1)
    assert verdicts[3].reasons[0].startswith("BF16 matmul 560 TFLOPS is 18% below its 3 peers' median 680")
    assert all(v.judged_by == "agent" and v.host == HERE for v in verdicts)


def test_a_re_measurement_confirms_or_clears_a_failing_figure() -> None:
    first = _machine([680.0, 684.0, 678.0, 560.0])
    again_low = _machine([562.0], hour=1, gpus=[gpu(H200, index=3, memory_gib=141, host=HERE)])
    again_fine = _machine([681.0], hour=2, gpus=[gpu(H200, index=3, memory_gib=141, host=HERE)])
    confirmed = judge_locally([again_low, first])[3]
    assert confirmed.level is Level.slow and "in 2 of its last 2 measurements" in confirmed.reasons[0]
    assert judge_locally([again_fine, first])[3].level is Level.ok


def test_a_gpu_skipped_as_busy_is_unknown_whatever_earlier_runs_say() -> None:
    # GPU 1 was busy during this profile: its case was skipped, while the verdict (the collector's, from earlier
    # runs) says ok; the check could not tell now, so it says UNKNOWN and why. GPU 0 keeps its verdict.
    earlier = judge_locally([_machine([680.0, 681.0])])
    profile = _machine([680.0, 681.0], hour=1)
    skipped = profile.results[1].model_copy(update={"status": "skipped", "metrics": None, "timing": None,
                                                    "reason": "busy: 1 process, 87 % utilisation"})  # fmt: skip
    profile = profile.model_copy(update={"results": (profile.results[0], skipped)})
    assert [v.level for v in earlier] == [Level.ok, Level.ok]
    now = not_measured(earlier, profile)
    assert [v.level for v in now] == [Level.ok, Level.unknown]
    assert now[1].reasons[0] == "not measured now: busy: 1 process, 87 % utilisation"
    assert now[1].figures == earlier[1].figures


def test_a_lone_gpu_is_held_to_its_floor_and_an_unknown_one_is_unknown() -> None:
    assert judge_locally([_machine([680.0])])[0].level is Level.ok  # above 35 % of the 989 TFLOPS datasheet
    (lone,) = judge_locally([_machine([200.0])])
    assert lone.level is Level.suspect and "below its model's floor 346" in lone.reasons[0]
    (odd,) = judge_locally([_machine([50.0], name="Imaginary GPU 9000")])
    assert odd.level is Level.unknown and "no baseline or bundled floor for Imaginary GPU 9000" in odd.reasons[0]


def test_a_counter_makes_a_fast_gpu_faulty() -> None:
    cards = [gpu(H200, index=i, memory_gib=141, host=HERE) for i in range(2)]
    cards[1] = {**cards[1], "counters_after": {"ecc_uncorrected_volatile": 1}, "xid_events": [{"xid": 48, "t_s": 2.0}]}
    verdicts = judge_locally([_machine([680.0, 690.0], gpus=cards)])
    assert verdicts[1].level is Level.faulty
    assert verdicts[1].reasons[:2] == (
        "1 uncorrectable ECC error(s) since the driver loaded (ecc_uncorrected_volatile)",
        "XID 48 during the run: double-bit ECC error",
    )


def fleet_with_this_machine(path: Path, this_machine: list[float], *, name: str = H200, **gpu_fields: Any) -> None:
    """A collector database with three healthy H200 machines and this one (named as this host is)."""
    with Store(path) as store:
        for n in range(3):
            store.add_run(_machine([680.0 + n, 679.0], host=f"peer{n}"))
        cards = [gpu(name, index=i, memory_gib=141, host=HERE, **gpu_fields) for i in range(len(this_machine))]
        store.add_run(_machine(this_machine, name=name, gpus=cards))
        store.settle()


@pytest.mark.parametrize(
    ("this_machine", "fields", "name", "code", "word"),
    [
        ([681.0, 679.5], {}, H200, 0, "OK (ok)"),
        ([681.0, 560.0], {}, H200, 1, "WARNING (suspect)"),
        ([681.0, 680.0], {"counters_after": {"remapped_rows_failed": True}}, H200, 2, "CRITICAL (faulty)"),
        ([50.0], {}, "Imaginary GPU 9000", 3, "UNKNOWN (unknown)"),
    ],
)
def test_check_from_the_collector_exits_with_the_verdict(
    tmp_path: Path, this_machine: list[float], fields: dict[str, Any], name: str, code: int, word: str
) -> None:
    db = tmp_path / "fleet.duckdb"
    fleet_with_this_machine(db, this_machine, name=name, **fields)
    with serve_collector(db) as site:
        done = agent_cli("check", "--from-collector", "--collector", site.url, "--token", site.token, "--device",
                         "cpu")  # fmt: skip
        assert done.returncode == code, done.stdout + done.stderr
        assert word in done.stdout and "[judged by the collector]" in done.stdout
        as_json = agent_cli("check", "--from-collector", "--json", "--collector", site.url, "--token", site.token,
                            "--device", "cpu")  # fmt: skip
    body = json.loads(as_json.stdout)
    assert as_json.returncode == body["exit_code"] == code
    assert {v["host"] for v in body["verdicts"]} == {HERE} and len(body["verdicts"]) == len(this_machine)


def test_a_confirmed_shortfall_in_the_collectors_history_is_critical(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    fleet_with_this_machine(db, [681.0, 560.0])
    with Store(db) as store:
        store.add_run(_machine([680.0, 562.0], hour=1))  # a second low run of GPU 1
        store.settle()
    with serve_collector(db) as site:
        done = agent_cli("check", "--from-collector", "--collector", site.url, "--token", site.token, "--device",
                         "cpu")  # fmt: skip
    assert done.returncode == 2 and "CRITICAL (slow)" in done.stdout and "in 2 of its last 2" in done.stdout


def test_an_unreachable_collector_is_unknown_not_ok() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    done = agent_cli("check", "--from-collector", "--collector", f"http://127.0.0.1:{port}", "--device", "cpu")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "UNKNOWN" in done.stdout and "could not be read" in done.stdout


def test_a_mistyped_option_is_unknown_never_critical() -> None:
    # click's usage errors exit 2, which a prolog, Slurm's health check or NPD would read as a bad GPU.
    for args in (["check", "--bogus"], ["check", "--suite"], ["check", "--case-timeout", "soon"]):
        done = agent_cli(*args)
        assert done.returncode == 3, (args, done.stderr)
    assert agent_cli("run", "--bogus").returncode == 2  # other commands keep click's usage code


def test_check_measures_posts_the_profile_and_says_unknown_for_a_cpu(tmp_path: Path) -> None:
    # On a CPU nothing can be judged (no GPU, no floor): UNKNOWN, but the run is measured and stored all the same.
    with serve_collector(tmp_path / "c.duckdb") as site:
        done = agent_cli("check", "--device", "cpu", "--suite", "tiny", "--json", "--collector", site.url,
                         "--token", site.token, "--spool-dir", str(tmp_path / "spool"),
                         env={"FLOPFLEET_PLUGINS": "tests.agent.tiny_suite"})  # fmt: skip
        assert done.returncode == 3, done.stdout + done.stderr
        body = json.loads(done.stdout)
    (run_id,) = body["runs"]
    with Store(site.db, read_only=True) as store:
        stored = store.sql(f"SELECT suite, tags->>'check' FROM runs WHERE run_id = '{run_id}'").rows
    assert stored == [("tiny", "profile")]
    # Where the time went, for whoever sets a prolog's timeout: each phase within the process's whole life.
    seconds = body["seconds"]
    assert set(seconds) == {"measure", "deliver", "verdicts", "process"}
    assert 0 < seconds["deliver"] + seconds["verdicts"] < seconds["measure"] < seconds["process"]


def test_a_collector_that_is_down_keeps_the_run_on_disk_and_the_agent_judges(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spool = tmp_path / "spool"
    done = agent_cli("check", "--device", "cpu", "--suite", "tiny", "--json", "--collector", f"http://127.0.0.1:{port}",
                     "--spool-dir", str(spool), env={"FLOPFLEET_PLUGINS": "tests.agent.tiny_suite"})  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr  # a CPU: nothing to judge, whoever judges
    body = json.loads(done.stdout)
    assert any("did not take the run" in n and "judged here instead" in n for n in body["notes"])
    (kept,) = spool.glob("*.json")
    assert json.loads(kept.read_text())["run_id"] == body["runs"][0]  # it waits on disk for `push`
