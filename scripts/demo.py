"""`make demo`: a local collector on a DuckDB file, the agent on this machine's GPU (or CPU), and a report.

Everything lands under demo/: the database, the run JSON, report.html and report.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "demo"
DB = OUT / "flopfleet.duckdb"


def _python(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, check=True, **kw)  # type: ignore[call-overload]


def _start_collector() -> tuple[subprocess.Popen[bytes], str]:
    port_file = OUT / "collector.port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--db", str(DB), "--port", "0", "--port-file", str(port_file),
         "--log-level", "warning"],
        cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the collector exited with code {proc.returncode}")
        if port_file.exists() and port_file.read_text().strip():
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return proc, url
            except OSError:
                pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the collector did not start within 60 s")


def _demo_token() -> str:
    """A fresh write token named 'demo' (the previous demo's, if any, is revoked first)."""
    subprocess.run([sys.executable, "-m", "collector", "token", "revoke", "demo", "--db", str(DB)], cwd=ROOT,
                   capture_output=True)  # fmt: skip
    made = _python("collector", "token", "create", "--name", "demo", "--db", str(DB), capture_output=True)
    return str(made.stdout.decode().strip())


def main() -> None:
    import torch

    OUT.mkdir(exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    suite = os.environ.get("DEMO_SUITE") or ("standard" if device == "cuda" else "quick")
    run_file = OUT / f"run-{time.strftime('%Y%m%dT%H%M%S')}.json"
    # Published figures for five cards, so even one machine's report has something to compare with.
    _python("collector", "import-reference", "--db", str(DB), capture_output=True)
    token = _demo_token()
    collector, url = _start_collector()
    print(f"collector: {url} (database {DB.relative_to(ROOT)})")
    try:
        _python("agent", "run", "--suite", suite, "--device", device, "--collector", url, "--token", token,
                "--output", str(run_file), "--spool-dir", str(OUT / "spool"))  # fmt: skip
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=60)
    _python("collector", "report", "--db", str(DB), "--format", "html", "--output", str(OUT / "report.html"))
    _python("collector", "report", "--db", str(DB), "--format", "md", "--output", str(OUT / "report.md"))
    print(
        f"\nflopfleet demo ({suite} suite on {device}):\n"
        f"  report    {OUT / 'report.html'} (open in a browser; also report.md)\n"
        f"  database  {DB}\n"
        f"  run       {run_file}\n"
        f'  query     {sys.executable} -m collector sql --db {DB} "SELECT * FROM cards"'
    )


if __name__ == "__main__":
    main()
