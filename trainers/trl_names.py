"""TRL's ``GRPOConfig`` names (TRL 1.16), as GRPO and the trainers built on it understand them: each one a TRL user
would pass is either an alias of an option here, with its value converted where the meaning differs, or refused in
one line naming what to set instead (harness/plugins/aliases.py). ``GRPOTrainer.option_aliases`` is this table;
docs/reference/trl-options.md's "Every TRL name" table is generated from it (``python docs/generate.py``;
tests/test_trl_names.py fails when it is stale).

Names that are the same here (``temperature``, ``top_p``, ``beta``, ``num_iterations``, ``importance_sampling_level``,
``sync_ref_model``, ``ref_model_sync_steps``, ``ref_model_mixup_alpha``, ``max_grad_norm``, ``weight_decay``,
``warmup_ratio``, ``gradient_checkpointing``, ``seed``) are options of their own and need no alias. TRL's
``warmup_steps`` is one too, but here it is the format warm-up's SFT steps: use ``warmup_ratio``.
"""

from __future__ import annotations

from harness.plugins.aliases import Alias

BATCH = (
    "the harness's optimizer step takes prompts_per_step x group_size rollouts: use --set trainer.prompts_per_step=N "
    "(and trainer.group_size=G); rows per forward/backward (memory): --set trainer.micro_batch=N"
)
NO_ENTROPY = "the harness's loss has no entropy term (the clipped surrogate, plus beta x the k3 KL)"

TRL_GRPO_ALIASES: tuple[Alias, ...] = (
    # --- the optimiser and its schedule
    Alias("learning_rate", "lr", default="1e-6"),
    Alias("lr_scheduler_type", "lr_scheduler", default='"linear"'),
    Alias(
        "max_steps",
        "steps",
        default="-1",
    ),
    Alias(
        "num_train_epochs",
        refused="training problems cycle for a number of optimizer steps: use --steps N (each step takes "
        "prompts_per_step problems)",
        default="3",
    ),
    Alias("per_device_train_batch_size", refused=BATCH, default="8"),
    Alias(
        "gradient_accumulation_steps",
        refused="not needed: micro-batches always accumulate to the whole step's prompts_per_step x group_size "
        "rollouts; set rows per forward/backward with --set trainer.micro_batch=N",
        accepts=(1.0,),
        kind=float,
        default="1",
    ),
    Alias(
        "generation_batch_size",
        refused="each step generates its own batch once: prompts_per_step x group_size rollouts "
        "(--set trainer.prompts_per_step=N)",
        accepts=(None,),
        default="None",
    ),
    Alias(
        "steps_per_generation",
        refused="each step generates its own batch once (several optimizer passes over it: "
        "--set trainer.num_iterations=N)",
        accepts=(None, 1.0),
        kind=float,
        default="None",
    ),
    Alias(
        "bf16",
        values={True: {"autocast": "bfloat16"}, False: {"autocast": ""}},
        kind=bool,
        default="None (True unless fp16)",
    ),
    Alias("fp16", values={True: {"autocast": "float16"}}, accepts=(False,), kind=bool, default="False"),
    # --- sampling
    Alias("num_generations", "group_size", default="8"),
    Alias("max_completion_length", "max_new_tokens", default="512"),
    Alias(
        "max_prompt_length",
        refused="not supported: prompts are never truncated",
        accepts=(None,),
        default="(not a field in TRL 1.16)",
    ),
    Alias(
        "top_k",
        refused="not supported: the trainer samples with temperature and top_p only",
        accepts=(0.0, None),
        kind=float,
        default="0",
    ),
    Alias(
        "min_p",
        refused="not supported: the trainer samples with temperature and top_p only",
        accepts=(None, 0.0),
        kind=float,
        default="None",
    ),
    Alias(
        "repetition_penalty",
        refused="not supported: no engine here applies a repetition penalty (the trainer's log-probs are those of "
        "plain temperature / top_p sampling); to discourage repetition, add a reward with --reward module:fn=weight",
        accepts=(1.0,),
        kind=float,
        default="1.0",
    ),
    Alias(
        "generation_kwargs",
        refused="not supported: sampling takes trainer.temperature, trainer.top_p and trainer.max_new_tokens",
        accepts=(None,),
        default="None",
    ),
    Alias(
        "chat_template_kwargs",
        refused="not supported: prompts go through the model's chat template with add_generation_prompt only "
        "(harness/engine/tokens.py); a template's switches such as enable_thinking keep their defaults",
        accepts=(None,),
        default="None",
    ),
    # --- the loss
    Alias(
        "loss_type",
        values={
            "grpo": {"loss_norm": "sequence"},
            "dapo": {"loss_norm": "token"},
            "dr_grpo": {"loss_norm": "constant"},
            "bnpo": "not supported: its per-micro-batch token normaliser; loss_type=dapo (loss_norm=token) "
            "normalises by the whole batch's tokens",
            "cispo": "not supported (CISPO's clipped importance weights); the losses here: loss_norm=sequence, "
            "token or constant",
            "sapo": "not supported (SAPO's soft gate); the losses here: loss_norm=sequence, token or constant",
            "luspo": "not supported; the losses here: loss_norm=sequence, token or constant",
            "vespo": "not supported; the losses here: loss_norm=sequence, token or constant",
        },
        default='"dapo"',
    ),
    Alias("epsilon", "eps_low", weak=("eps_high",), default="0.2"),
    Alias("epsilon_high", "eps_high", default="None (= epsilon)"),
    Alias(
        "delta",
        refused="not supported: the ratio is clipped to [1 - eps_low, 1 + eps_high] only (two-sided clipping is "
        "not built)",
        accepts=(None,),
        default="None",
    ),
    Alias(
        "scale_rewards",
        values={
            "group": {"advantage": "grpo"},
            "true": {"advantage": "grpo"},
            "none": {"advantage": "dr_grpo"},
            "false": {"advantage": "dr_grpo"},
            "batch": "not supported: advantages are divided by their group's std (advantage=grpo) or not at all "
            "(advantage=dr_grpo)",
        },
        default='"group"',
    ),
    Alias(
        "multi_objective_aggregation",
        values={
            "sum_then_normalize": {},
            "normalize_then_sum": "not supported: the harness sums the reward vector with the task's weights, "
            "then normalises the sum within each group (trainer.advantage); no component is normalised on its own",
        },
        default='"sum_then_normalize"',
    ),
    Alias("mask_truncated_completions", "mask_truncated", default="False"),
    Alias(
        "use_bias_correction_kl",
        refused="the harness's k3 KL (trainer.beta) has no importance-sampling bias correction: it equals TRL's "
        "with use_bias_correction_kl=False",
        accepts=(False,),
        kind=bool,
        default="True",
    ),
    Alias(
        "entropy_coef",
        refused=NO_ENTROPY,
        accepts=(0.0,),
        kind=float,
        default="0.0",
    ),
    Alias(
        "top_entropy_quantile",
        refused=NO_ENTROPY + "; every completion token is in the loss",
        accepts=(1.0,),
        kind=float,
        default="1.0",
    ),
    Alias("use_adaptive_entropy", refused=NO_ENTROPY, accepts=(False,), kind=bool, default="False"),
    Alias(
        "disable_dropout",
        refused="not supported: the update runs the model in train mode with its own dropout (0 in the configs of "
        "most causal LMs, e.g. Qwen2, Llama, SmolLM2)",
        accepts=(False,),
        kind=bool,
        default="False",
    ),
    Alias(
        "reward_weights",
        refused="the task's reward_weights (e.g. --set task.boxed_weight=W for math) and --reward module:fn=WEIGHT",
        accepts=(None,),
        default="None (all 1.0)",
    ),
    # --- rollouts sampled elsewhere
    Alias(
        "use_vllm",
        refused="use --engine vllm (in this process, as vllm_mode=colocate) or --engine vllm-server --engine-url "
        "URL (as vllm_mode=server)",
        accepts=(False,),
        kind=bool,
        default="False",
    ),
    Alias(
        "vllm_mode",
        refused="use --engine vllm (colocate) or --engine vllm-server --engine-url URL (server)",
        default='"colocate"',
    ),
    Alias(
        "vllm_importance_sampling_correction",
        values={
            True: {"old_logprobs": "recompute"},
            False: "not supported: where the trainer recomputes the old log-probs it always corrects for the "
            "sampler (trainer.old_logprobs=sampler keeps the engine's log-probs as the old policy's instead)",
        },
        kind=bool,
        default="True",
    ),
    Alias(
        "vllm_importance_sampling_mode",
        values={
            "token_truncate": {},
            "token_mask": "not supported: the correction here is token_truncate (min(ratio, trainer.tis_cap))",
            "sequence_truncate": "not supported: the correction here is token_truncate (min(ratio, trainer.tis_cap))",
            "sequence_mask": "not supported: the correction here is token_truncate (min(ratio, trainer.tis_cap))",
        },
        default='"sequence_mask"',
    ),
    Alias("vllm_importance_sampling_clip_max", "tis_cap", default="3.0"),
    Alias("vllm_importance_sampling_cap", "tis_cap", default="None (older name of clip_max)"),
    # --- what the run's flags set
    Alias("num_generations_eval", refused="evaluation samples are the searcher's: --k 1,4,16", default="None"),
    Alias(
        "logging_steps",
        refused="not needed: every step is logged (steps.jsonl, metrics.json); loggers: --log tensorboard,mlflow,wandb",
        default="10",
    ),
    Alias("report_to", refused="use --log tensorboard,mlflow,wandb", default='"all"'),
    Alias(
        "log_completions",
        refused="use --log-completions-every N (0: off); every completion is in samples.jsonl anyway",
        default="False",
    ),
    Alias("num_completions_to_print", refused="use --log-completions-every N", default="None"),
    Alias("eval_strategy", refused="use --eval-every N (+ --eval-every-limit N)", default='"no"'),
    Alias("eval_steps", refused="use --eval-every N (+ --eval-every-limit N)", default="None"),
    Alias(
        "save_steps",
        refused="use --checkpoint-every N (resume checkpoints) or --save-every N (loadable models per step)",
        default="500",
    ),
    Alias("push_to_hub", refused="use --push-to-hub REPO", default="False"),
    Alias("hub_model_id", refused="use --push-to-hub REPO", default="None"),
    Alias("output_dir", refused="use --out DIR (a new run folder under it)", default="None"),
    Alias(
        "model_init_kwargs",
        refused="use --model-revision REV and --dtype float32|bfloat16|float16",
        default="None",
    ),
    Alias(
        "peft_config",
        refused="LoRA is --set trainer.lora_r=R (with trainer.lora_alpha, lora_dropout, lora_target_modules)",
        default="None",
    ),
)
