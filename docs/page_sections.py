"""Generated sections inside a page otherwise written by hand: the text between ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->`` is rewritten, the rest kept as it is (docs/generate.py, docs/results_pages.py)."""

from __future__ import annotations

import re
from collections.abc import Callable


def sections(text: str, renders: dict[str, Callable[[], str]]) -> str:
    """``text`` with each marked section rewritten by its render function; the text around them is kept as it is."""
    for name, render in renders.items():
        start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
        pattern = re.compile(rf"({re.escape(start)}\n).*?({re.escape(end)})", re.S)
        if not pattern.search(text):
            raise ValueError(f"no section {start} ... {end}")
        text = pattern.sub(lambda m, r=render: f"{m[1]}\n{r().strip(chr(10))}\n\n{m[2]}", text)
    return text
