"""A person at ``/health`` of a fleet larger than a page, in a real browser (Debian's chromium, Playwright): the
GPUs that need action are on the first screen, named with their level, and the filter form narrows the list to a
level on the server. ``benchmarks/collector_fleet_view.py`` takes the same view of 10,000 GPUs for docs/."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import httpx
import pytest

from collector.analysis.fleet import NEEDS_ACTION
from tests.collector.test_fleet_pages import CHECKS, GPUS, generate
from tests.servers import Collector, serve_collector

pytestmark = pytest.mark.browser
#: The browser's window: a laptop's.
SCREEN = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    db = generate(tmp_path_factory.mktemp("fleet") / "fleet.duckdb", GPUS * CHECKS, GPUS)
    with serve_collector(db) as served:
        yield served


def test_the_gpus_that_need_action_are_on_the_first_screen(browser: object, fleet: Collector) -> None:
    rows = list(csv.DictReader(io.StringIO(httpx.get(fleet.url + "/health.csv").text)))
    action = [r for r in rows if r["verdict"] in {level.value for level in NEEDS_ACTION}]
    page = browser.new_page(viewport=SCREEN)  # type: ignore[attr-defined]
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    assert page.goto(fleet.url + "/health").status == 200
    seen = page.evaluate("""() => {
        const visible = el => { const b = el.getBoundingClientRect(); return b.bottom > 0 && b.top < innerHeight; };
        const table = document.querySelector('#action').nextElementSibling.nextElementSibling;
        const rows = [...table.querySelectorAll('tbody tr')];
        return {glance: visible(document.querySelector('#glance')) && document.querySelector('#glance').innerText,
                first: visible(rows[0]), rows: rows.map(r => [r.cells[0].innerText, r.cells[3].innerText])};
    }""")  # type: ignore[attr-defined]
    assert seen["glance"].startswith(f"{GPUS:,} GPUs:") and "need action" in seen["glance"]
    assert seen["first"], "the first GPU that needs action is below the first screen"
    assert [gpu for gpu, _ in seen["rows"]] == [r["gpu"] for r in action]
    assert all(shown.startswith(r["verdict"]) for (_, shown), r in zip(seen["rows"], action, strict=True))
    # The form: one level, answered by the server, in the URL.
    page.select_option('#gpu-filter select[name="level"]', "slow")  # type: ignore[attr-defined]
    page.click("#gpu-filter button")  # type: ignore[attr-defined]
    page.wait_for_url("**level=slow**")  # type: ignore[attr-defined]
    levels = page.locator("#gpu-filter ~ table#health tbody tr td:nth-child(4)").all_inner_texts()  # type: ignore[attr-defined]
    assert levels and all(text.startswith("slow") for text in levels)
    assert len(levels) == sum(r["verdict"] == "slow" for r in rows)
    assert problems == []
    page.close()  # type: ignore[attr-defined]
