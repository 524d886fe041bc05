"""Write the baselines flopfleet ships (schemas/data/<card>.baseline.json) from this project's own measurements.

One bundle per card measured (``SHIPPED``: the H200 and the H100). Every run committed under docs/results/<card>/
(a run file, or a JSON list or mapping of runs) of a suite a GPU is held
against a baseline of (``standard`` for ``run``, ``health`` for ``check``), each GPU counted once by its UUID: the
lent machines are often other physical GPUs, and the spread between them is what a new H200 is compared with. The
runs go through a throw-away collector and are read back through the query and builder of ``flopfleet-collector
baseline export``, so the bundle is what a fleet holding these runs would export.

Which runs count (``left_out`` names why one does not) is the export's healthy rule (no other process on the GPU, no
thermal or hardware slowdown, no result flagged busy, throttled, starved, wrong or above the datasheet, no loaded
host: ``schemas.health_figures.LOADED_HOST_WAIT``) and, for
these files, whole runs named with their reason: a GPU without a UUID (the lent machines are all called ``vm``: keyed
by host, every such run would be one GPU again), a run with a window flagged ``starved`` (a loaded host slows figures
the flag does not name: busy-host/loaded.json's BERT layer read 3 % below the quiet run's, unflagged), and a run
measured with the relay or beside the compiling helper, named by run id in ``NAMED_OUT`` (relay/relay*.json: BERT's
cells read up to 6.5 % slow, unflagged; both were removed from the agent). Check figures kept without their run
files (health-*.json) carry no UUID and are not used.

    .venv/bin/python scripts/bundle_baselines.py            # rewrites schemas/data/h200.baseline.json, h100...
    .venv/bin/python scripts/bundle_baselines.py --check    # exit 1 if a file is not what the data gives
    .venv/bin/python scripts/bundle_baselines.py --card h100
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.benchmarks.matmul import MatmulGrid  # noqa: E402
from agent.harness.suites import HEALTH  # noqa: E402
from collector.analysis.baselines import Measurement, build, measurements  # noqa: E402
from collector.analysis.parse import parse_run  # noqa: E402
from collector.store import Store  # noqa: E402
from schemas import MatmulParams, RunSubmission  # noqa: E402
from schemas.baselines import BaselineBundle, BaselineSource, dump_bundle, parse_bundle, seal  # noqa: E402
from scripts import results_files  # noqa: E402


@dataclass(frozen=True)
class Shipped:
    """A card whose baseline flopfleet ships: where its runs are committed, the bundle's file, name and words."""

    key: str
    model: str
    name: str
    collector: str
    machines: str  # what the runs were measured on, for the bundle's description

    @property
    def results(self) -> Path:
        return ROOT / "docs" / "results" / self.key

    @property
    def output(self) -> Path:
        return ROOT / "schemas" / "data" / f"{self.key}.baseline.json"


SHIPPED = {
    s.key: s
    for s in (
        Shipped("h200", "NVIDIA H200", "flopfleet H200 (lent, 2026-11/12)", "flopfleet project, lent H200 machines",
                "lent NVIDIA H200 SXM machines (700 W, driver 580, CUDA 13.0, torch 2.11)"),
        Shipped("h100", "NVIDIA H100 80GB HBM3", "flopfleet H100 (lent, 2026-12)",
                "flopfleet project, lent H100 machines",
                "lent NVIDIA H100 80GB HBM3 SXM machines (700 W, driver 580, CUDA 13.0, torch 2.11)"),
    )
}  # fmt: skip
RESULTS = SHIPPED["h200"].results
OUTPUT = SHIPPED["h200"].output
#: The suites a GPU is held against a baseline of: ``run``'s and ``check``'s.
SUITES = ("standard", "health")
#: The first run whose board power was counted by the agent's present rule (agent/machine/energy.py: the counter
#: read by a thread of its own): the power earlier runs carry came from two rules that read power-capped products
#: 30-45 % low and up to 35 % high (docs/results/h200.md, "Cold starts, every figure per watt"), so their figures
#: count and their power does not.
POWER_RULE_SINCE = datetime(2026, 12, 3, 22, 12, tzinfo=timezone.utc)
_RELAY = "measured with the relay (a third measuring process, removed: it moved BERT's cells beside it)"
_HELPER = "measured with the compiling helper (a third process preparing beside the first child, removed)"
_NO_CUDNN = "measured without cuDNN's attention (benchmarks/attention_without_cudnn.py): BERT's layers 1.7 % faster"
#: Runs measured in a way the suite does not measure, named by run id with why: nothing in a run says so (a child that
#: replaced one after a sticky error also makes three processes for one GPU). Beside a third process the agent no
#: longer has: the relay's (relay/relay1.json, relay2.json) and the compiling helper's (compile-helper/hc1.json,
#: hw1.json); with a plugin that turned cuDNN's attention off (no-cudnn-attention/f1.json, f2.json;
#: docs/results/h200.md, 2026-12-04).
NAMED_OUT = {
    "e387d6bb-b502-4e8e-892b-464de30d543f": _RELAY,
    "2a886931-62fc-4305-8461-f8360813af56": _RELAY,
    "693f6d20-afa1-443b-9dda-56e32063edca": _HELPER,
    "26e7de43-9dbf-4335-944c-3570cbc61064": _HELPER,
    "37e720bf-587b-497f-9ec3-7d8beb6875f6": _NO_CUDNN,
    "2e6d0290-f8ab-4151-a35e-22e248dd5005": _NO_CUDNN,
}


@dataclass(frozen=True)
class Committed:
    """One run as committed: the file it is in (relative to docs/results/h200/) and the run."""

    path: str
    run: RunSubmission


def _runs_in(data: object) -> Iterator[object]:
    """The runs in a JSON document: itself, or those of its list items or mapping values (duty-runs.json)."""
    if isinstance(data, dict) and "run_id" in data and "gpus" in data:
        yield data
    elif isinstance(data, (list, dict)):
        for item in data.values() if isinstance(data, dict) else data:
            yield from _runs_in(item)


def committed(folder: Path = RESULTS) -> list[Committed]:
    """Every run under ``folder``, oldest first (the tables kept beside them hold none)."""
    found = []
    for path in results_files.json_files([folder]):
        for data in _runs_in(results_files.read(path)):
            found.append(Committed(str(path.relative_to(folder)), parse_run(json.dumps(data).encode())))
    return sorted(found, key=lambda c: (c.run.started_at, c.path))


def left_out(run: RunSubmission) -> str | None:
    """Why a committed run is in no baseline before the export's own rule is applied (None: it goes on to it)."""
    if run.suite not in SUITES:
        return f"the {run.suite} suite has no baseline"
    if any(g.uuid is None for g in run.gpus):
        return "a GPU without a UUID cannot be counted once"
    if any("starved" in r.flags for r in run.results):
        return "measured on a loaded host (a window flagged starved)"
    return NAMED_OUT.get(str(run.run_id))


def without_power(run: RunSubmission) -> RunSubmission:
    """``run`` as it goes into the bundle: its power dropped if an earlier rule counted it (``POWER_RULE_SINCE``)."""
    if run.started_at >= POWER_RULE_SINCE:
        return run
    drop = {"power_w": None, "energy_j": None, "energy_span_s": None}
    results = tuple(
        r.model_copy(update={"timing": r.timing.model_copy(update=drop)}) if r.timing is not None else r
        for r in run.results
    )
    return run.model_copy(update={"results": results})


def health_products_only(run: RunSubmission) -> RunSubmission:
    """``run`` without the products the health profile does not measure: full-clock/call1 (2026-12-04) tried bf16
    at 2048^3 beside 8192^3, and the best-bf16 figure then took the smaller product's value in two of its three
    healthy runs (both at the power limit: docs/results/h200.md, "A figure at full clock")."""
    if run.suite != "health":
        return run
    grid = HEALTH.grids["matmul"]
    assert isinstance(grid, MatmulGrid)
    kept = set(grid.products())
    results = tuple(
        r for r in run.results
        if r.benchmark != "matmul" or not isinstance(r.params, MatmulParams) or (r.params.dtype, r.params.n) in kept
    )  # fmt: skip
    return run if len(results) == len(run.results) else run.model_copy(update={"results": results})


def as_bundled(run: RunSubmission) -> RunSubmission:
    """A committed run as it goes into the bundle: without power an earlier rule counted, and a health run with the
    health profile's products only."""
    return health_products_only(without_power(run))


def stored(runs: Sequence[RunSubmission]) -> list[Measurement]:
    """The runs through a real store and the export's own query: their healthy measurements, by GPU UUID. One commit
    and one refresh (``Store.add_group``, the bulk load): run by run, each its own commit and refresh, the same
    measurements took 13 times as long (16.3 s against 1.25 s for 84 runs, 2026-12-03)."""
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "baseline.duckdb") as store:
        store.add_group([run.model_dump_json().encode() for run in runs])
        store.refresh()
        return measurements(store.reads().baseline_measurements(), unhealthy=set())


def measured(folder: Path = RESULTS) -> list[Measurement]:
    """The healthy measurements of every run committed under ``folder``."""
    return stored([as_bundled(c.run) for c in committed(folder) if left_out(c.run) is None])


def bundle_of(found: Sequence[Measurement], card: Shipped = SHIPPED["h200"]) -> tuple[BaselineBundle | None, list[str]]:
    """The bundle of these measurements (None when no card has enough of them), and what was left out and why."""
    cards, refused = build(found)
    if not cards:
        return None, refused
    gpus = len({m.device for m in found})
    source = BaselineSource(
        collector=card.collector,
        exported_at=datetime.combine(max(m.day for m in found), time(), tzinfo=timezone.utc),
        filters={"model": card.model, "gpus": "by UUID"},
        description=f"Measured by the flopfleet project on {card.machines}: the healthy standard and health runs "
        f"committed under docs/results/{card.key}/, {gpus} GPUs, each counted once by its UUID.",
    )
    return seal(card.name, source, cards), refused


def bundle_text(card: Shipped = SHIPPED["h200"]) -> str:
    bundle, refused = bundle_of(measured(card.results), card)
    for why in refused:
        print(f"left out: {why}", file=sys.stderr)
    if bundle is None:
        raise SystemExit(f"{card.key}: no card has enough healthy runs")
    text = dump_bundle(bundle)
    parse_bundle(text)  # as every import checks it
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the files instead of writing them")
    parser.add_argument("--card", choices=sorted(SHIPPED), action="append", help="only this card (default: all)")
    args = parser.parse_args()
    differ = 0
    for key in args.card or sorted(SHIPPED):
        card = SHIPPED[key]
        text = bundle_text(card)
        where = card.output.relative_to(ROOT)
        if args.check:
            same = card.output.exists() and card.output.read_text() == text
            print(f"{where}: {'up to date' if same else 'differs from what the data gives'}")
            differ += not same
        else:
            card.output.write_text(text, encoding="utf-8")
            print(f"wrote {where}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
