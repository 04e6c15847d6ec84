"""The "prompts" task: your prompts and your reward functions, nothing else (TRL's GRPO setup: a dataset with a
``prompt`` column and ``reward_funcs``; no reference answer, no instruction, no built-in components).

Data (option ``data``): a local file (.jsonl, .json, .csv, .parquet), a ``save_to_disk`` folder or a folder of
such files, a Hugging Face hub id (``config``, ``revision``), all read through ``datasets`` (tasks/hub_data.py); or,
through the Python API (harness/api.py), an in-memory ``datasets.Dataset`` registered in the process as ``@data-...``
(harness/in_process.py). The ``prompt`` column (option ``prompt``) holds a string (TRL's standard format, sent as
written as one user turn) or a conversation, a list of {"role", "content"} messages ending with the user's turn
(sent as written, system turns included). Every other column of a row (all but the prompt and ``completion``) goes to
a batch reward function by name, as TRL's do (``Problem.columns``); a ``completion`` column is SFT's target.

Splits, as the other tasks: a dataset with a ``test`` (else ``validation``) split beside ``train`` keeps them; one
pool is cut by a hash of each prompt (``eval_fraction``), so the same prompt always falls in the same split; or
``eval_data`` gives the eval prompts and every row of ``data`` trains.

Reward: the run's reward functions (``--reward``, ``rewards = [...]``, or the API's callables), each a component
named after it with its weight; the task has no component of its own but ``success`` (weight 0), 1.0 where the
``success`` rule holds, the primary: pass@k and success_rate count it. The rule is ``reward>=X`` (the weighted sum
of the functions, NaNs left out as TRL's nansum), ``NAME>=X`` on one function (``>``, ``<=``, ``<``, ``==`` too),
or a bare ``NAME``: that function returned True (a value >= 1). A function's None is NaN, "not applicable": left
out of its mean and the sum, and a rule on it does not hold.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness import in_process
from harness.failures import blame
from harness.scoring.reward_functions import RewardFunction, load_rewards
from harness.tasks.chat_data import COMPLETION, other_columns, read_completion, read_prompt
from harness.tasks.hub_data import id_prefix, load_splits, local_path, local_version
from harness.tasks.provenance import resolved_revision
from harness.tasks.splits import bucket, digest, take
from harness.types import Messages, Problem, Score, Split, TaskCapabilities, scalarize

SUCCESS = "success"  # the component the rule sets, and the primary
TOTAL = "reward"  # the rule's name for the weighted sum of the functions
OPERATORS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, ">": operator.gt, "<": operator.lt}
EVAL_SPLITS = ("test", "validation")  # a dataset's own eval split, beside its train split


class PromptsTask:
    """Prompts scored by reward functions alone. Options are keyword arguments; ``data`` and a reward are needed."""

    name = "prompts"
    version = "prompts-v1"  # bump on any change of how rows become prompts, of the split or of scoring
    capabilities = TaskCapabilities(takes_reward_functions=True, batch_scoring=True)

    def __init__(
        self,
        *,
        data: str = "",  # a data file, a save_to_disk folder, a hub dataset id, or @data-... (the Python API)
        rewards: list[str] | str | None = None,  # reward functions MODULE:FN[=WEIGHT] (or --reward); one at least
        success: str = "reward>=1",  # what counts as solved: reward>=X (weighted sum), NAME>=X, or NAME (True)
        prompt: str = "prompt",  # the column holding the prompt: a string, or a list of chat messages
        config: str | None = None,  # the hub dataset's config
        revision: str | None = None,  # the hub dataset's revision (a commit, tag or branch)
        eval_data: str = "",  # eval prompts from another dataset (same kinds as data); then all of data trains
        eval_fraction: float = 0.2,  # a single pool's share of eval prompts, by a hash of each prompt
    ) -> None:
        if not isinstance(data, str) or not data.strip():
            raise ValueError(
                "prompts: needs data=FILE, a hub dataset id or a save_to_disk folder (--set task.data=...), "
                "or a datasets.Dataset through the Python API (harness.train / harness.evaluate)"
            )
        specs = [rewards] if isinstance(rewards, str) else list(rewards or [])
        specs = [part.strip() for spec in specs for part in str(spec).split(",") if part.strip()]
        if not specs:
            raise ValueError(
                "prompts: needs a reward function: --reward MODULE:FN[=WEIGHT] (or --set task.rewards=...), "
                "or reward_funcs=[...] through the Python API"
            )
        self.reward_functions: list[RewardFunction] = load_rewards(specs)
        taken = [r.name for r in self.reward_functions if r.name in (SUCCESS, TOTAL)]
        if taken:
            raise ValueError(
                f"prompts: a reward function named {taken[0]!r}: the name is the task's own ({SUCCESS}: "
                f"the success rule's component; {TOTAL}: the weighted sum in a rule); rename the function"
            )
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompts: option prompt names the column holding the prompt; got {prompt!r}")
        self.data, self.eval_data = data.strip(), (eval_data or "").strip()
        self.prompt_column = prompt.strip()
        self.config, self.revision = config, revision
        self.eval_fraction = float(eval_fraction)
        if not 0.0 < self.eval_fraction < 1.0:
            raise ValueError(f"prompts: eval_fraction must be in (0, 1), got {eval_fraction!r}")
        self.rule = success
        self._test = parse_success(success, [r.name for r in self.reward_functions])
        self.reward_weights = {r.name: r.weight for r in self.reward_functions} | {SUCCESS: 0.0}
        self._splits: dict[str, list[Problem]] | None = None
        self._notes: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------------------------
    # Task protocol
    # ------------------------------------------------------------------------------------------------------------

    def problems(self, split: Split, limit: int | None = None, seed: int = 0) -> list[Problem]:
        if split not in ("train", "eval"):
            raise ValueError(f"prompts: split must be 'train' or 'eval', got {split!r}")
        return take(self._load()[split], limit, seed)

    def messages(self, problem: Problem) -> Messages:
        """The prompt as written: the data's conversation, or its string as one user turn (no instruction added)."""
        if problem.messages is not None:
            return [dict(m) for m in problem.messages]
        return [{"role": "user", "content": problem.prompt}]

    def score(self, problem: Problem, completion: str) -> Score:
        return self.score_many([problem], [completion])[0]

    def score_many(self, problems: Sequence[Problem], completions: Sequence[str]) -> list[Score]:
        """Each reward function once on the batch (TRL's way), then the success rule on each answer's values."""
        ids = ", ".join(dict.fromkeys(repr(p.id) for p in problems))
        doing = f"scoring problem {ids}" if len(problems) == 1 else f"scoring {len(problems)} answers ({ids:.200})"
        values: dict[str, list[float]] = {}
        for reward in self.reward_functions:
            with blame("reward", reward.name, reward.spec, doing):
                values[reward.name] = reward.values(problems, completions)
        out = []
        for i in range(len(problems)):
            rewards = {name: column[i] for name, column in values.items()}
            total = scalarize(rewards, {r.name: r.weight for r in self.reward_functions})
            rewards[SUCCESS] = 1.0 if self._test(rewards, total) else 0.0
            out.append(Score(rewards, SUCCESS))
        return out

    def data_source(self) -> dict[str, Any]:
        self._load()
        return {
            **self._describe(self.data),
            **({"eval_data": self._describe(self.eval_data)} if self.eval_data else {}),
            "prompt_column": self.prompt_column,
            "success": self.rule,
            **{k: v for k, v in self._notes.items() if k != "name"},
        }

    def data_card(self) -> dict[str, Any]:
        """The data in three fields for the report: its name, the split the eval prompts come from, its rows."""
        splits = self._load()
        return {
            "name": self._notes.get("name") or self.data,
            "split": self._notes.get("eval_split", "eval"),
            "size": len(splits["eval"]),
        }

    # ------------------------------------------------------------------------------------------------------------
    # Loading
    # ------------------------------------------------------------------------------------------------------------

    def _load(self) -> dict[str, list[Problem]]:
        if self._splits is not None:
            return self._splits
        by_split = self._read(self.data)
        if self.eval_data:
            evals = self._read(self.eval_data)
            train = [p for name in sorted(by_split) for p in by_split[name]]
            eval_ = [p for name in sorted(evals) for p in evals[name]]
            seen = {_key(p) for p in eval_}
            splits = {"train": [p for p in train if _key(p) not in seen], "eval": eval_}
            self._notes |= {"split_method": "eval_data", "eval_split": "eval_data"}
        elif "train" in by_split and (own := next((s for s in EVAL_SPLITS if s in by_split), None)):
            seen = {_key(p) for p in by_split[own]}
            splits = {"train": [p for p in by_split["train"] if _key(p) not in seen], "eval": by_split[own]}
            self._notes |= {"split_method": f"the dataset's train and {own} splits", "eval_split": own}
        else:
            pool = [p for name in sorted(by_split) for p in by_split[name]]
            splits = {
                "train": [p for p in pool if bucket(_key(p)) >= self.eval_fraction],
                "eval": [p for p in pool if bucket(_key(p)) < self.eval_fraction],
            }
            named = "+".join(sorted(by_split))
            self._notes |= {
                "split_method": f"content hash, eval_fraction={self.eval_fraction}",
                "eval_split": f"{named}, hashed {self.eval_fraction:.0%}",
            }
            if pool and not splits["eval"]:
                raise ValueError(
                    f"prompts: none of the {len(pool)} prompts of {self.data} fell in the eval split (a hash of "
                    f"each prompt sends eval_fraction={self.eval_fraction} of them there); raise eval_fraction "
                    "or give eval_data"
                )
        self._notes |= {"train_rows": len(splits["train"]), "eval_rows": len(splits["eval"])}
        self._splits = splits
        return splits

    def _read(self, source: str) -> dict[str, list[Problem]]:
        """{split name: problems} of one source; a row or column mistake is one line naming the source."""
        if in_process.is_in_process(source):
            loaded = in_process.dataset(source)
            tables = dict(loaded) if isinstance(loaded, Mapping) else {"all": loaded}
            prefix = "data"
            self._notes.setdefault("name", _dataset_label(loaded, source))
        else:
            tables = load_splits(source, self.config, self.revision)
            prefix = id_prefix(source)
            self._notes.setdefault("name", source)
            if local_path(source) is None:
                revision = next((r for t in tables.values() if (r := resolved_revision(t))), None)
                if revision:
                    self._notes.setdefault("resolved_revision", revision)
        return {
            split: self._problems(rows, f"{source} split {split}", prefix) for split, rows in sorted(tables.items())
        }

    def _problems(self, rows: Iterable[Any], where: str, prefix: str) -> list[Problem]:
        columns = getattr(rows, "column_names", None)
        if columns is not None and self.prompt_column not in columns:
            raise ValueError(_no_column(where, self.prompt_column, columns))
        problems: list[Problem] = []
        seen: set[str] = set()
        for i, row in enumerate(rows):
            at = f"{where} row {i}"
            if not isinstance(row, Mapping):
                raise ValueError(f"{at}: expected an object with a {self.prompt_column!r} column, got {type(row)}")
            if self.prompt_column not in row:
                raise ValueError(_no_column(where, self.prompt_column, list(row)))
            value = row[self.prompt_column]
            if isinstance(value, str) and value.strip():
                text, conversation = value, None  # as written: TRL sends a standard prompt unchanged
            else:
                text, conversation = read_prompt(value, at, self.prompt_column)
            key = text if conversation is None else json.dumps(conversation, sort_keys=True)
            if key in seen:
                continue  # the same prompt twice
            seen.add(key)
            given = row.get("id")
            pid = str(given) if given not in (None, "") else f"{prefix}-{digest(key)[:12]}"
            problems.append(
                Problem(
                    id=pid,
                    prompt=text,
                    messages=conversation,
                    completion=read_completion(row.get(COMPLETION), at),
                    columns=other_columns(row, self.prompt_column),
                )
            )
        return problems

    def _describe(self, source: str) -> dict[str, Any]:
        if in_process.is_in_process(source):
            loaded = in_process.dataset(source)
            return {"source": "in-memory", "dataset": _dataset_label(loaded, source), "version": source[1:]}
        if (local := local_path(source)) is not None:
            return {"source": "local", "dataset": source, "version": local_version(local)}
        resolved = self._notes.get("resolved_revision")
        return {
            "source": "hub",
            "dataset": source,
            "config": self.config,
            "version": self.revision or resolved or "unpinned",
        }


# ----------------------------------------------------------------------------------------------------------------
# The success rule
# ----------------------------------------------------------------------------------------------------------------

_RULE = re.compile(r"^\s*([^<>=!\s]+)\s*(?:(>=|<=|==|>|<)\s*(\S+))?\s*$")


def parse_success(rule: Any, names: Sequence[str]):
    """The rule as a test (rewards, weighted sum) -> bool; a rule that names no function, or does not read, is one
    line naming what it takes."""
    takes = (
        f"reward>=X (the weighted sum), NAME>=X or NAME (a function's True), NAME one of: {', '.join(names)}; "
        "operators >=, >, <=, <, =="
    )
    m = _RULE.match(rule) if isinstance(rule, str) else None
    if m is None:
        raise ValueError(f"prompts: success={rule!r} does not read; it takes {takes}")
    name, op, threshold = m.groups()
    if name != TOTAL and name not in names:
        raise ValueError(f"prompts: success={rule!r}: no reward function named {name!r}; it takes {takes}")
    try:
        bound = 1.0 if op is None else float(threshold)
    except ValueError:
        raise ValueError(f"prompts: success={rule!r}: {threshold!r} is not a number; it takes {takes}") from None
    compare = OPERATORS[op or ">="]

    def test(rewards: Mapping[str, float], total: float) -> bool:
        value = total if name == TOTAL else rewards[name]
        return bool(compare(value, bound))  # NaN (not applicable) compares false: the rule does not hold

    return test


def _key(problem: Problem) -> str:
    """What makes two prompts the same: the text, or the whole conversation."""
    return problem.prompt if problem.messages is None else json.dumps(problem.messages, sort_keys=True)


def _no_column(where: str, column: str, columns: Iterable[str]) -> str:
    return (
        f"{where}: no column {column!r} for the prompt (columns: {', '.join(map(str, columns)) or 'none'}); "
        "map it with --set task.prompt=COLUMN"
    )


def _dataset_label(loaded: Any, name: str) -> str:
    """An in-memory dataset's name: the one it carries (``info.dataset_name``, a hub dataset's), else its registry
    name."""
    first = next(iter(loaded.values()), None) if isinstance(loaded, Mapping) else loaded
    own = getattr(getattr(first, "info", None), "dataset_name", None)
    return str(own) if own else f"in-memory {name[1:]}"
