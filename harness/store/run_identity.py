"""What a run is, as its checkpoint and its phase snapshots record it: the trainer, the seed, the whole configuration
(but where the folder lies), the options each plugin resolved to, the threads of each phase, when the run started,
and the versions of the harness and of the packages its first half ran with. A resume compares the manifest with
the recorded identity before the model loads: a manifest edited since (another trainer, another seed, another
``lr``) would continue the run as something it was not, and one whose versions were rewritten would no longer say
what produced the first half.

Values are compared as JSON writes them, types included: a seed of ``-0.0`` or ``1.0`` is not the integer ``0`` or
``1`` (Python says ``-0.0 == 0``; the run would be seeded otherwise, or refuse later), and ``True`` is not ``1``. A
record without a part (a checkpoint written before that part was recorded) is compared on the parts it has."""

from __future__ import annotations

import json
from typing import Any

# Where the folder lies: a resume sets them to the folder it continues (``out`` its parent, ``name`` its name).
LOCATION = ("out", "name")
# Options the runner adds to a resumed run's resolution (a searcher that continues from its own checkpoints is
# given ``resume``: the folder): they say the run was resumed, not what it is; the configuration that asked for
# them is compared whole.
ADDED_ON_RESUME = {("searcher", "resume")}
_MISSING = object()


def run_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``manifest`` (as read back from manifest.json) that say which run it is and what it computes."""
    config = manifest.get("config") or {}
    threads, packages = manifest.get("threads"), manifest.get("packages") or {}
    return _copy(
        {
            "trainer": config.get("trainer"),
            "seed": config.get("seed"),
            "harness_version": manifest.get("harness_version"),
            "packages": dict(packages) if isinstance(packages, dict) else packages,
            "started": manifest.get("started"),
            "config": {k: v for k, v in config.items() if k not in LOCATION} if isinstance(config, dict) else config,
            "resolved_options": _resolved(manifest.get("resolved_options")),
            # the counts a resume keeps (harness/runner/threads.py), not why they were chosen (a resume says "kept")
            "threads": {k: v for k, v in threads.items() if k != "why"} if isinstance(threads, dict) else threads,
        }
    )


def identity_differences(recorded: dict[str, Any], manifest: dict[str, Any], moment: str) -> list[str]:
    """One phrase for each part of ``recorded`` (a ``run_identity`` taken at ``moment``: "the checkpoint", "the end
    of phase 'before'") that ``manifest`` no longer says, e.g. "trainer option lr is 0.001 in the manifest but the
    checkpoint was written with 5e-05"; a package is named by itself ("torch ..."). A part ``recorded`` lacks is not
    compared."""
    now = run_identity(manifest)
    found = [
        _phrase(key, now[key], recorded[key], moment)
        for key in ("trainer", "seed", "harness_version")
        if key in recorded and not same(recorded[key], now[key])
    ]
    was, packages = recorded.get("packages") or {}, now["packages"]
    if "packages" in recorded and not (isinstance(was, dict) and isinstance(packages, dict)):
        found += [] if same(was, packages) else [_phrase("packages", packages, was, moment)]
    elif "packages" in recorded:
        found += [
            _phrase(name, packages.get(name, _MISSING), was.get(name, _MISSING), moment)
            for name in sorted(set(was) | set(packages))
            if not same(was.get(name), packages.get(name))
        ]
    if "config" in recorded:
        config, was = now["config"], recorded["config"]
        if isinstance(config, dict) and isinstance(was, dict):
            for key in _keys(config, was):
                if key in ("trainer", "seed"):  # named above
                    continue
                if key == "options":
                    found += _options(config.get(key, _MISSING), was.get(key, _MISSING), moment)
                elif not same(config.get(key, _MISSING), was.get(key, _MISSING)):
                    found.append(_phrase(f"config {key}", config.get(key, _MISSING), was.get(key, _MISSING), moment))
        elif not same(config, was):
            found.append(_phrase("config", config, was, moment))
    if "resolved_options" in recorded:
        found += _options(now["resolved_options"], recorded["resolved_options"], moment)
    for key in ("threads", "started"):
        if key in recorded:
            found += _by_key(key, now[key], recorded[key], moment, each=key)
    return list(dict.fromkeys(found))  # an option given and resolved alike is named once


def same(a: Any, b: Any) -> bool:
    """Equal as JSON says them: types included (-0.0 is not 0, 1.0 not 1, True not 1), keys in any order."""
    return _json(a) == _json(b)


def _options(now: Any, was: Any, moment: str) -> list[str]:
    """{"trainer": {"lr": ...}, ...} against the recorded: "trainer option lr is ... in the manifest but ..."."""
    if not (isinstance(now, dict) and isinstance(was, dict)):
        return [] if same(now, was) else [_phrase("options", now, was, moment)]
    found = []
    for kind in _keys(now, was):
        found += _by_key(f"{kind} options", now.get(kind, _MISSING), was.get(kind, _MISSING), moment, f"{kind} option")
    return found


def _by_key(label: str, now: Any, was: Any, moment: str, each: str) -> list[str]:
    """``now`` against ``was``: nothing when they are the same; when both are objects, a phrase "EACH KEY ..." for
    each key that differs; else one phrase for the whole, named ``label``."""
    if same(now, was):
        return []
    if not (isinstance(now, dict) and isinstance(was, dict)):
        return [_phrase(label, now, was, moment)]
    return [
        _phrase(f"{each} {key}", now.get(key, _MISSING), was.get(key, _MISSING), moment)
        for key in _keys(now, was)
        if not same(now.get(key, _MISSING), was.get(key, _MISSING))
    ]


def _keys(*dicts: dict) -> list:
    return sorted(set().union(*dicts), key=str)


def _phrase(label: str, now: Any, was: Any, moment: str) -> str:
    if moment == "the checkpoint":
        then = "the checkpoint was written " + (f"with {_show(was)}" if was is not _MISSING else "without it")
    else:
        then = f"it was {_show(was)} at {moment}" if was is not _MISSING else f"it was not set at {moment}"
    where = "missing from the manifest" if now is _MISSING else f"{_show(now)} in the manifest"
    return f"{label} is {where} but {then}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _resolved(options: Any) -> Any:
    if not isinstance(options, dict):
        return options
    return {
        kind: {k: v for k, v in vals.items() if (kind, k) not in ADDED_ON_RESUME} if isinstance(vals, dict) else vals
        for kind, vals in options.items()
    }


def _json(value: Any) -> str:
    return "<missing>" if value is _MISSING else json.dumps(value, sort_keys=True, default=str)


def _copy(value: Any) -> Any:
    """As manifest.json holds it (a value written with ``default=str`` reads back as its string)."""
    return json.loads(json.dumps(value, default=str))
