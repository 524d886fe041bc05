"""Every page in a real browser (Debian's chromium, driven by Playwright) at 800 and 1366 px wide, as a laptop
beside a terminal and a full screen show them: the page never scrolls sideways (a table wider than the window
scrolls inside itself), and what the page is for is on screen: its heading and the first column of its key table,
a run's results whole."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, urlencode

import httpx
import pytest

from tests.collector.conftest import A100, SXM
from tests.factories import inference, layer, matmul, run_dict, timing
from tests.servers import Collector

pytestmark = pytest.mark.browser
WIDTHS = (800, 1366)


def _one(site: Collector, sql: str) -> str:
    return str(httpx.get(f"{site.url}/api/v1/sql", params={"sql": sql}).json()["rows"][0][0])


def _wordy_run(site: Collector) -> str:
    """A run whose results table is as wide as a CPU's quick run makes it: the longest benchmark names, a reason in
    words, flags, a starved window, both implementations of an LLM cell."""
    slow = {**timing(2.5e-3), "method": "perf_counter", "cv": 1.179, "host_wait": 0.51}
    llm = [inference("prefill", 1, 512, 0.02), inference("prefill", 1, 512, 0.015)]
    llm[1]["params"] = {**llm[1]["params"], "implementation": "torch"}
    results = [
        matmul(128, "tf32", 1.0, status="unsupported", metrics=None, timing=None,
               reason="TF32 is a tensor-core mode of NVIDIA GPUs; this run is on the CPU"),
        matmul(256, "fp16", 0.00397, flags=["high_cv", "starved"], timing=slow),
        {**layer("t5_encoder_block", "fwd+bwd", 2, 32, 0.0123), "flags": ["high_cv", "starved"], "timing": slow},
        *llm,
    ]  # fmt: skip
    run = run_dict(results, hostname="a-rather-long-hostname.cluster.example.org")
    assert httpx.post(f"{site.url}/api/v1/runs", json=run, headers=site.auth).status_code == 201
    return str(run["run_id"])


@pytest.fixture(scope="module")
def pages(site: Collector) -> dict[str, tuple[str, str]]:
    """Each page: (its path on the fixture database, the selector of what it is for)."""
    run = _wordy_run(site)
    device = _one(site, "SELECT uuid FROM gpus WHERE uuid IS NOT NULL LIMIT 1")
    return {
        "home": ("/", "#cards"),
        "cards": ("/cards", "#cards"),
        "card": (f"/cards/{quote(A100)}", "#health"),
        "gpu": (f"/gpus/{quote(device)}", "#history"),
        "run": (f"/runs/{run}", "#results"),
        "compare": ("/compare?" + urlencode([("cards", SXM), ("cards", "A100 (published)")]), "#comparison"),
        "health": ("/health", "#health"),
        "sql": ("/sql?" + urlencode({"sql": "SELECT * FROM matmul LIMIT 20"}), "#sql-result"),
        "report": ("/report", "#comparison"),
        "error": ("/runs/no-such-run", "#error-message"),
    }


@pytest.fixture(scope="module")
def windows(browser: object) -> Iterator[dict[int, object]]:
    """One page (tab) per width, reused across the pages: navigating is what a test costs."""
    tabs = {width: browser.new_page(viewport={"width": width, "height": 900}) for width in WIDTHS}  # type: ignore[attr-defined]
    yield tabs
    for tab in tabs.values():
        tab.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["home", "cards", "card", "gpu", "run", "compare", "health", "sql", "report", "error"])
def test_a_page_fits_the_window_with_what_it_is_for_on_screen(
    site: Collector, pages: dict[str, tuple[str, str]], windows: dict[int, object], name: str
) -> None:
    path, key = pages[name]
    for width, tab in windows.items():
        answer = tab.goto(site.url + path)  # type: ignore[attr-defined]
        assert answer is not None and answer.status == (404 if name == "error" else 200), (width, path)
        page_width, window = tab.evaluate(  # type: ignore[attr-defined]
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert page_width <= window, f"{name} at {width} px scrolls sideways: {page_width} px of content"
        for selector in ("h1", key):
            element = tab.locator(selector).first  # type: ignore[attr-defined]
            assert element.is_visible(), (name, width, selector)
            box = element.bounding_box()
            assert box is not None and 0 <= box["x"] < window, (name, width, selector, box)
        first = tab.locator(f"{key} tr:first-child > :first-child").first  # type: ignore[attr-defined]
        if first.count():  # a table's first column: the card, GPU, benchmark or name a row is about
            box = first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= window, (name, width, box)
    if name == "run":  # every column of a run's results, without scrolling the table either
        inner, shown = windows[800].evaluate(  # type: ignore[attr-defined]
            "() => { const t = document.querySelector('#results'); return [t.scrollWidth, t.clientWidth]; }"
        )
        assert inner <= shown, f"a run's results need {inner} px at 800 px wide"
