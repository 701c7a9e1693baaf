"""The status page in a real browser: a server process with keys, Debian's headless Chromium
driven by Playwright. The page shows the model rows (loaded, failed with its error), a figure
moves after requests without a reload, the actions (evict, load, reload) change the models, and
a screenshot is taken (it replaces the README's docs/status-page.png when SIE_UPDATE_SCREENSHOT=1, so a
test run leaves the checkout as it was)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.server import REPO, ServerProcess
from tests.helpers.status_catalog import ADMIN_KEY, API_KEY, EMBEDDER, FLAKY, LLM, status_catalog

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = REPO / "docs" / "status-page.png"
# without the background-networking flags Chromium tries to reach Google's services
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
WAIT_MS = 15_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (`apt-get install -y chromium`; make install-dev does it)"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("status-page")
    catalog, flaky = status_catalog(root)
    proc = ServerProcess(
        catalog, "--offline", "--threads", "1", "--api-key", API_KEY, "--admin-key", ADMIN_KEY, log=root / "server.log"
    )
    try:
        yield proc.wait_ready(), flaky
    finally:
        proc.stop()


def test_the_status_page_in_chromium(served: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    proc, flaky = served
    url = proc.url
    encode = {"items": [{"text": "the status page"}]}
    assert httpx.post(f"{url}/v1/encode/{EMBEDDER}", json=encode, headers=ADMIN, timeout=60).status_code == 200
    generated = httpx.post(
        f"{url}/v1/generate/{LLM}", json={"prompt": "hi", "max_new_tokens": 8}, headers=ADMIN, timeout=120
    )
    assert generated.status_code == 200
    assert httpx.post(f"{url}/v1/models/{FLAKY}/load", headers=ADMIN, timeout=60).status_code == 502

    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1500, "height": 760},
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/status")
            expect(page.locator("#meta")).to_contain_text("needs an API key", timeout=WAIT_MS)
            page.fill("#key", ADMIN_KEY)
            page.locator("#key").dispatch_event("change")

            embedder = page.locator(f'tr[data-model="{EMBEDDER}"]')
            expect(embedder).to_have_attribute("data-state", "loaded", timeout=WAIT_MS)
            failed = page.locator(f'tr[data-model="{FLAKY}"]')
            expect(failed).to_have_attribute("data-state", "failed", timeout=WAIT_MS)
            expect(failed).to_contain_text("READY")
            expect(page.locator(f'tr[data-model="{LLM}"]')).to_have_attribute("data-state", "loaded")
            expect(page.locator("#errors")).to_contain_text("MODEL_LOAD_FAILED")

            before = embedder.locator(".rps").inner_text()
            for i in range(4):
                body = {"items": [{"text": f"one more request {i}"}]}
                assert (
                    httpx.post(f"{url}/v1/encode/{EMBEDDER}", json=body, headers=ADMIN, timeout=60).status_code == 200
                )
            expect(embedder.locator(".rps")).not_to_have_text(before, timeout=WAIT_MS)  # redrawn, not reloaded
            page.screenshot(path=str(tmp_path / "status-page.png"), full_page=True)

            embedder.locator('button[data-action="evict"]').click()
            expect(embedder).to_have_attribute("data-state", "available", timeout=WAIT_MS)
            embedder.locator('button[data-action="load"]').click()
            expect(embedder).to_have_attribute("data-state", "loaded", timeout=WAIT_MS)
            (flaky / "READY").write_text("mended")
            failed.locator('button[data-action="reload"]').click()
            expect(failed).to_have_attribute("data-state", "loaded", timeout=WAIT_MS)
            expect(page.locator("#banner")).to_be_hidden()  # no action failed
        finally:
            browser.close()
    assert (tmp_path / "status-page.png").stat().st_size > 10_000  # a real page, not a blank one
    if os.environ.get("SIE_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(tmp_path / "status-page.png", SCREENSHOT)
