"""The charts name their axes, and their figures read as text without SVG or a script."""

from __future__ import annotations

import re

from .conftest import Inspected


async def test_each_chart_labels_its_axes_and_lists_its_figures(inspected: Inspected) -> None:
    response = await inspected.client.get("/s/demo/charts")
    assert response.status_code == 200
    figures = response.text.split("<figure>")[1:]
    assert len(figures) == 3
    for figure in figures:
        labels = re.findall(r'<text [^>]*class="axis-label"[^>]*>([^<]+)</text>', figure)
        assert len(labels) == 2, figure[:400]  # one across, one up
        table = figure.split('<table class="chart-data">', 1)[1]
        rows = re.findall(r"<tr><td>(\d+)</td>", table)
        assert rows, table[:300]
    across, up = re.findall(r'class="axis-label"[^>]*>([^<]+)<', figures[0])[::-1]
    assert up == "tokens" and "entry position" in across
    # The transcript's last row is the branch's whole token count, as the caption says.
    last = re.findall(r"<tr><td>\d+</td><td>(\d+)</td></tr>", figures[0])[-1]
    assert f"({last} in all" in figures[0]


async def test_without_javascript_the_session_page_links_the_charts(
    inspected: Inspected,
) -> None:
    page = (await inspected.client.get("/s/demo")).text
    holder = page.split('<div id="charts"', 1)[1].split("</div>", 1)[0]
    link = re.search(r'<a href="([^"]+)">show the charts</a>', holder)
    assert link is not None
    fragment = await inspected.client.get(link.group(1).replace("&amp;", "&"))
    assert fragment.status_code == 200 and 'class="chart-data"' in fragment.text
