"""The pages in a real headless browser (Debian's chromium, driven by Playwright): no console errors, the compare
page shows the chosen cards, the SQL console runs a query and shows rows."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.collector.conftest import A100, SXM
from tests.servers import Collector

pytestmark = pytest.mark.browser


def _open(browser: object, url: str) -> tuple[object, list[str]]:
    page = browser.new_page()  # type: ignore[attr-defined]
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("requestfailed", lambda req: problems.append(f"failed: {req.url}"))
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    return page, problems


@pytest.mark.parametrize("path", ["/", "/cards", f"/cards/{quote(A100)}", "/compare", "/health", "/sql", "/report"])
def test_pages_load_without_console_errors(browser: object, site: Collector, path: str) -> None:
    page, problems = _open(browser, site.url + path)
    assert page.locator("h1").count() == 1  # type: ignore[attr-defined]
    assert problems == []
    page.close()  # type: ignore[attr-defined]


def test_compare_page_shows_the_chosen_cards(browser: object, site: Collector) -> None:
    page, problems = _open(browser, f"{site.url}/compare")
    page.check(f'input[value="{SXM}"]')  # type: ignore[attr-defined]
    page.check('input[value="A100 (published)"]')  # type: ignore[attr-defined]
    page.click("#pick button")  # type: ignore[attr-defined]
    page.wait_for_selector("#comparison")  # type: ignore[attr-defined]
    headers = page.locator("#comparison thead th").all_inner_texts()  # type: ignore[attr-defined]
    assert headers[1:] == [SXM, "A100 (published)"]
    assert "cards=" in page.url  # type: ignore[attr-defined]
    assert problems == []


def test_sql_console_runs_a_query_and_shows_rows(browser: object, site: Collector) -> None:
    page, problems = _open(browser, f"{site.url}/sql")
    page.fill("#sql", "SELECT card, dtype, max(tflops) AS best FROM matmul GROUP BY ALL ORDER BY card, dtype")  # type: ignore[attr-defined]
    page.click("#sql-form button")  # type: ignore[attr-defined]
    page.wait_for_selector("#sql-result")  # type: ignore[attr-defined]
    rows = page.locator("#sql-result tbody tr").count()  # type: ignore[attr-defined]
    assert rows == 8  # four measured cards, bf16 and fp16 each
    assert page.locator("#sql-result thead th").all_inner_texts() == ["card", "dtype", "best"]  # type: ignore[attr-defined]
    assert problems == []


def test_chart_labels_stay_inside_their_charts_and_whole(browser: object, site: Collector) -> None:
    """Measured by the browser's own layout: no legend, group or axis label runs past its chart's edge."""
    page, problems = _open(browser, f"{site.url}/report")
    boxes = page.evaluate("""() => [...document.querySelectorAll('svg')].flatMap(svg => {
        const view = svg.viewBox.baseVal;
        return [...svg.querySelectorAll('text:not([transform])')].map(t => {
            const b = t.getBBox();
            const lines = [...t.querySelectorAll('tspan')].map(s => s.textContent);
            const text = lines.length ? lines.join(' ') : t.textContent;
            return [text, b.x, b.y + b.height, b.x + b.width, view.width, view.height];
        });
    })""")  # type: ignore[attr-defined]
    outside = [(text, round(right), round(bottom)) for text, left, bottom, right, width, height in boxes
               if left < -1 or right > width + 1 or bottom > height + 1]  # fmt: skip
    assert boxes and outside == []
    texts = {text for text, *_ in boxes}
    assert SXM in texts  # the whole card name, on as many lines as it needs
    assert any(text.endswith("MiB") for text in texts)  # the bandwidth charts' sizes
    assert problems == []
