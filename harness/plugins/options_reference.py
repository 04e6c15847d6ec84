"""Every plugin's options as text: ``harness options KIND NAME`` prints one plugin's, from the one description
(harness/plugins/option_help.py). docs/reference/options.md, every built-in's, is written from the same functions
by docs/generate.py, so the page cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from typing import Any

from harness.plugins.aliases import aliases_of
from harness.plugins.option_help import Option, describe_entry, show, takes_any
from harness.types import EngineCapabilities, capabilities_of

KINDS = ("task", "trainer", "searcher", "engine", "logger")  # the kinds a user sets options of (--set KIND.KEY=...)


def notes(kind: str, entry: Any) -> list[str]:
    """What the option list alone does not say: presets, options passed on, options named elsewhere."""
    factory = entry.load()
    lines = [
        f"preset {preset}: " + ", ".join(f"{k}={show(v)}" for k, v in values.items())
        for preset, values in sorted(entry.presets.items())
    ]
    passthrough = capabilities_of(factory, EngineCapabilities).passthrough if kind == "engine" else ""
    if passthrough:
        module, _, name = passthrough.partition(":")
        lines.append(f"any other option is passed on: a field of {name} ({module})")
    elif entry.name.endswith(":") and entry.member is None:
        lines.append(f"a member's own options too: `harness options {kind} {entry.name}<name>`")
    elif takes_any(factory, entry.member):
        lines.append("takes other options it does not describe (**kwargs)")
    return lines


def default_preset() -> str:
    """The preset a run gets without --preset (RunConfig's default)."""
    from harness.runner.config import RunConfig

    return next(f.default for f in dataclasses.fields(RunConfig) if f.name == "preset")


def run_default(option: Option, presets: dict[str, dict[str, Any]]) -> tuple[Any, str]:
    """(the value a run gets when the user leaves ``option`` alone, what else applies): the default preset's value
    where it sets one (labelled, with the option's own default beside it), then the other presets' values."""
    preset = default_preset()
    others = [
        f"preset {p}: {show(v[option.name])}" for p, v in sorted(presets.items()) if p != preset and option.name in v
    ]
    value = presets.get(preset, {}).get(option.name, option.default)
    if option.name in presets.get(preset, {}) and value != option.default:
        said = [f"preset {preset}, a default run's", f"own default {show(option.default)}", *others]
        return value, "; ".join(said)
    return value, "; ".join(others)


def aliases_note(entry: Any) -> list[str]:
    """Another library's names the plugin takes (TRL's for GRPO), in one line."""
    aliases = list(aliases_of(entry.load()).values())
    if not aliases:
        return []
    library = aliases[0].library
    renames = ", ".join(f"{a.name} -> {a.target}" for a in aliases if a.target and not a.values)
    return [
        f"also takes {len(aliases)} of {library}'s names, each set as the option it stands for or refused in one line "
        f"with what to use instead (docs/reference/trl-options.md): {renames}, ..."
    ]


def options_text(plugins: Any, kind: str, name: str, width: int | None = None) -> str:
    """One plugin's options for the terminal: name, type, default, bounds, then the help, wrapped."""
    if kind not in KINDS:
        raise ValueError(f"harness options: KIND must be one of {', '.join(KINDS)}, got {kind!r}")
    entry = plugins[kind].get(name)
    options = describe_entry(kind, entry)
    width = width or min(120, shutil.get_terminal_size((120, 24)).columns)
    head = f"{kind} {name!r}: {entry.description}  [{entry.plugin}]"
    lines = [
        head,
        f"{len(options)} options, set with --set {kind}.KEY=VALUE or [set.{kind}] in an experiment file"
        if options
        else "no options",
    ]
    for option in options:
        bounds = f"  [{option.bounds}]" if option.bounds else ""
        value, said = run_default(option, entry.presets)
        said = f" ({said})" if said else ""
        lines.append(f"  {option.name}: {option.type or '?'} = {show(value)}{said}{bounds}")
        lines += textwrap.wrap(
            option.help or "(no help written)", width, initial_indent=" " * 6, subsequent_indent=" " * 6
        )
    lines += [f"{line}" for line in notes(kind, entry)]
    lines += aliases_note(entry)
    return "\n".join(lines)
