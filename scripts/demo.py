"""`make demo`: a local collector on a DuckDB file, the agent on this machine's GPU (or CPU), the report, and then
the pages: on a terminal the collector stays up serving the demo's database until Ctrl-C; elsewhere (CI, a pipe)
it stops and the command that serves the database again is printed, so nothing waits for a key that never comes.

Everything lands under demo/ (``DEMO_DIR``): the database, the run JSON, report.html and report.md. ``DEMO_SUITE``
picks the suite (default: standard on a GPU, quick on a CPU), ``DEMO_ONLY`` limits it to some benchmarks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("DEMO_DIR") or ROOT / "demo").resolve()
DB = OUT / "flopfleet.duckdb"
#: The port the pages are served on when it is free (the collector's default); another free one otherwise.
PORT = 8000
#: Where the commands are: the virtual environment's bin folder (``make`` created it), said relative to the checkout.
BIN = Path(sys.executable).parent


def _shown(path: Path) -> str:
    """A path as a person types it from the checkout: relative where it is inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _python(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, check=True, **kw)  # type: ignore[call-overload]


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _start_collector() -> tuple[subprocess.Popen[bytes], str]:
    port_file = OUT / "collector.port"
    port_file.unlink(missing_ok=True)
    # Its own session: a Ctrl-C reaches this script alone, which stops the collector once, with SIGTERM.
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--db", str(DB), "--port", str(PORT if _free(PORT) else 0),
         "--port-file", str(port_file), "--log-level", "warning"],
        cwd=ROOT, start_new_session=True,
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
    _stop(proc)
    raise SystemExit("the collector did not start within 60 s")


def _stop(collector: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops it: requests in flight finish, the database is closed."""
    if collector.poll() is None:
        collector.send_signal(signal.SIGTERM)
        try:
            collector.wait(timeout=60)
        except subprocess.TimeoutExpired:
            collector.kill()
            collector.wait()


def _demo_token() -> str:
    """A fresh write token named 'demo' (the previous demo's, if any, is revoked first)."""
    subprocess.run([sys.executable, "-m", "collector", "token", "revoke", "demo", "--db", str(DB)], cwd=ROOT,
                   capture_output=True)  # fmt: skip
    made = _python("collector", "token", "create", "--name", "demo", "--db", str(DB), capture_output=True)
    return str(made.stdout.decode().strip())


def _save(url: str, path: str, dest: Path) -> None:
    with urllib.request.urlopen(url + path, timeout=120) as answer:
        dest.write_bytes(answer.read())


def main() -> None:
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    suite = os.environ.get("DEMO_SUITE") or ("standard" if device == "cuda" else "quick")
    only = ["--only", os.environ["DEMO_ONLY"]] if os.environ.get("DEMO_ONLY") else []
    run_file = OUT / f"run-{time.strftime('%Y%m%dT%H%M%S')}.json"
    # Published figures for five cards, so even one machine's report has something to compare with.
    _python("collector", "import-reference", "--db", str(DB), capture_output=True)
    token = _demo_token()
    collector, url = _start_collector()
    print(f"collector: {url} (database {_shown(DB)})", flush=True)
    try:
        _python("agent", "run", "--suite", suite, *only, "--device", device, "--collector", url, "--token", token,
                "--output", str(run_file), "--spool-dir", str(OUT / "spool"))  # fmt: skip
        _save(url, "/report", OUT / "report.html")
        _save(url, "/report.md", OUT / "report.md")
        print(
            f"\nflopfleet demo ({suite} suite on {device}): the agent measured this machine and posted the run to a "
            f"collector, which stored it in DuckDB.\n"
            f"  report    {_shown(OUT / 'report.html')} (open it in a browser; also report.md)\n"
            f"  run       {_shown(run_file)} (what the agent posted)\n"
            f"  database  {_shown(DB)}\n"
            f"  commands  {_shown(BIN)}/flopfleet-agent and {_shown(BIN)}/flopfleet-collector (--help)",
            flush=True,
        )  # fmt: skip
        if sys.stdin.isatty():
            _serve(collector, url)
        else:
            _stop(collector)
            print(
                f"\nThe pages (cards, runs, health, SQL): serve the demo database with\n"
                f"  {_shown(BIN)}/flopfleet-collector serve --db {_shown(DB)}\n"
                f"and open http://127.0.0.1:{PORT}/ in a browser (Ctrl-C stops it).",
                flush=True,
            )  # fmt: skip
    finally:
        _stop(collector)


def _serve(collector: subprocess.Popen[bytes], url: str) -> None:
    """Leave the collector serving until Ctrl-C (or until it exits by itself)."""
    print(
        f"\nThe pages (cards, runs, health, SQL) are served at {url}/ : open it in a browser. Ctrl-C stops the "
        f"collector; later, {_shown(BIN)}/flopfleet-collector serve --db {_shown(DB)} serves them again.",
        flush=True,
    )  # fmt: skip
    try:
        collector.wait()
    except KeyboardInterrupt:
        _stop(collector)
        print("\ncollector stopped", flush=True)


if __name__ == "__main__":
    main()
