"""Plugins without packaging: ``--plugin ./my_plugin.py`` (a file) or ``--plugin my_plugins`` (a module importable
from the working directory), as pytest's ``-p``. The module is registered with the plugin manager after the built-in
plugins and before installed packages, so its hooks add tasks, trainers, searchers, ... exactly as an installed
package's do.

A local plugin is the user's own and asked for by name, so every mistake in it is an error in one line (a missing
file, an import error, a misspelt hook, a hook that raises, a name already taken), never the warning an installed
package gets. A file is imported under its stem (``my_plugin``), so its own ``"my_plugin:MyTask"`` factory strings
resolve; it is read afresh by each plugin manager.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.plugins.registry import PluginError
from harness.provenance import file_sha256

LABEL_PREFIX = "local:"  # a local plugin's name in registries and `harness list`: local:./my_plugin.py
_MARK = "__harness_local_plugin__"  # set on modules loaded from a file here, so reloading one replaces it


@dataclass(frozen=True)
class LocalPlugin:
    spec: str  # as given: a path or a module name
    module: ModuleType
    path: str | None  # the file it was read from

    @property
    def label(self) -> str:
        return LABEL_PREFIX + self.spec

    def describe(self) -> dict[str, Any]:
        """For the manifest: what was asked for, the file read and its content digest."""
        return {"plugin": self.label, "path": self.path, "sha256": file_sha256(Path(self.path)) if self.path else None}


def import_from_cwd(module_name: str) -> ModuleType:
    """Import a module the way ``python -c`` in the working directory would (which the ``harness`` script does not:
    its sys.path starts with its own folder), so ``--reward mymodule:fn`` finds ./mymodule.py."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(module_name)


def load_local_plugin(spec: str) -> LocalPlugin:
    """The module ``spec`` names: a .py file (a path), else a module importable from the working directory."""
    if not isinstance(spec, str) or not spec.strip():
        raise PluginError(f"--plugin {spec!r}: expected a .py file or a module name")
    spec = spec.strip()
    try:
        if spec.endswith(".py") or "/" in spec or os.sep in spec:
            return LocalPlugin(spec, _load_file(spec), str(Path(spec).resolve()))
        module = import_from_cwd(spec)
    except PluginError:
        raise
    except Exception as exc:  # the plugin's own import-time error (SyntaxError included): one line, not a traceback
        raise PluginError(f"--plugin {spec}: importing it raised {type(exc).__name__}: {_first_line(exc)}") from exc
    return LocalPlugin(spec, module, getattr(module, "__file__", None))


def _load_file(spec: str) -> ModuleType:
    path = Path(spec).expanduser()
    if not path.is_file():
        raise PluginError(f"--plugin {spec}: no such file ({path.resolve()})")
    name = path.stem
    if not name.isidentifier():
        raise PluginError(f"--plugin {spec}: {name!r} is not a module name; rename the file (letters, digits, _)")
    existing = sys.modules.get(name)
    if existing is not None and not getattr(existing, _MARK, False):
        raise PluginError(
            f"--plugin {spec}: a module named {name!r} is already imported ({existing.__name__} from "
            f"{getattr(existing, '__file__', None) or 'built in'}); rename the file"
        )
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise PluginError(f"--plugin {spec}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    setattr(module, _MARK, True)
    sys.modules[name] = module  # before executing it: dataclasses and "name:attr" factory strings look it up
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
