"""How answers become scores, around the task's own scorer: ``batch`` (many answers at once, ``score_all``),
``task_guard`` (a task's failures named as the task's), ``reward_functions`` (``--reward``: functions as reward
components) and ``multi_answer`` (the M-answer format: several answers in one rollout)."""
