"""Another library's option names, understood: a plugin declares ``option_aliases`` (a sequence of ``Alias``, beside
``config_class``), and ``resolve_aliases`` turns each such name a user gives into the plugin's own options, with the
value converted where the meaning differs, or refuses it in one line that names the equivalent here.

GRPO declares TRL's ``GRPOConfig`` names (trainers/trl_names.py): ``--set trainer.learning_rate=1e-5`` sets ``lr``,
``loss_type=dapo`` sets ``loss_norm=token``, ``per_device_train_batch_size`` says how the batch is set here. A known
alias therefore never reaches the "did you mean" of an unknown option, which would suggest a different knob by
spelling alone (``num_generations`` is ``group_size``, not ``num_iterations``).

Every path that builds a plugin resolves them (harness/plugins/options.py ``check_options`` and ``make_config``), and
the run's plan resolves the user's options before it layers them over the presets (harness/runner/plan.py), so an
alias beats a preset exactly as the option it stands for does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NOTHING = "nothing to set (what the harness does)"


@dataclass(frozen=True)
class Alias:
    """One name of another library's (``library``) and what it is here.

    - ``target`` alone: a rename, the value passes as given (``learning_rate`` -> ``lr``); ``weak``: further options
      set to the same value unless the user sets them (TRL's ``epsilon`` is the upper clip too when ``epsilon_high``
      is unset).
    - ``values``: the value read as ``kind`` (``str``: lower-case text, ``bool``, ``float``; None for "none") ->
      the options it sets here, or a one-line refusal; any other value is refused naming those accepted.
    - ``refused``: the name has no equivalent option; the line says what the harness does instead. Values in
      ``accepts`` mean what the harness does anyway and are taken with nothing set (``repetition_penalty=1.0``).
    """

    name: str
    target: str = ""
    values: Mapping[Any, Mapping[str, Any] | str] = field(default_factory=dict)
    refused: str = ""
    accepts: tuple[Any, ...] = ()
    weak: tuple[str, ...] = ()
    kind: type = str
    default: str = ""  # the other library's default, as its documentation writes it (for the generated table)
    library: str = "TRL"

    def read(self, value: Any) -> Any:
        """``value`` as the key of ``values`` / ``accepts``; ValueError when it is not of ``kind``."""
        from harness.plugins.options import FALSE, TRUE

        text = str(value).strip().lower()
        if value is None or (isinstance(value, str) and text in ("none", "null", "") and text not in self.values):
            return None
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if text in (*TRUE, *FALSE):
                return text in TRUE
            raise ValueError(value)
        if self.kind is float:
            number = float(value) if not isinstance(value, bool) else math.nan
            if math.isnan(number):
                raise ValueError(value)
            return number
        return text

    def apply(self, value: Any, who: str) -> dict[str, Any]:
        """The options ``value`` of this name sets here ({}: nothing to set); a one-line ValueError when refused."""
        if self.target and not self.values:
            return {self.target: value, **dict.fromkeys(self.weak, value)}
        try:
            key = self.read(value)
        except (TypeError, ValueError):
            if self.refused:  # whatever the value, the name has no equivalent: say what to use
                raise ValueError(f"{who}: {self.name}={value}: {self.refused}") from None
            raise ValueError(f"{who}: {self.name}={value!r}: expected a {self.kind.__name__}") from None
        if key in self.accepts:
            return {}
        if self.refused:
            raise ValueError(f"{who}: {self.name}{'' if not self.accepts else f'={value}'}: {self.refused}")
        chosen = self.values.get(key)
        if isinstance(chosen, str):
            raise ValueError(f"{who}: {self.name}={value}: {chosen}")
        if chosen is None:
            known = ", ".join(
                f"{_show(k)} ({_options_text(v)})" for k, v in self.values.items() if not isinstance(v, str)
            )
            raise ValueError(
                f"{who}: {self.name}={value!r} has no equivalent here; {self.library}'s values taken: {known}"
            )
        return dict(chosen)

    def summary(self) -> str:
        """What the name is here, in one line (the generated table's cell)."""
        if self.target and not self.values:
            also = f" (and {', '.join(f'`{w}`' for w in self.weak)} unless set)" if self.weak else ""
            return f"`{self.target}`{also}"
        parts = [f"`{_show(k)}` -> `{_options_text(v)}`" for k, v in self.values.items() if isinstance(v, dict) and v]
        same = [*(k for k, v in self.values.items() if isinstance(v, Mapping) and not v), *self.accepts]
        if same:
            parts.append(", ".join(f"`{_show(k)}`" for k in same) + f": {NOTHING}")
        parts += [f"`{_show(k)}`: refused, {v}" for k, v in self.values.items() if isinstance(v, str)]
        if self.refused:
            parts.append(("any other value: refused, " if same else "refused: ") + self.refused)
        return "; ".join(parts)

    @property
    def sets_option(self) -> bool:
        """Whether some value of this name sets an option here (else it is refused, but for values that mean what
        the harness does anyway)."""
        return bool(self.target) or any(isinstance(v, Mapping) and v for v in self.values.values())


def _show(value: Any) -> str:
    if value == "":
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _options_text(options: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_show(v)}" for k, v in options.items()) or NOTHING


def aliases_of(factory: Any) -> dict[str, Alias]:
    """The aliases ``factory`` declares (``option_aliases``), by name; a sequence of ``Alias`` is taken as it is."""
    declared = factory if _is_aliases(factory) else getattr(factory, "option_aliases", None) or ()
    return {a.name: a for a in declared}


def _is_aliases(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(a, Alias) for a in value)


def resolve_aliases(
    aliases: Mapping[str, Alias] | Sequence[Alias], options: Mapping[str, Any], who: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """(``options`` with every alias replaced by the options it stands for, {alias: what it became}). An alias and
    the option it sets given together, or two aliases setting one option to different values, are refused in one
    line; so is a refused name, with its equivalent here. Options that are not aliases pass unchanged."""
    if not isinstance(aliases, Mapping):
        aliases = {a.name: a for a in aliases}
    given = [key for key in options if key in aliases]
    if not given:
        return dict(options), {}
    own = {k: v for k, v in options.items() if k not in aliases}
    strong: dict[str, tuple[str, Any]] = {}  # option -> (the alias that set it, value)
    weak: dict[str, Any] = {}
    translated = {}
    for name in sorted(given, key=list(aliases).index):  # the table's order
        alias = aliases[name]
        result = alias.apply(options[name], who)
        for key, value in result.items():
            if key in alias.weak:
                weak.setdefault(key, value)
                continue
            if key in own:
                raise ValueError(f"{who}: {name} ({alias.library}'s name) and {key} set the same option; give one")
            if key in strong and strong[key][1] != value:
                raise ValueError(f"{who}: {strong[key][0]} and {name} both set {key}; give one")
            strong[key] = (name, value)
        translated[name] = result
    weak = {k: v for k, v in weak.items() if k not in strong and k not in own}
    resolved = {**own, **weak, **{k: v for k, (_, v) in strong.items()}}
    said = {
        name: _options_text({k: v for k, v in result.items() if k not in aliases[name].weak or k in weak})
        for name, result in translated.items()
    }
    return resolved, said


def translated_line(kind: str, name: str, translated: Mapping[str, str], library: str = "TRL") -> str:
    """The line a run prints: "trainer 'grpo': TRL's names translated: learning_rate -> lr=1e-05, ..."."""
    parts = ", ".join(f"{k} -> {v}" if v != NOTHING else f"{k} ({v})" for k, v in translated.items())
    return f"{kind} {name!r}: {library}'s names translated: {parts}"
