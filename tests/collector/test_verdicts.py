"""Verdicts over fleets built by code, stored in a real DuckDB file: peers, own history, a lone card, a noisy figure,
one failing run against a confirmed shortfall, and each counter kind; the rule itself (``schemas.verdicts``)."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.read.views import fleet_health
from collector.store import DB_VERSION, Store
from collector.store.errors import OlderDatabase
from schemas.faults import counter_faults
from schemas.verdicts import (
    CONFIRM,
    MAX_THRESHOLD,
    MIN_THRESHOLD,
    Level,
    floor_of,
    gpu_level,
    judge,
    minimum_threshold,
    threshold_from_spread,
)
from tests.factories import T0, bandwidth, gpu, layer, make_run, matmul, transfer
from tests.servers import serve_collector

H200 = "NVIDIA H200"
#: A memory figure of 4,200 GB/s in the units of a bf16 figure of 680 TFLOPS: the tests of the threshold rule that vary
#: one steady figure vary memory (bf16 matmul has a least threshold of its own, ``HealthFigure.min_threshold``).
GBPS = 4200.0 / 680.0


def _add(
    store: Store,
    host: str,
    hour: int,
    bf16: float,
    *,
    memory: float = 4200.0,
    name: str = H200,
    counters: dict[str, Any] | None = None,
    xids: tuple[int, ...] | None = None,
    suite: str = "standard",
    **fields: Any,
) -> None:
    # At 600 W: a card with no baseline and no measured sibling (the bundled H200's is at 700 W), so that these
    # verdicts are of peers, history and the floor alone (tests/collector/test_baselines.py has baselines and siblings).
    extra: dict[str, Any] = {"host": host, "power_limit_w": 600.0, "power_limit_default_w": 600.0, **fields}
    if counters is not None:
        extra["counters_after"] = counters
    if xids is not None:
        extra["xid_events"] = [{"xid": x, "t_s": 1.0} for x in xids]
    results = [matmul(8192, "bf16", bf16), bandwidth(1 << 28, memory), layer("bert_layer", "fwd+bwd", 64, 512, 470.0)]
    store.add_run(
        make_run(
            results,
            gpus=[gpu(name, memory_gib=141, **extra)],
            hostname=host,
            suite=suite,
            started=T0 + timedelta(hours=hour),
            run_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-{hour}")),
        ),
    )


def _verdicts(store: Store) -> dict[str, Any]:
    store.settle()
    return {v.hostname: v for v in fleet_health(store.reads())}


def test_one_low_run_is_suspect_and_a_second_confirms_it_slow(tmp_path: Path) -> None:
    with Store(tmp_path / "f.duckdb") as store:
        for host in ("n0", "n1", "n2", "n3"):
            _add(store, host, 0, 680.0)
        _add(store, "n3", 1, 560.0)  # one low run
        first = _verdicts(store)["n3"]
        assert first.level is Level.suspect
        assert first.figures["matmul_bf16"].failing == 1
        _add(store, "n3", 2, 565.0)  # and another: confirmed by two of its last three runs
        second = _verdicts(store)["n3"]
        assert second.level is Level.slow
        assert "in 2 of its last 3 measurements" in second.reasons[0]
        assert second.slow_by == pytest.approx(1 - 565 / 680, abs=1e-3)
        _add(store, "n3", 3, 679.0)  # recovered: the latest measurement decides whether anything is failing
        assert _verdicts(store)["n3"].level is Level.ok


def test_a_gpu_that_drops_against_its_own_history_is_caught_without_peers(tmp_path: Path) -> None:
    # A lone H200 measured well for six runs, then 12 % lower: far above its floor, but below its own median.
    with Store(tmp_path / "f.duckdb") as store:
        for hour, bf16 in enumerate((680.0, 684.0, 677.0, 681.0, 679.0, 683.0)):
            _add(store, "solo", hour, bf16)
        assert _verdicts(store)["solo"].level is Level.ok
        _add(store, "solo", 6, 600.0)
        _add(store, "solo", 7, 598.0)
        v = _verdicts(store)["solo"]
        judged = v.figures["matmul_bf16"]
        assert v.level is Level.slow and [r.name for r in judged.references] == ["history", "floor"]
        assert "below its own median over" in v.reasons[0]
        # Its history's spread is about 0.3 %: the threshold is the figure's least (bf16 matmul's own 8 %: one GPU's
        # readings at the power limit move by several percent), and a steady figure's the rule's 3 %.
        assert judged.threshold == minimum_threshold("matmul_bf16") == 0.08
        assert v.figures["memory"].threshold == MIN_THRESHOLD


def test_a_gpu_measured_by_two_suites_is_held_against_its_own_history_in_the_suite_of_its_newest(
    tmp_path: Path,
) -> None:  # fmt: skip
    """The standard suite's memory figure read 4,200 GB/s on this lone GPU for six runs; the health profile, measured
    differently, reads 3.5 % lower, steadily. Held against a history of both, the step between the suites widened
    its threshold to 7.7 %, then 13.9 %, and a real 4 % drop went unseen; held against its health runs, the
    threshold stays the minimum and the drop is caught."""
    with Store(tmp_path / "f.duckdb") as store:
        for hour, gbps in enumerate((680.0, 684.0, 677.0, 681.0, 679.0, 683.0)):
            _add(store, "solo", hour, 680.0, memory=gbps * GBPS, suite="standard")
        for hour, gbps in enumerate((656.0, 657.0, 655.0, 656.0, 658.0, 656.0), start=6):
            _add(store, "solo", hour, 680.0, memory=gbps * GBPS, suite="health")
        v = _verdicts(store)["solo"]
        judged = v.figures["memory"]
        history = next(r for r in judged.references if r.name == "history")
        assert v.level is Level.ok and judged.threshold == MIN_THRESHOLD, v.reasons
        assert history.value == pytest.approx(656.0 * GBPS, abs=GBPS) and history.count == 3  # its health runs only
        _add(store, "solo", 12, 680.0, memory=630.0 * GBPS, suite="health")
        _add(store, "solo", 13, 680.0, memory=631.0 * GBPS, suite="health")
        assert _verdicts(store)["solo"].level is Level.slow  # 4 % below its health runs, twice


def test_a_gpus_peers_are_the_gpus_its_newest_suite_measured(tmp_path: Path) -> None:
    """Three H200s measured by the standard suite read a memory figure of 4,200 GB/s; two checked by the health
    profile read a steady 3.5 % lower, as if that suite measured it so. Held against all four others (their median,
    a 3 % threshold from their steady histories) the health GPUs were confirmed slow; their peers are the GPUs the
    health profile measured, and a real drop beside them is still caught."""
    with Store(tmp_path / "f.duckdb") as store:
        for hour, jitter in enumerate((0.0, 1.0, -1.0, 0.5, -0.5, 0.0)):
            for host, gbps in (("s0", 680.0), ("s1", 682.0), ("s2", 678.0)):
                _add(store, host, hour, 680.0, memory=(gbps + jitter) * GBPS, suite="standard")
            _add(store, "h0", hour, 680.0, memory=(656.0 + jitter) * GBPS, suite="health")
            _add(store, "h1", hour, 680.0, memory=(657.0 + jitter) * GBPS, suite="health")
        verdicts = _verdicts(store)
        judged = verdicts["h0"].figures["memory"]
        peers = next(r for r in judged.references if r.name == "peers")
        assert judged.threshold == MIN_THRESHOLD and peers.count == 1, judged
        assert peers.value == pytest.approx(657.0 * GBPS), judged
        assert verdicts["h0"].level is Level.ok and verdicts["h1"].level is Level.ok, verdicts["h0"].reasons
        assert verdicts["s0"].level is Level.ok  # and the standard suite's GPUs are each other's
        _add(store, "h0", 6, 680.0, memory=630.0 * GBPS, suite="health")
        _add(store, "h0", 7, 680.0, memory=631.0 * GBPS, suite="health")
        assert _verdicts(store)["h0"].level is Level.slow  # 4 % below its health peer, twice


def test_a_lone_card_far_below_its_models_floor_is_caught_on_its_first_runs(tmp_path: Path) -> None:
    # The DCGM#122 case: an A100 at a third of its siblings' speed, with no sibling measured here.
    with Store(tmp_path / "f.duckdb") as store:
        _add(store, "lone", 0, 95.0, name="NVIDIA A100-SXM4-80GB", memory=1700.0)
        first = _verdicts(store)["lone"]
        assert first.level is Level.suspect and "below its model's floor 109" in first.reasons[0]
        _add(store, "lone", 1, 97.0, name="NVIDIA A100-SXM4-80GB", memory=1700.0)
        assert _verdicts(store)["lone"].level is Level.slow
        # A model nothing is known of, alone: nothing to compare.
        _add(store, "odd", 0, 50.0, name="Imaginary GPU 9000")
        assert _verdicts(store)["odd"].level is Level.unknown


def test_a_noisy_figure_gets_a_wider_threshold_and_its_noise_is_no_alarm(tmp_path: Path) -> None:
    # Memory on this model varies by about +-6 % run to run on every GPU: a 7 % dip is within its spread.
    rng = random.Random(7)
    with Store(tmp_path / "f.duckdb") as store:
        for hour in range(8):
            for host in ("n0", "n1", "n2"):
                _add(store, host, hour, 680.0, memory=4200.0 * (1 + rng.uniform(-0.06, 0.06)))
        _add(store, "n0", 8, 680.0, memory=4200.0 * 0.93)
        verdicts = _verdicts(store)
        memory = verdicts["n0"].figures["memory"]
        assert 0.05 < memory.threshold <= MAX_THRESHOLD
        assert memory.level is Level.ok and verdicts["n0"].level is Level.ok
        assert verdicts["n0"].figures["bert_fwdbwd"].threshold == MIN_THRESHOLD  # the steady figure stays tight


@pytest.mark.parametrize(
    ("counters", "xids", "fields", "named"),
    [
        ({"ecc_uncorrected_volatile": 2}, (), {}, "ecc_uncorrected_volatile"),
        ({"remapped_rows_failed": True}, (), {}, "remapped_rows_failed"),
        ({"remapped_rows_pending": True}, (), {}, "remapped_rows_pending"),
        ({"nvlink_links": 18, "nvlink_links_down": 2}, (), {}, "nvlink_links_down"),
        ({}, (79,), {}, "XID 79 during the run: fallen off the bus"),
        ({}, (), {"pcie_gen": 4, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16}, "(pcie_gen)"),
        ({}, (), {"pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 8, "pcie_width_max": 16}, "(pcie_width)"),
    ],
)
def test_each_counter_kind_makes_a_fast_gpu_faulty_and_names_itself(
    tmp_path: Path, counters: dict[str, Any], xids: tuple[int, ...], fields: dict[str, Any], named: str
) -> None:
    with Store(tmp_path / "f.duckdb") as store:
        for host in ("n0", "n1"):
            _add(store, host, 0, 680.0, counters={"ecc_uncorrected_volatile": 0}, xids=())
        _add(store, "bad", 0, 690.0, counters=counters, xids=xids, **fields)
        verdicts = _verdicts(store)
        assert verdicts["bad"].level is Level.faulty and named in verdicts["bad"].faults[0]
        assert verdicts["n0"].level is Level.ok


def test_an_application_xid_and_repaired_rows_are_not_faults() -> None:
    assert counter_faults({"remapped_rows_uncorrectable": 3, "remapped_rows_failed": False}, [13, 31]) == []
    assert counter_faults(None) == []


def test_the_rule_itself() -> None:
    # Confirmation counts failures among the latest WINDOW measurements; the latest must fail.
    assert judge("matmul_bf16", [80.0, 100.0, 100.0], peers=(100.0, 3)).level is Level.suspect
    assert judge("matmul_bf16", [80.0, 81.0, 100.0], peers=(100.0, 3)).level is Level.slow
    assert judge("matmul_bf16", [100.0, 80.0, 81.0], peers=(100.0, 3)).level is Level.ok
    assert judge("matmul_bf16", [96.0], peers=(100.0, 3)).level is Level.ok  # within the default 5 %
    assert judge("matmul_bf16", [100.0]).level is Level.unknown
    assert CONFIRM == 2
    # A figure with no reference does not hide the others; a fault outranks everything.
    ok, nothing = judge("a", [100.0], peers=(100.0, 1)), judge("b", [1.0])
    assert gpu_level([], [ok, nothing]) is Level.ok and gpu_level([], [nothing]) is Level.unknown
    assert gpu_level(["XID 79"], [ok]) is Level.faulty
    # Spread: the median over GPUs of each one's MAD, three robust sigmas, within bounds; the default without runs.
    assert threshold_from_spread([[100.0, 102.0, 98.0, 100.0, 101.0]]) == pytest.approx(3 * 1.4826 * 0.01)
    assert threshold_from_spread([[100.0, 100.0, 100.0, 100.0]]) == MIN_THRESHOLD
    assert threshold_from_spread([[100.0, 50.0, 150.0, 100.0]]) == MAX_THRESHOLD
    assert threshold_from_spread([[100.0, 90.0]], default=0.07) == 0.07
    # Floors from the datasheet: bf16 and memory of the H200, the link's at Gen5 x16; none for an unknown model.
    assert floor_of("matmul_bf16", "NVIDIA H200") == pytest.approx(989 * 0.35)
    assert floor_of("memory", "NVIDIA H200") == pytest.approx(4800 * 0.55)
    assert floor_of("h2d", "NVIDIA H200", 5, 16) == pytest.approx(3.938 * 16 * 0.45)
    assert floor_of("matmul_bf16", "Imaginary GPU 9000") is None


def test_the_verdicts_api_answers_for_uuids_or_a_host_and_refuses_neither(tmp_path: Path) -> None:
    with Store(tmp_path / "api.duckdb") as store:
        for host in ("n0", "n1", "n2"):
            _add(store, host, 0, 680.0)
        _add(store, "n2", 1, 500.0)
    with serve_collector(tmp_path / "api.duckdb") as site:
        headers = {"Authorization": f"Bearer {site.token}"}
        by_host = httpx.get(f"{site.url}/api/v1/verdicts", params={"host": "n2"}, headers=headers, timeout=30)
        assert by_host.status_code == 200
        (v,) = by_host.json()
        assert (v["host"], v["level"], v["judged_by"]) == ("n2", "suspect", "collector")
        matmul_bf16 = next(f for f in v["figures"] if f["figure"] == "matmul_bf16")
        assert matmul_bf16["peers"] == 680.0 and matmul_bf16["peer_count"] == 2 and matmul_bf16["failing"] == 1
        by_uuid = httpx.get(f"{site.url}/api/v1/verdicts", params=[("uuid", v["uuid"]), ("uuid", "GPU-none")],
                            headers=headers, timeout=30)  # fmt: skip
        assert [x["uuid"] for x in by_uuid.json()] == [v["uuid"]]  # an unknown GPU is absent
        refused = httpx.get(f"{site.url}/api/v1/verdicts", headers=headers, timeout=30)
        assert refused.status_code == 400 and "uuid" in refused.text


def test_an_older_database_gets_its_history_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with Store(path) as store:
        for hour, bf16 in enumerate((680.0, 560.0, 565.0)):
            _add(store, "n0", hour, bf16)
        _add(store, "n1", 0, 680.0)
        store.settle()
        store.sql("SELECT 1")  # the store works as before
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("DROP TABLE health_history")  # as a collector before this one left it
    con.execute("UPDATE meta SET value = '2' WHERE key = 'db_version'")
    con.close()
    with pytest.raises(OlderDatabase, match=rf"older collector \(db_version 2, this one keeps {DB_VERSION}\)"):
        Store(path, read_only=True)  # a reader cannot bring it up to date, and says how
    with Store(path) as store:
        assert _verdicts(store)["n0"].level is Level.slow  # confirmed by the backfilled history
    with Store(path, read_only=True) as store:
        assert _verdicts(store)["n0"].level is Level.slow


def test_a_history_kept_without_its_suites_gets_them_on_open(tmp_path: Path) -> None:
    """A database whose ``health_history`` an older collector (db_version 3) kept without the suite of each value:
    a reader is refused with how to bring it up to date; the writer adds the column from the runs, and the
    verdicts hold each GPU to its history in its newest run's suite."""
    import duckdb

    path = tmp_path / "v3.duckdb"
    with Store(path) as store:
        for hour, bf16 in enumerate((680.0, 682.0, 679.0, 681.0)):
            _add(store, "n0", hour, bf16)
        store.settle()
    con = duckdb.connect(str(path))
    con.execute("ALTER TABLE health_history DROP COLUMN suite")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'db_version'")
    con.close()
    with pytest.raises(OlderDatabase, match=rf"db_version 3, this one keeps {DB_VERSION}"):
        Store(path, read_only=True)
    with Store(path) as store:
        suites = store.sql("SELECT DISTINCT suite FROM health_history")
        assert [tuple(r) for r in suites.rows] == [("standard",)], suites
        assert _verdicts(store)["n0"].figures["matmul_bf16"].value == 681.0


def test_a_figure_with_heavy_tailed_dips_has_its_own_minimum_and_two_dips_are_no_alarm(tmp_path: Path) -> None:
    # Pinned transfers on the H200, as measured in one sitting: two healthy dips of 6 % and 3 % among three runs
    # once made a 3 % threshold say "slow" (docs/results/h200.md); h2d's own minimum of 10 % does not.
    with Store(tmp_path / "f.duckdb") as store:
        for hour, h2d in enumerate((55.4, 55.4, 55.3, 51.9, 54.9, 53.3)):
            run_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"t-{hour}"))
            results = [matmul(8192, "bf16", 690.0), transfer("h2d", h2d)]
            store.add_run(make_run(results, gpus=[gpu(H200, memory_gib=141, host="t")], hostname="t", run_id=run_id,
                                   started=T0 + timedelta(hours=hour)))  # fmt: skip
        v = _verdicts(store)["t"]
        assert v.figures["h2d"].threshold == 0.10 and v.level is Level.ok
    assert threshold_from_spread([[55.0, 55.1, 54.9, 55.0]], minimum=0.10) == 0.10
