"""Experiment files: a grid written down, read into settings ``run_settings.configs_for`` turns into runs.

A TOML (or YAML) file whose keys are the settings `harness run` has flags for (RunConfig's fields with a flag; task,
trainer, searcher and seed may be lists), ``[set.KIND]`` tables of plugin options, ``[size.NAME]`` tables (the same
experiment at two scales) and ``[[arm]]`` tables (named methods of a comparison). Everything is checked here, and a
mistake refused in one line naming the file, before any plugin or model is built.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

from harness.runner.bounded_yaml import AliasBomb, load_bounded_yaml
from harness.runner.config import RunConfig, field_names, positive_int


def load_experiment(path: Path | str, size: str | None = None) -> dict[str, Any]:
    """A grid written down: a TOML (or YAML, with PyYAML installed) file whose keys are RunConfig fields (task,
    trainer, searcher and seed may be lists) plus ``[set.task]``, ``[set.trainer]``, ``[set.searcher]`` tables of
    plugin options. Optionally:

    - ``[size.NAME]`` tables (e.g. cpu and gpu) of the same keys, overriding the shared ones for that size: ``size``
      picks one, "cpu" by default when the file has sizes;
    - ``[[arm]]`` tables, each a method of the comparison: ``name``, ``trainer``, optionally ``searcher`` and
      ``steps``, its own ``[arm.set.KIND]`` options over the shared ones and ``[arm.size.NAME]`` overrides (steps,
      set). Returned as ``arms``: [{"name", "trainer", "searcher", "steps", "options"}], the size applied.

    Unknown keys and wrong types are refused in one line naming the file."""
    path = Path(path)
    data = _read(path)
    sizes = data.pop("size", None)
    arms = data.pop("arm", None)
    settings = _settings(data, f"{path}", top=True)
    if sizes is None:
        if size is not None:
            raise ValueError(f"{path}: has no [size.*] tables; drop --size {size}")
    else:
        if not isinstance(sizes, dict) or not sizes or not all(isinstance(v, dict) for v in sizes.values()):
            raise ValueError(
                f"{path}: 'size' must hold tables of settings, e.g. [size.cpu] and [size.gpu], got {_shown(sizes)}"
            )
        size = size or DEFAULT_SIZE
        if size not in sizes:
            raise ValueError(f"{path}: no size {size!r}; sizes: {', '.join(map(str, sizes))}")
        settings = _merge(settings, _settings(dict(sizes[size]), f"{path} [size.{size}]"))
        settings["size"] = size
    if arms is not None:
        if "trainer" in settings:
            raise ValueError(f"{path}: with [[arm]] tables each arm names its trainer; remove the shared 'trainer'")
        if not isinstance(arms, list) or not arms:
            raise ValueError(
                f"{path}: 'arm' must be [[arm]] tables, each with a name and a trainer, got {_shown(arms)}"
            )
        settings["arms"] = [_arm(arm, i, path, size, sizes or {}) for i, arm in enumerate(arms, 1)]
        names = [arm["name"] for arm in settings["arms"]]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{path}: arm name(s) {', '.join(twice)} used twice; each arm needs its own name")
    return settings


DEFAULT_SIZE = "cpu"  # what `harness run --config FILE` runs when the file has sizes and --size is not given
OPTION_KINDS = ("task", "trainer", "searcher")
ARM_KEYS = ("name", "trainer", "searcher", "steps", "set", "size")
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # it becomes part of a folder name


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"experiment file {path} does not exist")
    try:
        text = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            data = load_bounded_yaml(text, str(path)) or {}
        else:
            import tomllib

            data = tomllib.loads(text)
    except ImportError as exc:
        raise ValueError(f"{path}: cannot read this format ({exc})") from None
    except AliasBomb:  # its line names the file already
        raise
    except Exception as exc:  # tomllib.TOMLDecodeError / yaml.YAMLError: the parser says where
        raise ValueError(f"{path}: not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of settings at the top level")
    return data


def _settings(data: dict[str, Any], where: str, top: bool = False) -> dict[str, Any]:
    """Run-level settings and ``set`` tables (the top level of a file, or one of its sizes), checked."""
    known = set(field_names(RunConfig, cli=True))  # a file sets what a flag does (options: its set tables)
    unknown = sorted(str(key) for key in set(data) - known - {"set"})
    if unknown:
        tables = ", set, arm, size" if top else ", set"  # arms and sizes are tables of the top level only
        raise ValueError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}{tables}")
    options = _options(data.pop("set", {}), where)
    return {**{key: _shaped(key, value, f"{where}: {key}") for key, value in data.items()}, "options": options}


AXES = ("task", "trainer", "searcher")  # a name or a list of names (a grid's axes; seed is the fourth)
SETTING_TYPES = typing.get_type_hints(RunConfig)


def _shaped(key: str, value: Any, what: str) -> Any:
    """A setting's value checked against the type of its RunConfig field, so that a value of the wrong shape (``task:
    7``, ``seed: [[1]]``, ``steps: many``, a list where a string belongs) is one line naming the key, never a
    traceback from deep in the run."""
    hint = SETTING_TYPES[key]
    optional = type(None) in typing.get_args(hint)
    if value is None:
        if optional:
            return None
        raise ValueError(f"{what} has no value; give one or leave the key out")
    if key in AXES:
        items = value if isinstance(value, list) else [value]
        wrong = [v for v in items if not (isinstance(v, str) and v.strip())]
        if isinstance(value, list) and wrong:
            raise ValueError(f"{what}: a list of names holds {_shown(wrong[0])}; each should be a name")
        if not items or wrong:
            raise ValueError(f"{what} should be a name or a list of names, got {_shown(value)}")
        return value
    if key == "seed":  # 0, "0,1,2" or [0, 1, 2]; the range is checked with the flag's (run_settings)
        items = value if isinstance(value, list) else value.split(",") if isinstance(value, str) else [value]
        try:
            if not items:
                raise ValueError(value)
            for item in items:
                as_int(item.strip() if isinstance(item, str) else item, what)
        except ValueError:
            raise ValueError(f"{what} should be an integer or a list of integers, got {_shown(value)}") from None
        return value
    if key == "k":  # k = [1, 4, 16] -> "1,4,16", as on the command line; "1,4,16" or 16 as they are
        if isinstance(value, list):
            return ",".join(str(as_int(k, what)) for k in value)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"{what} should be a list of integers or a string like 1,4,16, got {_shown(value)}")
        return value
    if key == "batch_size":
        return positive_int(value, what)
    if key == "checkpoint_every":  # steps or "10m"; RunConfig reads which
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{what} should be steps (an integer) or minutes like 10m, got {_shown(value)}")
        return value
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
    if base is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{what} should be true or false, got {_shown(value)}")
        return value
    if base is int:
        return as_int(value, what)
    if base is str:  # a number is its text (model_revision = 1234)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise ValueError(f"{what} should be a string, got {_shown(value)}")
        return value
    if typing.get_origin(base) is list:  # rewards = ["myrewards:brevity=0.5"], plugins = ["./my_plugin.py"]
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"{what} should be a list of strings, got {_shown(value)}")
        return value
    raise TypeError(f"{what}: RunConfig's type {hint} has no check here")  # a new field's type: add its check


def _options(options: Any, where: str) -> dict[str, dict[str, Any]]:
    """``set`` tables -> {"task": {...}, "trainer": {...}, "searcher": {...}}; each value is typed by the plugin's
    converter when the plugin is built (harness/plugins/options.py), which names the option."""
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise ValueError(f"{where}: 'set' must hold tables named task, trainer or searcher, got {_shown(options)}")
    for kind, table in options.items():
        if kind not in OPTION_KINDS:
            raise ValueError(f"{where}: 'set' must hold tables named task, trainer or searcher, not {kind!r}")
        if not isinstance(table, dict):
            raise ValueError(f"{where}: set.{kind} should be a table of options (KEY = VALUE), got {_shown(table)}")
        strange = [key for key in table if not isinstance(key, str)]
        if strange:
            raise ValueError(f"{where}: set.{kind}: an option's name should be a string, got {strange[0]!r}")
    return {kind: dict(options.get(kind, {})) for kind in OPTION_KINDS}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over``'s settings replace ``base``'s; their option tables merge key by key."""
    options = {kind: {**base["options"].get(kind, {}), **over["options"].get(kind, {})} for kind in OPTION_KINDS}
    return {**base, **over, "options": options}


def _arm(arm: Any, number: int, path: Path, size: str | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """One [[arm]] table, checked, with the chosen size's overrides applied."""
    name = arm.get("name") if isinstance(arm, dict) else None
    where = f"{path}: arm {number}" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(arm, dict):
        raise ValueError(f"{where}: expected a table with a name and a trainer")
    unknown = sorted(str(key) for key in set(arm) - set(ARM_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; an arm takes {', '.join(ARM_KEYS)}")
    if not isinstance(name, str) or not ARM_NAME.fullmatch(name):
        raise ValueError(
            f"{where}: 'name' must be letters, digits, '_', '.' or '-' (it names the run folders), got {name!r}"
        )
    if not isinstance(arm.get("trainer"), str) or not arm["trainer"].strip():
        raise ValueError(f"{where}: 'trainer' must name a trainer (or 'none'), got {_shown(arm.get('trainer'))}")
    searcher = arm.get("searcher")
    if searcher is not None and not (isinstance(searcher, str) and searcher.strip()):
        raise ValueError(f"{where}: 'searcher' must name a searcher, got {_shown(searcher)}")
    out = {
        "name": name,
        "trainer": arm["trainer"].strip(),
        "searcher": searcher and searcher.strip(),
        "steps": None if arm.get("steps") is None else as_int(arm["steps"], f"{where}: steps"),
        "options": _options(arm.get("set"), where),
    }
    own_sizes = arm.get("size") or {}
    if not isinstance(own_sizes, dict) or not all(isinstance(v, dict) for v in own_sizes.values()):
        raise ValueError(f"{where}: 'size' must hold tables, e.g. [arm.size.gpu.set.trainer]")
    strange = sorted(str(key) for key in set(own_sizes) - set(sizes))
    if strange:
        raise ValueError(
            f"{where}: size(s) {', '.join(strange)} not among the file's sizes ({', '.join(map(str, sizes)) or 'none'})"
        )
    chosen = own_sizes.get(size) or {}
    unknown = sorted(str(key) for key in set(chosen) - {"steps", "set"})
    if unknown:
        raise ValueError(
            f"{where} [size.{size}]: unknown key(s) {', '.join(unknown)}; an arm's size takes steps and set"
        )
    if chosen.get("steps") is not None:
        out["steps"] = as_int(chosen["steps"], f"{where} [size.{size}]: steps")
    return _merge(out, {"options": _options(chosen.get("set"), f"{where} [size.{size}]")})


def as_int(value: Any, what: str) -> int:
    """An integer setting (an int, or its digits as a string; negative allowed), else one line naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().lstrip("-").isdigit():
        raise ValueError(f"{what} should be an integer, got {_shown(value)}")
    return int(value)


def _shown(value: Any) -> str:
    """A value as a message quotes it: its repr, cut short (a file's value may be a table of thousands)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
