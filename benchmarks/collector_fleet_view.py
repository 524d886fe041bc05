"""What a person sees at ``/health`` of a 10,000-GPU fleet: screenshots by a real browser (Debian's chromium through
Playwright, as ``tests/collector/test_browser_fleet.py`` drives it at a small fleet) of the first screen and of the
spread of each figure, written under docs/. Run on demand:

    .venv/bin/python benchmarks/collector_fleet_view.py --dir /tmp/fleets      # 100,000 runs of 10,000 GPUs

The fleet is ``collector_million.fleet_file``'s (built once, kept in ``--dir``), served from a copy by
``flopfleet-collector serve`` in its own process.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.serving import CollectorProcess  # noqa: E402

OUT = ROOT / "docs" / "results" / "fleet-view"
#: A laptop's screen.
SCREEN = {"width": 1280, "height": 800}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", default="100000:10000", help="RUNS:GPUS")
    parser.add_argument("--dir", type=Path, help="keep the generated fleet here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runs, gpus = (int(n) for n in args.fleet.split(":"))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db = Path(tmp) / "fleet.duckdb"
        shutil.copyfile(fleet_file(args.dir or Path(tmp), runs, gpus), db)
        server = CollectorProcess(db)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport=SCREEN)
                began = time.perf_counter()
                page.goto(server.url + "/health", timeout=120_000)
                print(f"/health of {gpus:,} GPUs ({runs:,} runs) loaded in {time.perf_counter() - began:.1f} s "
                      "(its first request judges the fleet)")  # fmt: skip
                first = args.out / f"health-{gpus}-gpus.png"
                page.screenshot(path=str(first))
                page.locator(".spreads").first.scroll_into_view_if_needed()
                page.evaluate("document.querySelector('h2 + p + h3').scrollIntoView()")
                spreads = args.out / f"health-{gpus}-gpus-spreads.png"
                page.screenshot(path=str(spreads))
                page.goto(server.url + "/health?level=slow#gpus")
                slow = args.out / f"health-{gpus}-gpus-slow.png"
                page.screenshot(path=str(slow))
                browser.close()
        finally:
            server.stop()
    for path in (first, spreads, slow):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
