"""Open a report page in headless Chromium (through Playwright, with the system's browser: nothing is downloaded),
take a screenshot, and return what went wrong on the page: console errors, script errors, files that did not load,
images with no pixels. Used by `harness report --screenshot` and by the report's rendering test."""

from __future__ import annotations

import shutil
from pathlib import Path

# Background networking off: this machine's closed network refuses Chromium's update and sync calls, noisily.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 1600, click: str | None = None) -> list[str]:
    """Render ``html``, optionally click ``click`` (a CSS selector), save the viewport to ``png``; return the page's
    problems (empty when it rendered cleanly)."""
    browser_path = find_chromium()
    if browser_path is None:
        raise ValueError("no Chromium found (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ValueError("screenshots need the playwright package: pip install playwright") from None
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"failed to load {r.url}"))
            page.goto(Path(html).resolve().as_uri())
            page.wait_for_load_state("load")
            images = page.eval_on_selector_all("img", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth])")
            problems += [f"empty image {src}" for src, w in images if not w]
            if click:
                page.click(click)
            Path(png).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(png))
        finally:
            browser.close()
    return problems
