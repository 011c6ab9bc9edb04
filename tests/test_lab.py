"""Students' path: a chapter opens in JupyterLab as a notebook, with a kernel, MyST rendered.

Starts JupyterLab on a free localhost port (as `make lab` does, `--allow-root` when root), then
(1) through Lab's REST API opens a chapter as a notebook (Jupytext's contents manager) and
starts a kernel on it, and (2) in headless Chromium opens the chapter in Lab's UI and checks it
is a notebook panel whose kernel goes idle and whose MyST markup (the "At a glance" admonition,
the exercise dropdowns) is rendered by jupyterlab-myst, not shown raw. `make test` runs these
with the browser tests, after the book is built.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_book_pages import BROWSER, CHROMIUM_FLAGS

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "08_verifier_roc.md"
pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    """A running JupyterLab serving notebooks/: yields (base url, token)."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={ROOT / 'notebooks'}"]  # fmt: skip
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(ROOT / "_build" / "lab-test.log", "w")  # noqa: SIM115  closed below
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                call(base, token, "GET", "/api/status")
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 120 s; see _build/lab-test.log")
        yield base, token
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Authorization": f"token {token}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else {}


def test_a_chapter_opens_as_a_notebook_with_a_kernel(lab):
    base, token = lab
    model = call(base, token, "GET", f"/api/contents/{CHAPTER}?type=notebook&content=1")
    assert model["type"] == "notebook"
    assert sum(c["cell_type"] == "code" for c in model["content"]["cells"]) > 5
    body = {"path": CHAPTER, "type": "notebook", "kernel": {"name": "python3"}}
    session = call(base, token, "POST", "/api/sessions", body)
    try:
        kernel = call(base, token, "GET", f"/api/kernels/{session['kernel']['id']}")
        assert kernel["name"] == "python3"
    finally:
        call(base, token, "DELETE", f"/api/sessions/{session['id']}")


@pytest.mark.skipif(BROWSER is None, reason="no Chromium found: `apt-get install chromium`")
def test_lab_shows_the_chapter_as_a_rendered_notebook(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.goto(f"{base}/lab/tree/{CHAPTER}?token={token}")
        panel = page.locator(".jp-NotebookPanel")
        panel.locator(".jp-MarkdownCell").first.wait_for(timeout=90_000)
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
        text = panel.inner_text()
        assert ":::{admonition}" not in text and ":::{dropdown}" not in text
        assert "At a glance" in text
        browser.close()
