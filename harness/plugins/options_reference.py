"""Every plugin's options as text: ``harness options KIND NAME`` prints one plugin's, and docs/options.md is every
built-in's, both from the one description (harness/plugins/option_help.py), so the page cannot drift from the code.

``python -m harness.plugins.options_reference`` rewrites docs/options.md; ``--check`` exits 1 when it is out of date
(tests/test_options_documented.py does the same). The page depends only on the source: no dates, no paths.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from harness.plugins.aliases import aliases_of
from harness.plugins.option_help import Option, describe_entry, show, takes_any
from harness.types import EngineCapabilities, capabilities_of

PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"
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
        f"with what to use instead (docs/trl_options.md): {renames}, ..."
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


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(options: list[Option], presets: dict[str, dict[str, Any]]) -> str:
    rows = ["| option | type | default (a default run's) | help |", "|---|---|---|---|"]
    for o in options:
        bounds = f" ({o.bounds})" if o.bounds else ""
        value, said = run_default(o, presets)
        said = f" ({_cell(said)})" if said else ""
        rows.append(
            f"| `{o.name}` | `{_cell(o.type or '?')}` | `{_cell(show(value))}`{said}{bounds} | {_cell(o.help)} |"
        )
    return "\n".join(rows)


def render(plugins: Any = None) -> str:
    """docs/options.md: every built-in plugin's options, kind by kind."""
    if plugins is None:
        from harness.plugins.manager import get_plugin_manager

        plugins = get_plugin_manager(autoload=False)
    intro = (
        "Every option of every built-in plugin: its type, default and help, as `harness options KIND NAME` "
        "prints them. Set one with `--set KIND.KEY=VALUE` or in an experiment file's `[set.KIND]` table; text "
        "is converted to the option's type (harness/plugins/options.py `coerce`). Presets set some of them "
        f"first (`--preset`; a run without one gets `{default_preset()}`, whose value the default column shows, "
        "with the option's own default beside it); the run's flags (`--seed`, `--steps`, `--k`) too, and a "
        "task's generation budget replaces the preset's `max_new_tokens`. Help is the comment written "
        "beside each option ([write a plugin](guide/write-a-plugin.md#options-and-their-help))."
    )
    parts = [
        "# Plugin options",
        "",
        "<!-- generated by `python -m harness.plugins.options_reference` from the code: do not edit -->",
        "",
        *textwrap.wrap(intro, 116, break_on_hyphens=False),
        "",
    ]
    for kind in KINDS:
        entries = [e for e in plugins[kind] if e.plugin.startswith("builtin:")]
        parts += [f"## {kind.capitalize()}s", ""]
        for entry in entries:
            options = describe_entry(kind, entry)
            parts += [f"### {kind} `{entry.name}`", "", entry.description, ""]
            parts += [_table(options, entry.presets) if options else "No options.", ""]
            listed = notes(kind, entry) + aliases_note(entry)
            parts += [f"- {line}" for line in listed]
            if listed:
                parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    page = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is out of date: python -m harness.plugins.options_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
