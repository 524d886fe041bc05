"""Write the baselines flopfleet ships (schemas/data/h200.baseline.json) from this project's own H200 measurements.

- ``standard`` suite: the standard run files under docs/results/h200/, stored in a throw-away collector and read
  back through the same query and builder as ``flopfleet-collector baseline export``.
- ``health`` suite: the figures of the healthy ``flopfleet-agent check`` runs recorded in
  docs/results/h200/health-*.json (those files keep each check's figures, not its run file), and any health run
  files under docs/results/h200/baseline/.

The lent machines report a new GPU UUID at each lease, and nothing tells whether they are different GPUs, so every
measurement is counted as the same GPU: the bundle says "1 GPU" and verdicts use the wider threshold of a baseline
without a spread between GPUs.

    .venv/bin/python scripts/bundle_baselines.py            # rewrites schemas/data/h200.baseline.json
    .venv/bin/python scripts/bundle_baselines.py --check    # exit 1 if the file is not what the data gives
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date, datetime, time, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.analysis.baselines import Measurement, build, measurements  # noqa: E402
from collector.analysis.parse import parse_run  # noqa: E402
from collector.store import Store  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from schemas.baselines import BaselineSource, card_key, dump_bundle, parse_bundle, seal  # noqa: E402

RESULTS = ROOT / "docs" / "results" / "h200"
OUTPUT = ROOT / "schemas" / "data" / "h200.baseline.json"
ONE_GPU = "GPU-lent-h200"  # every lease's GPU, counted as one
#: The run files it stands on (named, so that a run file added to the docs for another purpose changes nothing).
RUN_FILES = ("first-lease/standard*.json", "standard[12].json", "third-lease/run-*.json", "isolation/standard-*.json",
             "standard-with-inference.json", "baseline/health-*.json")  # fmt: skip
#: The day the health files' checks ran (docs/results/h200.md, "Health profile and check").
HEALTH_DAY = date(2026, 12, 1)


def _runs(patterns: tuple[str, ...]) -> list[RunSubmission]:
    found = []
    for path in sorted(p for pattern in patterns for p in RESULTS.glob(pattern)):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "run_id" in data and data.get("suite") in ("standard", "health"):
            found.append(parse_run(path.read_bytes()))
    return found


def _as_one_gpu(run: RunSubmission) -> RunSubmission:
    gpus = tuple(g.model_copy(update={"uuid": ONE_GPU}) for g in run.gpus)
    return run.model_copy(update={"gpus": gpus})


def stored(runs: list[RunSubmission]) -> list[Measurement]:
    """The runs through a real store and the export's own query."""
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "h200.duckdb") as store:
        for run in runs:
            store.add_run(_as_one_gpu(run))
        return measurements(store.reads().baseline_measurements(), unhealthy=set())


def recorded_checks() -> list[Measurement]:
    """The healthy checks' figures kept in health-*.json, with the software of that day's lease."""
    info = json.loads((RESULTS / "info.json").read_text())
    gpu, software = info["gpus"][0], info["software"]
    card = card_key(gpu["name"], gpu["memory_bytes"], gpu["power_limit_w"])
    versions = {k: software.get(k) for k in ("driver", "cuda", "torch", "transformers")}
    out = []
    for path in sorted(RESULTS.glob("health-*.json")):
        for check in json.loads(path.read_text()).get("healthy", []):
            if check.get("level") not in ("ok", "suspect", "slow"):  # healthy GPU, whatever the old rule said
                continue
            for figure, value in check["figures"].items():
                out.append(Measurement(card, gpu["name"], "health", ONE_GPU, figure, float(value), HEALTH_DAY,
                                       versions))  # fmt: skip
    return out


def bundle_text() -> str:
    found = stored(_runs(RUN_FILES)) + recorded_checks()
    cards, left_out = build(found)
    for why in left_out:
        print(f"left out: {why}", file=sys.stderr)
    last = max(m.day for m in found)
    source = BaselineSource(
        collector="flopfleet project, lent H200 machines",
        exported_at=datetime.combine(last, time(), tzinfo=timezone.utc),
        filters={"model": "NVIDIA H200", "gpus": "each lease counted as the same GPU"},
        description="Measured by the flopfleet project on lent NVIDIA H200 SXM machines (700 W, driver 580, CUDA "
        "13.0, torch 2.11): the standard suite's runs and the health checks recorded in docs/results/h200/. "
        "Each lease reported a new GPU UUID; they are counted as one GPU.",
    )
    bundle = seal("flopfleet H200 (lent, 2026-11/12)", source, cards)
    text = dump_bundle(bundle)
    parse_bundle(text)  # as every import checks it
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args()
    text = bundle_text()
    if args.check:
        same = OUTPUT.exists() and OUTPUT.read_text() == text
        print(f"{OUTPUT.relative_to(ROOT)}: {'up to date' if same else 'differs from what the data gives'}")
        return 0 if same else 1
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
