"""docs/generate.py, the one generator of the documentation's generated pages, loaded for the tests: it lives
outside the package (the pages are not shipped with it), so it is loaded by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PATH = Path(__file__).resolve().parents[1] / "docs" / "generate.py"


def _load() -> ModuleType:
    name = "docs_generate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before it runs: its dataclasses and annotations look themselves up there
        spec.loader.exec_module(module)
    return sys.modules[name]


generate = _load()
