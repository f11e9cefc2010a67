"""The campaign viewer in headless Chromium (Debian's `chromium`, driven by Playwright),
on a real campaign: the grid opens from disk, a click on a failed cell shows its evidence,
and a 100 MB transcript pages and searches without loading whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import campaign_config, cell_dir, make_workdir, snakemake

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="needs Debian's chromium"),
]
NEEDLE = "NEEDLE-in-the-last-page-7f3a"


def collect(workdir):
    return subprocess.run(
        [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """One scored cell (exit0) and one agent_failed (exit3); exit0's transcript replaced
    by a 100 MB one with a needle on its last line."""
    root = tmp_path_factory.mktemp("viewer") / "campaign"
    make_workdir(root, campaign_config(agents=["exit0", "exit3"]))
    res = snakemake(root)
    assert res.returncode != 0  # exit3's cell has no score
    transcript = cell_dir(root, "exit0") / "solve_parsed_sanitized.txt"
    line = ("ASSISTANT: " + "lorem ipsum dolor sit amet " * 7 + "\n").encode()
    with transcript.open("wb") as f:
        block = line * (1024 * 1024 // len(line) + 1)
        for _ in range(100):
            f.write(block)
        f.write(f"TOOL RESULT: {NEEDLE}\n".encode())
    assert transcript.stat().st_size > 100 * 2**20
    collect(root)
    return root


def test_grid_click_shows_the_failed_cells_evidence(campaign):
    from playwright.sync_api import sync_playwright

    index = campaign / "results" / "viewer" / "index.html"
    shot = campaign / "results" / "viewer_screenshot.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(index.as_uri())
        assert "1 scored, 1 agent_failed" in page.locator("body").inner_text()
        page.screenshot(path=str(shot))
        page.locator("#grid a[data-outcome='agent_failed']").click()
        page.wait_for_load_state()
        assert page.locator("#outcome").inner_text() == "agent_failed"
        assert "agent exited with code 3" in page.locator("#evidence").inner_text()
        assert "solve.json" in page.locator("body").inner_text()
        browser.close()
    assert shot.stat().st_size > 5_000
    print(f"screenshot: {shot}")


def test_a_100_mb_transcript_pages_and_searches(campaign):
    from playwright.sync_api import sync_playwright

    cell_page = campaign / "results" / "viewer" / "cells" / "exit0.fake.m1.0.0005h-0gpu-run1.html"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page()
        page.goto(cell_page.as_uri())
        started = time.monotonic()
        page.locator("#transcript").click()
        page.wait_for_function("document.getElementById('text').textContent.length > 1000", timeout=10_000)
        opened = time.monotonic() - started
        where = page.locator("#where").inner_text()
        pages = int(where.rsplit(" ", 1)[1])
        assert where.startswith("page 1 of ") and pages >= 400, where
        # the page holds one chunk, not the file
        assert len(page.locator("#text").inner_text()) < 300_000
        page.locator("#next").click()
        page.wait_for_function("document.getElementById('where').textContent.startsWith('page 2 ')")
        page.fill("#q", NEEDLE)
        page.locator("#go").click()
        # the page answers while the search walks 400 chunks
        page.wait_for_function("document.getElementById('status').textContent.startsWith('searching')")
        assert page.evaluate("1 + 1") == 2
        page.wait_for_function("/lines match$/.test(document.getElementById('status').textContent)", timeout=120_000)
        hits = page.locator("#hits li")
        assert hits.count() == 1 and NEEDLE in hits.first.inner_text()
        hits.first.locator("a").click()
        page.wait_for_function(f"document.getElementById('where').textContent === 'page {pages} of {pages}'")
        assert page.locator("#hit").inner_text() == NEEDLE
        browser.close()
    print(f"100 MB transcript: first page shown {opened:.1f} s after the click, {pages} pages")
