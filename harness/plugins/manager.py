"""Building the plugin manager and the registries it fills.

No global manager exists: every call builds a fresh one, so installed plugins never leak between tests.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import pluggy

from harness import hookspecs
from harness.plugins.registry import PluginError, Registry

ENTRY_POINT_GROUP = "harness"
DISABLE_AUTOLOAD_ENV = "HARNESS_DISABLE_PLUGIN_AUTOLOAD"

# Built-in plugins: registered through the same hooks as third-party ones. Each module only registers
# "module:attr" strings, so importing these never imports torch.
BUILTIN_PLUGINS = (
    "harness.models",
    "harness.tasks",
    "harness.trainers",
    "harness.searchers",
    "harness.store.loggers",
    "harness.engine",
)

KINDS = {  # registry kind -> registration hook
    "task": "harness_register_tasks",
    "trainer": "harness_register_trainers",
    "searcher": "harness_register_searchers",
    "advantage": "harness_register_advantage_estimators",
    "model": "harness_register_models",
    "behaviour": "harness_register_behaviours",
    "engine": "harness_register_engines",
    "logger": "harness_register_loggers",
}


@dataclass
class Plugins:
    """The plugin manager, a registry per kind, and the plugins that failed to load (name -> one-line error)."""

    manager: pluggy.PluginManager
    registries: dict[str, Registry]
    broken: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, kind: str) -> Registry:
        return self.registries[kind]


def get_plugin_manager(extra_plugins: tuple[object, ...] = (), autoload: bool | None = None) -> Plugins:
    """Register built-ins, then ``extra_plugins`` (tests use this), then the ``harness`` entry points; fill registries.

    A third-party plugin that fails to import or whose hook raises is recorded in ``broken`` and skipped, so one
    broken package never hides the others. Built-in failures are bugs and propagate.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(module_name), name=f"builtin:{module_name}")
    for plugin in extra_plugins:
        pm.register(plugin)
    broken: dict[str, str] = {}
    third_party: set[str] = set()
    if autoload is None:
        autoload = not os.environ.get(DISABLE_AUTOLOAD_ENV)
    if autoload:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            label = _label(ep)
            if pm.get_plugin(label) is not None or pm.is_blocked(label):
                continue
            try:
                pm.register(ep.load(), name=label)
                third_party.add(label)
            except Exception as exc:  # any import-time error of a foreign package
                broken[label] = f"failed to load: {type(exc).__name__}: {exc}"
    pm.check_pending()  # a misspelt hook name fails loudly here

    registries = {kind: Registry(kind) for kind in KINDS}
    for kind, hook_name in KINDS.items():
        registry = registries[kind]
        # Each implementation is called by hand (rather than pm.hook.X(...)) so the registry knows which plugin is
        # adding a name (for duplicate errors and `harness list`) and one raising plugin does not stop the rest.
        for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):
            registry.current_plugin = impl.plugin_name
            try:
                impl.function(registry=registry)
            except PluginError:
                raise
            except Exception as exc:
                if impl.plugin_name not in third_party:  # a built-in or test plugin failing is a bug: surface it
                    raise
                broken[impl.plugin_name] = f"{hook_name} raised {type(exc).__name__}: {exc}"
        registry.current_plugin = "?"
    for label, message in broken.items():
        print(f"warning: plugin {label!r} skipped: {message}", file=sys.stderr)
    return Plugins(pm, registries, broken)


def _label(ep) -> str:
    """An entry point's plugin name: ``distribution:entry-name`` so `harness list` says where a plugin came from."""
    dist = getattr(ep, "dist", None)
    return f"{dist.name}:{ep.name}" if dist is not None else ep.name
