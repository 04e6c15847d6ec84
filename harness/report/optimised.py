"""What a run optimised, read from its manifest for the report: its reward (the task's components and weights, the
``--reward`` functions with theirs, a trainer's behaviour score) and the plugin and package behind every name, so a
run with an added reward never reads like one without.

Manifests are run data: any field may be missing (a run from before it was recorded) or of the wrong type, and
each is then left out rather than failing the report.
"""

from __future__ import annotations

import numbers
from typing import Any

MAIN_KINDS = ("task", "trainer", "searcher", "engine")


def what_was_optimised(manifest: dict[str, Any]) -> dict[str, Any]:
    """{"formula": "1 x correct + 0.5 x f", "terms": [{"name", "weight", "shown", "source"}], "plugins": [{"kind",
    "name", "plugin", "package"}]} of one run."""
    terms = reward_terms(manifest)
    for term in terms:  # 0.5, not 0.5000
        term["shown"] = f"{term['weight']:g}" if isinstance(term["weight"], numbers.Real) else str(term["weight"])
    formula = " + ".join(f"{t['shown']} x {t['name']}" for t in terms if isinstance(t["weight"], numbers.Real))
    return {"formula": formula, "terms": terms, "plugins": plugins_used(manifest)}


def reward_terms(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Each reward component with its weight and where it comes from: the task (its plugin's package), a --reward
    function (its spec and file), or the trainer's behaviour option."""
    task = _dict(manifest.get("task"))
    packages = _dict(manifest.get("plugin_packages"))
    functions = {f.get("name"): f for f in _list(task.get("reward_functions")) if isinstance(f, dict)}
    task_name = task.get("name") or _dict(_dict(manifest.get("plugins")).get("task")).get("name")
    task_from = " ".join(str(x) for x in (f"task {task_name}", _brackets(packages.get(f"task:{task_name}"))) if x)
    terms = []
    for name, weight in _dict(task.get("reward_weights")).items():
        function = functions.get(name)
        source = (
            " ".join(x for x in (f"--reward {function.get('spec')}", _brackets(function.get("file"))) if x)
            if function
            else task_from
        )
        terms.append({"name": str(name), "weight": weight, "source": source})
    trainer = _dict(_dict(manifest.get("resolved_options")).get("trainer"))
    if trainer.get("behaviour"):  # a behaviour score the trainer adds to the task's reward (trainer.behaviour)
        behaviour = trainer["behaviour"]
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
            "kind": str(e.get("kind")),
            "name": str(e.get("name")),
            "plugin": str(e.get("plugin", "")),
            "package": packages.get(f"{e.get('kind')}:{e.get('name')}"),
        }
        for e in found
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
    return f"({text})" if text else ""
