"""A teacher model as a judge: how strongly an answer shows a behaviour, on a 1..5 scale, read from probabilities.

RLAIF (trainers/rlaif.py) asks a teacher about every rollout. A small teacher (the default is the policy's own
initial weights) rarely writes a clean "4"; so instead of generating a rating and parsing it, the judge reads the
teacher's next-token distribution after the rating prompt, restricted to the tokens "1".."5", and takes the expected
rating (G-Eval's probability-weighted score). Every answer gets a value, the value is smooth in the teacher's belief
(GRPO's group-relative advantages need differences, not ties), and a call costs one forward pass, no sampling.
``Judge.calls`` and ``Judge.prompt_tokens`` count the cost: it is what RLAIF is compared on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.engine.tokens import encode_chat, left_pad

if TYPE_CHECKING:
    from harness.models import Policy
    from harness.types import Behaviour

JUDGE_TEMPLATE = """Rate an answer.

Question:
{question}

Answer:
{answer}

{criterion}
Rate from 1 (not at all) to 5 (completely). Reply with one digit."""

SCALE = ("1", "2", "3", "4", "5")


class Judge:
    """Rates (question, answer) pairs for one behaviour with a teacher Policy; scores in [0, 1] ((E[rating]-1)/4)."""

    def __init__(
        self, teacher: Policy, behaviour: Behaviour, *, batch_size: int = 8, max_answer_tokens: int = 384
    ) -> None:
        self.teacher, self.behaviour, self.batch_size = teacher, behaviour, batch_size
        self.max_answer_tokens = max_answer_tokens
        tok = teacher.tokenizer
        ids = [tok(d, add_special_tokens=False)["input_ids"] for d in SCALE]
        if any(len(i) != 1 for i in ids):
            raise ValueError(
                f"judge: the teacher's tokenizer splits the digits 1..5 ({ids}); it cannot be read as a rating"
            )
        self._digit_ids = [i[0] for i in ids]
        self.calls = 0  # answers rated
        self.prompt_tokens = 0  # tokens the teacher read

    def prompt(self, question: str, answer: str) -> list[int]:
        tok = self.teacher.tokenizer
        answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
        if len(answer_ids) > self.max_answer_tokens:  # bound the cost of a runaway answer; the cut is marked
            answer = tok.decode(answer_ids[: self.max_answer_tokens]) + " [...]"
        text = JUDGE_TEMPLATE.format(
            question=question.strip(), answer=answer.strip() or "(empty)", criterion=self.behaviour.judge_question
        )
        return encode_chat(self.teacher.tokenizer, [{"role": "user", "content": text}])  # the teacher's template

    def score(self, questions: Sequence[str], answers: Sequence[str]) -> list[float]:
        """One score in [0, 1] per (question, answer): the expected rating under the teacher, rescaled."""
        import torch

        if len(questions) != len(answers):
            raise ValueError(f"judge: {len(questions)} questions for {len(answers)} answers")
        model, pad = self.teacher.model, self.teacher.tokenizer.pad_token_id
        device = next(model.parameters()).device
        ratings = torch.arange(1, len(SCALE) + 1, dtype=torch.float32)
        scores: list[float] = []
        prompts = [self.prompt(q, a) for q, a in zip(questions, answers, strict=True)]
        with torch.no_grad():
            for start in range(0, len(prompts), self.batch_size):
                batch = prompts[start : start + self.batch_size]
                input_ids, mask = left_pad(batch, pad)  # every row's next token is predicted at the last position
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = model(
                    input_ids=input_ids.to(device),
                    attention_mask=mask.to(device),
                    position_ids=positions.to(device),
                    use_cache=False,
                    logits_to_keep=1,
                ).logits[:, -1]
                probs = torch.softmax(logits.float()[:, self._digit_ids], dim=-1).cpu()
                scores.extend(((probs @ ratings - 1) / (len(SCALE) - 1)).tolist())
                self.calls += len(batch)
                self.prompt_tokens += sum(len(p) for p in batch)
        return scores
