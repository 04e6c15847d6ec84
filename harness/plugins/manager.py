"""Building the plugin manager and the registries it fills.

No global manager exists: every call builds a fresh one, so installed plugins never leak between tests.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

import pluggy

from harness import hookspecs
from harness.plugins.local import LocalPlugin, load_local_plugin
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
    """The plugin manager, a registry per kind, the third-party plugins skipped in whole or in part (name -> one
    line saying what was skipped and why), and the local plugins loaded (``--plugin``)."""

    manager: pluggy.PluginManager
    registries: dict[str, Registry]
    broken: dict[str, str] = field(default_factory=dict)
    local: list[LocalPlugin] = field(default_factory=list)

    def __getitem__(self, kind: str) -> Registry:
        return self.registries[kind]

    def forget_used(self) -> None:
        """Start a run's record of the plugins it uses (a grid's cells share one manager)."""
        for registry in self.registries.values():
            registry.looked_up.clear()

    def used(self) -> list[tuple[str, str]]:
        """(kind, name) of every plugin looked up since ``forget_used``: those the run and its plugins asked for (a
        trainer's advantage estimator, a behaviour, the model alias), in the order they were."""
        return [(kind, name) for kind, registry in self.registries.items() for name in registry.looked_up]


def get_plugin_manager(
    extra_plugins: tuple[object, ...] = (), autoload: bool | None = None, local: Sequence[str] = ()
) -> Plugins:
    """Register built-ins, then ``extra_plugins`` (tests use this), then the ``local`` plugins (``--plugin``: files or
    module names, harness/plugins/local.py), then the ``harness`` entry points; fill registries.

    Built-in and extra plugins are ours: any fault in them (a misspelt hook, a name registered twice, a hook that
    raises) is a bug and propagates. A local plugin's is the user's, who asked for it: a one-line ``PluginError``
    naming it. A third-party plugin's fault must not stop every command, `harness list` included, so it is skipped
    with one line on stderr and recorded in ``broken``: a package that fails to import, a misspelt hook name (the
    plugin is unregistered), a hook that raises, or a name already taken. Names go to whoever registered first, and
    third-party plugins come after the built-ins (and local plugins) in the order of their entry points' names, so a
    built-in name can never be taken over and a clash between two packages always ends the same way.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(module_name), name=f"builtin:{module_name}")
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()  # a misspelt hook name in our own plugins fails loudly here
    loaded = _register_local(pm, local)
    local_labels = {plugin.label for plugin in loaded}
    broken: dict[str, str] = {}
    third_party: set[str] = set()
    if autoload is None:
        autoload = not os.environ.get(DISABLE_AUTOLOAD_ENV)
    if autoload:
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, _label(ep))):
            label = _label(ep)
            if pm.get_plugin(label) is not None or pm.is_blocked(label):
                continue
            try:
                pm.register(ep.load(), name=label)
            except Exception as exc:  # any import-time error of a foreign package, or a hook with wrong arguments
                broken[label] = f"not loaded: {type(exc).__name__}: {_first_line(exc)}{_missing_module_hint(ep, exc)}"
                continue
            unknown = _unknown_hooks(pm, label)
            if unknown:
                pm.unregister(name=label)  # none of its hooks run: half a plugin would be harder to understand
                broken[label] = (
                    f"not loaded: unknown hook(s) {', '.join(unknown)} (misspelt? every hook is "
                    f"listed in docs/reference/hooks.md)"
                )
                continue
            third_party.add(label)

    registries = {kind: Registry(kind) for kind in KINDS}
    # Registration order, not pluggy's call order (last registered first): first come, first served.
    order = {name: i for i, (name, _) in enumerate(pm.list_name_plugin())}
    for kind, hook_name in KINDS.items():
        registry = registries[kind]
        # Each implementation is called by hand (rather than pm.hook.X(...)) so the registry knows which plugin is
        # adding a name (for duplicate errors and `harness list`) and one raising plugin does not stop the rest.
        for impl in sorted(getattr(pm.hook, hook_name).get_hookimpls(), key=lambda impl: order[impl.plugin_name]):
            registry.current_plugin = impl.plugin_name
            registry.third_party = impl.plugin_name in third_party
            try:
                impl.function(registry=registry)
            except Exception as exc:
                if impl.plugin_name in local_labels:  # the user's own: one line naming it (a clash already is one)
                    if isinstance(exc, PluginError):
                        raise
                    raise PluginError(
                        f"plugin {impl.plugin_name!r}: {hook_name} raised {type(exc).__name__}: {_first_line(exc)}"
                    ) from exc
                if not registry.third_party:  # a built-in or test plugin failing is a bug: surface it
                    raise
                _add(broken, impl.plugin_name, f"{hook_name} raised {type(exc).__name__}: {_first_line(exc)}")
        for plugin, message in registry.refused:
            _add(broken, plugin, message)
        registry.current_plugin, registry.third_party = "?", False
    for label, message in broken.items():
        print(f"warning: plugin {label!r}: {message}", file=sys.stderr)
    return Plugins(pm, registries, broken, loaded)


def _register_local(pm: pluggy.PluginManager, specs: Sequence[str]) -> list[LocalPlugin]:
    """Load and register each ``--plugin``; any mistake is a one-line PluginError naming it."""
    loaded: list[LocalPlugin] = []
    for spec in specs:
        plugin = load_local_plugin(spec)
        if pm.get_plugin(plugin.label) is not None:  # the same --plugin twice
            continue
        try:
            pm.register(plugin.module, name=plugin.label)
        except Exception as exc:  # pluggy refuses a hook with arguments its spec lacks, or a module given twice
            raise PluginError(f"--plugin {spec}: {type(exc).__name__}: {_first_line(exc)}") from None
        unknown = _unknown_hooks(pm, plugin.label)
        if unknown:
            raise PluginError(
                f"--plugin {spec}: unknown hook(s) {', '.join(unknown)} (misspelt? every hook is listed "
                "in docs/reference/hooks.md)"
            )
        if not pm.get_hookcallers(plugin.module):
            raise PluginError(
                f"--plugin {spec}: implements no hook; decorate its harness_register_* functions with "
                "harness.hookspecs.hookimpl"
            )
        loaded.append(plugin)
    return loaded


def _unknown_hooks(pm: pluggy.PluginManager, label: str) -> list[str]:
    """The hook names plugin ``label`` implements that no hookspec declares (what ``check_pending`` rejects)."""
    plugin = pm.get_plugin(label)
    return sorted(
        caller.name
        for caller in pm.get_hookcallers(plugin) or ()
        if not caller.has_spec()
        and any(not impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin)
    )


def _missing_module_hint(ep: EntryPoint, exc: BaseException) -> str:
    """An entry point whose own module is missing: its package installed without it (setuptools' automatic
    discovery picked another folder, e.g. a runs/ left beside the module, and pip said nothing)."""
    module = str(getattr(ep, "value", "")).split(":")[0].strip()
    if not module:
        return ""
    if not isinstance(exc, ModuleNotFoundError) or exc.name not in (module, module.split(".")[0]):
        return ""
    return (
        f" (its package was installed without the module {module!r}: name it in its pyproject.toml, "
        f'[tool.setuptools] py-modules = ["{module}"] or packages = [...], and install it again)'
    )


def _add(broken: dict[str, str], label: str, message: str) -> None:
    """One line per plugin, however many things went wrong with it."""
    broken[label] = f"{broken[label]}; {message}" if label in broken else message


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _label(ep) -> str:
    """An entry point's plugin name: ``distribution:entry-name`` so `harness list` says where a plugin came from."""
    dist = getattr(ep, "dist", None)
    return f"{dist.name}:{ep.name}" if dist is not None else ep.name
