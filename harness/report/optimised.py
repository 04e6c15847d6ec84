"""What a run optimised, read from its manifest for the report: its reward (the task's components and weights, the
``--reward`` functions with theirs, a trainer's behaviour score) and the plugin and package behind every name, so a
run with an added reward never reads like one without.

Manifests are run data: any field may be missing (a run from before it was recorded) or of the wrong type, and
each is then left out, or shown as the text it is, rather than failing the report: a name that is a list is shown
as one, a weight beyond a float's range as its digits (cut), and at most reading.SHOWN_ITEMS components and
plugins are listed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from harness.store.reading import SHOWN_ITEMS, shown

MAIN_KINDS = ("task", "trainer", "searcher", "engine")


def what_was_optimised(manifest: dict[str, Any]) -> dict[str, Any]:
    """{"formula": "1 x correct + 0.5 x f", "terms": [{"name", "weight", "shown", "source"}], "plugins": [{"kind",
    "name", "plugin", "package"}]} of one run."""
    terms = reward_terms(manifest)[:SHOWN_ITEMS]
    for term in terms:  # 0.5, not 0.5000
        term["shown"] = f"{term['weight']:g}" if _real(term["weight"]) else shown(term["weight"], 200)
    formula = " + ".join(f"{t['shown']} x {t['name']}" for t in terms if _real(t["weight"]))
    return {"formula": formula, "terms": terms, "plugins": plugins_used(manifest)}


def reward_terms(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Each reward component with its weight and where it comes from: the task (its plugin's package), a --reward
    function (its spec and file), or the trainer's behaviour option."""
    task = _dict(manifest.get("task"))
    packages = _dict(manifest.get("plugin_packages"))
    functions = {_text(f.get("name")): f for f in _list(task.get("reward_functions")) if isinstance(f, dict)}
    task_name = _text(task.get("name") or _dict(_dict(manifest.get("plugins")).get("task")).get("name"))
    task_from = " ".join(str(x) for x in (f"task {task_name}", _brackets(packages.get(f"task:{task_name}"))) if x)
    terms = []
    for name, weight in _dict(task.get("reward_weights")).items():
        function = functions.get(name)
        source = (
            " ".join(x for x in (f"--reward {_text(function.get('spec'))}", _brackets(function.get("file"))) if x)
            if function
            else task_from
        )
        terms.append({"name": _text(name), "weight": weight, "source": source})
    trainer = _dict(_dict(manifest.get("resolved_options")).get("trainer"))
    if trainer.get("behaviour"):  # a behaviour score the trainer adds to the task's reward (trainer.behaviour)
        behaviour = _text(trainer["behaviour"])
        weight = trainer.get("behaviour_weight", "the trainer's default")
        terms.append(
            {
                "name": f"behaviour/{behaviour}",
                "weight": _number(weight),
                "source": " ".join(
                    x for x in ("trainer.behaviour", _brackets(packages.get(f"behaviour:{behaviour}"))) if x
                ),
            }
        )
    return terms


def plugins_used(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every plugin the run used (task, trainer, searcher, engine, loggers, then what they looked up: an advantage
    estimator, a behaviour, the model alias), with the plugin that registered the name and the package whose code
    it is (runs from before ``plugin_packages``: None)."""
    plugins, packages = _dict(manifest.get("plugins")), _dict(manifest.get("plugin_packages"))
    found = [{"kind": kind, **_dict(plugins.get(kind))} for kind in MAIN_KINDS if isinstance(plugins.get(kind), dict)]
    found += [{"kind": "logger", **entry} for entry in _list(plugins.get("loggers")) if isinstance(entry, dict)]
    found += [entry for entry in _list(plugins.get("others")) if isinstance(entry, dict)]
    return [
        {
            "kind": _text(e.get("kind")),
            "name": _text(e.get("name")),
            "plugin": _text(e.get("plugin", "")),
            "package": _text(packages.get(f"{_text(e.get('kind'))}:{_text(e.get('name'))}")) or None,
        }
        for e in found[:SHOWN_ITEMS]
    ]


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _number(value: Any) -> Any:
    """An option as given (``--set trainer.behaviour_weight=0.5`` is the string "0.5") as a number where it is one."""
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def _brackets(text: Any) -> str:
    return f"({_text(text)})" if text else ""


def _text(value: Any) -> str:
    """A name from the manifest as text: a string as it is, anything else (a list, an object, a number) as the
    text of it, cut to 1,000 characters; "" for None."""
    return "" if value is None else shown(value, 1000)


def _real(value: Any) -> bool:
    """A weight that formats as a number: a real within a float's range (an integer of 400 digits is not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value)) or isinstance(value, float)
    except OverflowError:
        return False
