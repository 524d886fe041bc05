"""The collector at a million runs: a database generated in DuckDB SQL, its pages, report, SQL and file size at
several sizes side by side, and what retention's archive costs. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_million.py                          # 10,000, 100,000 and 1,000,000 runs
    .venv/bin/python benchmarks/collector_million.py --runs 20000 --gpus 2000 --archive-s 0   # a quick look

Each database is a fleet of ``--gpus`` GPUs (8 per host, over five card models) checked with the health profile
in turn, one GPU per run (as a per-GPU job prolog sees it: index 0), each GPU once a day: a real health run
(``docs/results/h200/baseline/health-1.json``: 7 results, 1 GPU row, 76 NVML samples) stored once per card model
through the store, then cloned with ``INSERT ... SELECT FROM range(...)`` into the store's own tables with each
run's own id, GPU, host, start time and a few percent of noise on its figures (1 GPU in 211 is slow at matmul).
Each run's stored JSON (``runs.payload``) is the template's, gzip-compressed per run in Python with the run's id,
times, host and GPU in it (its measured values stay the template's), so the file holds one real-sized payload per
run. The figures and summaries are then computed by the refresher's own ``summarise``, a range of commits per
transaction as the refresher does (larger ranges), and the file is opened once by ``Store`` (its migration
finds nothing left to do).

Pages are requests over httpx to ``flopfleet-collector serve`` in its own process on loopback (default settings),
each one warm-up then ``--repeats`` times: min and median. With ``--archive-s``, the largest database is then
archived with ``--retention-days`` by ``retention.archive_batch`` (the writer's own batches of 100 runs) for that
many seconds, and reading the archive (``all_results``) is timed against the live ``results``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote, urlencode

import duckdb
import httpx
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.analysis.reference import load  # noqa: E402
from collector.store import SUMMARY_TABLES, Store, aggregates, retention  # noqa: E402
from collector.store.archive import ArchiveFolder  # noqa: E402
from collector.store.refresher import summarise  # noqa: E402
from collector.store.tables import TABLES  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from scripts.results_files import read  # noqa: E402

TEMPLATE = ROOT / "docs" / "results" / "h200" / "baseline" / "health-1.json"
#: (name, memory bytes, share of the H200's figures): the card models of the fleet, in turn by GPU number.
MODELS = (
    ("NVIDIA H200", 150_109_880_320, 1.0),
    ("NVIDIA H100 80GB HBM3", 85_520_809_984, 0.95),
    ("NVIDIA A100-SXM4-80GB", 85_899_345_920, 0.42),
    ("NVIDIA L40S", 48_305_799_168, 0.5),
    ("NVIDIA H100 PCIe", 85_520_809_984, 0.75),
)
#: Runs per commit (the writer's group commits).
PER_COMMIT = 8
FIRST_SEQ = 1000
#: Seconds between two GPUs' checks: the whole fleet of 10,000 within a day.
STAGGER_S = 8
#: Every GPU in this many is slow at matmul (0.6 of its peers).
SLOW_EVERY = 211


def run_id(i: int) -> str:
    """Run ``i``'s id: the same in Python (its JSON) and in SQL (``_RUN_ID``)."""
    h = hashlib.md5(f"run{i}".encode()).hexdigest()
    return str(uuid.UUID(h[:12] + "4" + h[13:16] + "8" + h[17:]))


def gpu_uuid(g: int) -> str:
    return "GPU-" + str(uuid.UUID(hashlib.md5(f"gpu{g}".encode()).hexdigest()))


_RUN_ID = "(substr(md5('run' || i), 1, 12) || '4' || substr(md5('run' || i), 14, 3) || '8' || substr(md5('run' || i), 18))::UUID"  # noqa: E501
_GPU_UUID = "'GPU-' || CAST(md5('gpu' || g)::UUID AS VARCHAR)"


def fleet_templates() -> list[dict[str, object]]:
    """The health run once per card model, its figures scaled to the model."""
    base = read(TEMPLATE)
    out = []
    for name, memory, share in MODELS:
        run = json.loads(json.dumps(base))
        run["run_id"] = str(uuid.uuid4())
        run["gpus"][0] |= {"name": name, "memory_bytes": memory}
        for result in run["results"]:
            for key in ("tflops", "gbps"):
                if result.get("metrics") and result["metrics"].get(key) and result["benchmark"] != "transfer":
                    result["metrics"][key] *= share
        out.append(run)
    return out


def document_formats(templates: list[dict[str, object]]) -> list[str]:
    """Each template's JSON with the run's own fields as %-placeholders."""
    formats = []
    for run in templates:
        run = json.loads(json.dumps(run))
        run |= {"run_id": "@RUN@", "started_at": "@START@", "finished_at": "@END@"}
        run["host"]["hostname"] = "@HOST@"  # type: ignore[index]
        run["gpus"][0]["uuid"] = "@UUID@"  # type: ignore[index]
        text = json.dumps(run).replace("%", "%%")
        for mark, key in (("@RUN@", "r"), ("@START@", "s"), ("@END@", "e"), ("@HOST@", "h"), ("@UUID@", "u")):
            text = text.replace(mark, f"%({key})s")
        formats.append(text)
    return formats


#: The most GPUs a generated fleet has unless asked for more (``fleet_file``): 10,000 GPUs' history grows with the runs.
FLEET_GPUS = 10_000


def fleet_file(folder: Path, runs: int, gpus: int | None = None) -> Path:
    """A fleet database of ``runs`` runs over ``gpus`` GPUs (default: as many as runs, at most ``FLEET_GPUS``) in
    ``folder``, built once and kept there for the next invocation (the other benchmarks measure beside it)."""
    gpus = gpus or min(runs, FLEET_GPUS)
    db = folder / (f"fleet-{runs}.duckdb" if gpus == min(runs, FLEET_GPUS) else f"fleet-{runs}-{gpus}-gpus.duckdb")
    if not db.exists():
        folder.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        build(db, runs, gpus=gpus, chunk=100_000, refresh_runs=50_000)
        print(f"(a fleet database of {runs:,} runs of {gpus:,} GPUs built in {time.perf_counter() - began:.0f} s)")
    return db


def build(db: Path, runs: int, gpus: int, chunk: int, refresh_runs: int) -> dict[str, float]:
    """A fleet database of ``runs`` runs; the seconds each step took and the rows written."""
    took: dict[str, float] = {}
    templates = fleet_templates()
    began = time.perf_counter()
    with Store(db) as store:
        for run in templates:
            store.add_run(RunSubmission.model_validate_json(json.dumps(run)))
        store.add_reference(load(None))
    took["templates_s"] = time.perf_counter() - began
    formats = document_formats(templates)
    rounds = math.ceil(runs / gpus)
    base = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=rounds)
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TEMP TABLE template AS SELECT row_number() OVER () - 1 AS m, run_id AS t FROM "
        "(SELECT unnest(?::UUID[]) AS run_id)",
        [[str(r["run_id"]) for r in templates]],
    )
    plan = f"""SELECT i, g, {_RUN_ID} AS run_id, {FIRST_SEQ} + i // {PER_COMMIT} AS commit_seq,
                      TIMESTAMPTZ '{base.isoformat()}' + to_days(CAST(i // {gpus} AS INTEGER))
                          + to_seconds(g * {STAGGER_S}) AS started_at,
                      'node' || lpad(CAST(g // 8 AS VARCHAR), 5, '0') AS hostname, {_GPU_UUID} AS uuid,
                      t.t AS template, 1 + 0.04 * ((hash(i) % 1000) / 1000.0 - 0.5) AS noise,
                      g % {SLOW_EVERY} = 5 AS slow
               FROM (SELECT i, i % {gpus} AS g FROM range(?, ?) r(i)) JOIN template t ON t.m = g % {len(MODELS)}"""
    gen_s = payload_s = 0.0
    for start in range(0, runs, chunk):
        end = min(runs, start + chunk)
        t0 = time.perf_counter()
        ids, payloads, digests = [], [], []
        for i in range(start, end):
            g = i % gpus
            started = base + timedelta(days=i // gpus, seconds=g * STAGGER_S)
            text = formats[g % len(MODELS)] % {
                "r": run_id(i), "s": started.isoformat(), "e": (started + timedelta(seconds=83)).isoformat(),
                "h": f"node{g // 8:05d}", "u": gpu_uuid(g),
            }  # fmt: skip
            document = text.encode()
            ids.append(i)
            payloads.append(gzip.compress(document, compresslevel=1))  # as ``validation.compress`` stores a run
            digests.append(hashlib.sha256(document).hexdigest())
        con.register("chunk_payloads", pa.table({"i": ids, "payload": payloads, "sha": digests}))
        t1 = time.perf_counter()
        payload_s += t1 - t0
        con.execute("BEGIN")
        con.execute(f"CREATE OR REPLACE TEMP TABLE plan AS {plan}", [start, end])
        con.execute(
            """INSERT INTO runs SELECT r.* REPLACE (p.run_id AS run_id, p.commit_seq AS commit_seq,
                   p.started_at AS started_at, p.started_at + INTERVAL 83 SECOND AS finished_at,
                   p.started_at + INTERVAL 84 SECOND AS received_at, p.hostname AS hostname, c.sha AS payload_sha256,
                   c.payload AS payload)
               FROM plan p JOIN runs r ON r.run_id = p.template JOIN chunk_payloads c ON c.i = p.i"""
        )
        con.execute(
            """INSERT INTO gpus SELECT x.* REPLACE (p.run_id AS run_id, p.commit_seq AS commit_seq, p.uuid AS uuid,
                   printf('00000000:%02X:00.0', p.g % 8 + 16) AS pci_bus_id,
                   x.temperature_end_c + CAST(p.noise * 10 AS INTEGER) - 10 AS temperature_end_c)
               FROM plan p JOIN gpus x ON x.run_id = p.template"""
        )
        con.execute(
            """INSERT INTO results SELECT x.* REPLACE (p.run_id AS run_id, p.commit_seq AS commit_seq,
                   x.tflops * p.noise * CASE WHEN p.slow AND x.benchmark = 'matmul' THEN 0.6 ELSE 1 END AS tflops,
                   x.gbps * p.noise AS gbps, x.peak_fraction * p.noise AS peak_fraction)
               FROM plan p JOIN results x ON x.run_id = p.template"""
        )
        con.execute(
            """INSERT INTO gpu_samples SELECT x.* REPLACE (p.run_id AS run_id, p.commit_seq AS commit_seq,
                   x.power_w * p.noise AS power_w)
               FROM plan p JOIN gpu_samples x ON x.run_id = p.template"""
        )
        con.execute("COMMIT")
        con.unregister("chunk_payloads")
        gen_s += time.perf_counter() - t1
    took["payloads_s"], took["generate_s"] = payload_s, gen_s
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # type: ignore[index]
    took["rows"] = float(sum(counts.values()))
    # The templates go; so do the summaries made of them, which the refresher makes again for the fleet.
    began = time.perf_counter()
    con.execute("BEGIN")
    for table in (*TABLES, "figures"):
        con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT t FROM template)")
    for table in SUMMARY_TABLES:
        con.execute(f"DELETE FROM {table}")
    con.execute("COMMIT")
    last = FIRST_SEQ + math.ceil(runs / PER_COMMIT)
    step = max(1, refresh_runs // PER_COMMIT)
    for a in range(FIRST_SEQ, last, step):
        new = f"commit_seq >= {a} AND commit_seq < {min(last, a + step)}"
        con.execute("BEGIN")
        summarise(con, {t: f"SELECT * FROM {t} WHERE {new}" for t in aggregates.SOURCES})
        con.execute("COMMIT")
    took["refresh_s"] = time.perf_counter() - began
    began = time.perf_counter()
    con.execute("CHECKPOINT")
    con.close()
    took["checkpoint_s"] = time.perf_counter() - began
    began = time.perf_counter()
    with Store(db):  # migrates: every run already has its summaries
        pass
    took["open_s"] = time.perf_counter() - began
    took.update({f"rows_{t}": float(n) for t, n in counts.items()})
    return took


def _file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + ".wal")) if p.exists())


SQL_QUERY = (
    "SELECT gpu_model, count(*) AS results, median(tflops) AS tflops FROM result_facts "
    "WHERE benchmark = 'matmul' GROUP BY gpu_model ORDER BY gpu_model"
)


def pages(db: Path, repeats: int) -> tuple[list[tuple[str, str, float, float, int, int]], float]:
    """(label, path, min s, median s, status, bytes) of each page, and the seconds the server took to be ready."""
    with Store(db, read_only=True) as store:
        card, device, run = store.sql(
            "SELECT card, device_id, run_id FROM device_latest WHERE gpu_name = 'NVIDIA H200' ORDER BY device_id "
            "LIMIT 1"
        ).rows[0]
        host = store.sql(f"SELECT hostname FROM runs WHERE run_id = '{run}'").rows[0][0]
    began = time.perf_counter()
    server = CollectorProcess(db)
    ready_s = time.perf_counter() - began
    sql = "/api/v1/sql?" + urlencode({"sql": SQL_QUERY})
    wanted = [
        ("/", "/"), ("/cards", "/cards"), ("/health", "/health"), ("/cards/{card}", f"/cards/{quote(card)}"),
        ("/gpus/{uuid}", f"/gpus/{quote(str(device))}"), ("/runs/{id}", f"/runs/{run}"), ("/report", "/report"),
        ("/report.md", "/report.md"), ("/metrics", "/metrics"),
        ("/api/v1/verdicts?host=", "/api/v1/verdicts?" + urlencode({"host": host})),
        ("/api/v1/sql (cards)", "/api/v1/sql?" + urlencode({"sql": "SELECT * FROM cards"})),
        ("/api/v1/sql (matmul by model)", sql),
    ]  # fmt: skip
    out = []
    try:
        with httpx.Client(base_url=server.url, timeout=300) as client:
            for label, path in wanted:
                times, status, size = [], 0, 0
                for n in range(repeats + 1):
                    t0 = time.perf_counter()
                    answer = client.get(path)
                    if n:
                        times.append(time.perf_counter() - t0)
                    status, size = answer.status_code, len(answer.content)
                out.append((label, path, min(times), statistics.median(times), status, size))
    finally:
        server.stop()
    return out, ready_s


def archive_cost(db: Path, days: int, seconds: float, repeats: int) -> dict[str, float]:
    """Archive runs older than ``days`` for ``seconds`` with the writer's own batches, then time reading it."""
    folder = ArchiveFolder(retention.default_folder(db))
    con = duckdb.connect(str(db))
    query = f"SELECT count(*) FROM runs WHERE started_at < now() - INTERVAL {days} DAY"
    due = con.execute(query).fetchone()[0]  # type: ignore[index]
    moved, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        done = retention.archive_batch(con, folder, days, summarised_before=2**62)
        if not done:
            break
        moved += done
    spent = time.perf_counter() - began
    con.execute("CHECKPOINT")
    con.close()
    files = sum(1 for _ in folder.root.glob("*/day=*/*.parquet"))
    out = {"due": float(due), "archived": float(moved), "archive_s": spent, "files": float(files),
           "archive_bytes": float(sum(p.stat().st_size for p in folder.root.rglob("*.parquet")))}  # fmt: skip
    with Store(db, read_only=True) as store:
        for name, table in (("live", "results"), ("all", "all_results")):
            query = f"SELECT count(*), median(tflops) FILTER (WHERE benchmark = 'matmul') FROM {table}"
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                rows = store.sql(query, timeout_s=600).rows
                times.append(time.perf_counter() - t0)
            out[f"{name}_rows"], out[f"{name}_s"] = float(rows[0][0]), min(times)
    out["bytes_after"] = float(_file_bytes(db))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5, help="timed requests per page, after one warm-up")
    parser.add_argument("--chunk", type=int, default=100_000, help="runs generated per transaction")
    parser.add_argument("--refresh-runs", type=int, default=50_000, help="runs summarised per transaction")
    parser.add_argument("--retention-days", type=int, default=30)
    parser.add_argument("--archive-s", type=float, default=120.0, help="archive the largest database this long")
    parser.add_argument("--dir", type=Path, help="build the databases here and keep them (default: a temporary one)")
    args = parser.parse_args()
    sizes = sorted(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        built, served = {}, {}
        for runs in sizes:
            db = folder / f"fleet-{runs}.duckdb"
            if db.exists():
                db.unlink()
            shutil.rmtree(retention.default_folder(db), ignore_errors=True)
            t = build(db, runs, args.gpus, args.chunk, args.refresh_runs)
            t["bytes"] = _file_bytes(db)
            built[runs] = t
            rows = int(t["rows"])
            print(f"{runs:,} runs: {rows:,} raw rows "
                  f"({', '.join(f'{k[5:]} {int(v):,}' for k, v in t.items() if k.startswith('rows_'))}); "
                  f"payloads {t['payloads_s']:.1f} s, SQL insert {t['generate_s']:.1f} s "
                  f"({rows / t['generate_s']:,.0f} rows/s; {rows / (t['generate_s'] + t['payloads_s']):,.0f} with "
                  f"payloads), refresh {t['refresh_s']:.1f} s ({1e3 * t['refresh_s'] / runs:.3f} ms/run), "
                  f"checkpoint {t['checkpoint_s']:.1f} s, open {t['open_s']:.1f} s; file {t['bytes'] / 2**20:,.0f} "
                  f"MiB", flush=True)  # fmt: skip
            served[runs] = pages(db, args.repeats)
            print(f"  serve ready in {served[runs][1]:.1f} s", flush=True)
        print()
        head = " | ".join(f"{r:,} runs min / median" for r in sizes)
        print(f"| | {head} | {sizes[-1] // sizes[0]}x runs: median x |")
        print("|---|" + "---:|" * (len(sizes) + 1))
        for k, (label, _, *_rest) in enumerate(served[sizes[0]][0]):
            cells = []
            for r in sizes:
                _, _, lo, med, status, size = served[r][0][k]
                flag = "" if status == 200 else f" ({status})"
                cells.append(f"{lo * 1e3:,.0f} / {med * 1e3:,.0f} ms{flag}, {size / 1024:,.0f} KiB")
            ratio = served[sizes[-1]][0][k][3] / served[sizes[0]][0][k][3]
            print(f"| `GET {label}` | {' | '.join(cells)} | {ratio:.1f} |")
        files = " | ".join(f"{built[r]['bytes'] / 2**20:,.0f} MiB ({built[r]['bytes'] / r / 1024:.1f} KiB/run)"
                           for r in sizes)  # fmt: skip
        print(f"| database file | {files} | {built[sizes[-1]]['bytes'] / built[sizes[0]]['bytes']:.1f} |")
        ready = " | ".join(f"{served[r][1]:.1f} s" for r in sizes)
        print(f"| `serve` start to ready | {ready} | |")
        if args.archive_s > 0:
            db = folder / f"fleet-{sizes[-1]}.duckdb"
            a = archive_cost(db, args.retention_days, args.archive_s, 3)
            print(f"\narchive, {sizes[-1]:,} runs, retention {args.retention_days} days: {int(a['due']):,} runs due; "
                  f"{int(a['archived']):,} archived in {a['archive_s']:.0f} s "
                  f"({a['archived'] / a['archive_s']:.0f} runs/s; all due in "
                  f"{a['due'] / max(1.0, a['archived']) * a['archive_s'] / 60:.0f} min at that rate), "
                  f"{int(a['files']):,} files, {a['archive_bytes'] / 2**20:,.0f} MiB; file now "
                  f"{a['bytes_after'] / 2**20:,.0f} MiB (before checkpointing space is reused, "
                  "not returned)")  # fmt: skip
            print(f"count and matmul median over results (live): {int(a['live_rows']):,} rows in "
                  f"{a['live_s'] * 1e3:,.0f} ms; over all_results (live + archive): {int(a['all_rows']):,} rows in "
                  f"{a['all_s'] * 1e3:,.0f} ms (best of 3)")  # fmt: skip


if __name__ == "__main__":
    main()
