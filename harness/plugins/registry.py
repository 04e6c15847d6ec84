"""Name -> factory registries, one per plugin kind, filled by the registration hooks."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any


class PluginError(Exception):
    """A plugin could not be found, registered or loaded. The message is one line meant for the user."""


@dataclass(frozen=True)
class Entry:
    name: str
    factory: Callable[..., Any] | str
    description: str
    plugin: str  # the plugin (module or distribution) that registered it
    member: str | None = None  # for a family ("rg:"), the part after the prefix ("maze" in "rg:maze")
    presets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # preset name -> options

    def load(self) -> Callable[..., Any]:
        """The factory (or registered object) itself; a ``"module:attr"`` string is imported now, not at
        registration."""
        if not isinstance(self.factory, str):
            return self.factory
        module_name, _, attr = self.factory.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise PluginError(
                f"{self.name!r} from plugin {self.plugin!r} failed to load {self.factory!r}: {exc}"
            ) from exc
        return obj

    def package(self) -> str | None:
        """Where the factory's code comes from: the installed distribution and its version ("vector-harness 0.1.0"
        for a built-in), else its module's file (a --plugin file), else None. What a manifest records: the plugin's
        label says who registered the name, this says whose code runs."""
        module = (
            self.factory.partition(":")[0]
            if isinstance(self.factory, str)
            else getattr(self.factory, "__module__", None) or ""
        )
        for dist in _distributions().get(module.partition(".")[0], []):
            try:
                return f"{dist} {metadata.version(dist)}"
            except metadata.PackageNotFoundError:
                continue
        return getattr(sys.modules.get(module), "__file__", None)

    def create(self, **options: Any) -> Any:
        """Call the factory; a family's factory receives the member name first: ``factory("maze", **options)``."""
        if self.member is not None:
            return self.load()(self.member, **options)
        return self.load()(**options)


class Registry:
    """Plugins of one kind ("task", "trainer", ...). Names are unique, and a name belongs to whoever registered it
    first: "last one wins" would let an installed package silently replace a built-in. A duplicate from a built-in
    or test plugin is a bug and an error naming both plugins; one from a third-party plugin (``third_party`` set by
    the manager while its hook runs) is dropped and kept in ``refused`` as (plugin, one-line reason), so one
    package's clash does not stop every command.

    A name ending in ":" registers a family: ``add("rg:", factory)`` makes ``get("rg:maze")`` an entry whose
    factory is called as ``factory("maze", **options)`` (a bridge to another library's many tasks)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self.current_plugin = "?"  # set by the plugin manager while a plugin's registration hook runs
        self.third_party = False  # ... and whether that plugin is an installed package rather than ours
        self.refused: list[tuple[str, str]] = []
        self.looked_up: list[str] = []  # names found since the last ``Plugins.forget_used``: what a run uses

    def add(
        self,
        name: str,
        factory: Callable[..., Any] | str,
        description: str = "",
        presets: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Register ``name``. ``presets``: option bundles by preset name (``--preset quick``), kept with the plugin
        they configure; flags and ``--set`` override them."""
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {self.current_plugin!r} registered a {self.kind} with an invalid name {name!r}")
        if name in self._entries:
            first = self._entries[name].plugin
            if self.third_party:
                self.refused.append(
                    (self.current_plugin, f"{self.kind} {name!r} not registered: the name is taken by {first!r}")
                )
                return
            raise PluginError(
                f"duplicate {self.kind} {name!r}: registered by both {first!r} and {self.current_plugin!r}"
            )
        self._entries[name] = Entry(
            name,
            factory,
            description.strip().splitlines()[0] if description else "",
            self.current_plugin,
            presets=dict(presets or {}),
        )

    def get(self, name: str) -> Entry:
        if name in self._entries:
            return self._used(self._entries[name])
        prefix, colon, member = name.partition(":")
        family = self._entries.get(prefix + colon) if colon else None
        if family is not None and member:
            return self._used(dataclasses.replace(family, name=name, member=member))
        available = ", ".join(f"{n}<name>" if n.endswith(":") else n for n in sorted(self._entries)) or "(none)"
        from harness.plugins.options import closest  # (options imports nothing of this module's)

        close = closest(name, [n for n in self._entries if not n.endswith(":")])
        guess = f"; did you mean {' or '.join(close)}? available:" if close else "; available:"
        raise PluginError(f"unknown {self.kind} {name!r}{guess} {available}")

    def _used(self, entry: Entry) -> Entry:
        if entry.name not in self.looked_up:
            self.looked_up.append(entry.name)
        return entry

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        return sorted(self._entries)


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    """Top-level module -> the installed distributions providing it (read once: it scans every installed one)."""
    return metadata.packages_distributions()
