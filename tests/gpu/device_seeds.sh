#!/usr/bin/env bash
# The final evaluation's five seeds on one card (issue 28, second run), from the repo root:
#
#     bash tests/gpu/device_seeds.sh               # a 1-GPU machine (the device tool's H200)
#     bash tests/gpu/device_seeds.sh --device cpu  # the same on the CPU (what could run here)
#     bash tests/gpu/device_seeds.sh --bench-only --bench-size 1b  # step 2 alone, a 1B model
#     (BENCH_LIMIT, BENCH_MAX_TOKENS, BENCH_REPEATS: the bench's questions, tokens, rounds)
#
# 1. The real gsm8k task (tasks/gsm8k: its ladder 4000/3000/2000, `--limit -1`, the five
#    default seeds of evaluate.seeds) through one cell of the real workflow (runtime none,
#    num_gpus 1), on the fixture rows offline, scored by the transformers backend on cuda:0,
#    a tiny Llama 3-shaped base model (tests/scorer/family_models.py; it names no
#    temperature: it samples at 1.0, so all five seeds run). Checked: metrics.json with
#    per_seed for five seeds, the model loaded once in the attempt (PTB_MODEL_LOADED in its
#    log, model_loads in evaluate.json), the GPU monitor's rows.
# 2. bench/bench_seeds.py on the same card: the 5-seed attempt against 5 single-seed
#    attempts and against the bare floor (load once, generate the same seeded requests for
#    each seed); per-seed time and the whole attempt as ratios (issue 28's goal: the 5-seed
#    attempt <= 1.2x the floor's 5 generates plus one load). The bench's model is the tiny one
#    by default (fixed costs dominate); `--bench-size 1b` builds a random one of a base
#    model's size on the card (load and generation cost what a real base model's do).
#
# Everything lands in $OUT (default ./gpu-out) with the machine's paths replaced by <repo>
# and <work>, ready for docs/evidence/. Exit 0 when the run and every CHECK passed.
#
# The GPU machine has no registry: as for tests/gpu/device_sandbox.sh, .carry/site.tar.xz
# holds the Python packages it lacks (Snakemake's closure, inspect_ai 0.3.285,
# inspect_evals 0.26.0, datasets: tasks/requirements-scorer.txt), built for its Python 3.12,
# e.g. `pip install --target site -r tasks/requirements-scorer.txt snakemake==9.27.1 &&
# tar -C site -cJf .carry/site.tar.xz .`; torch and transformers are the machine's own.
# Without .carry the current Python's packages are used (the CPU run here: .venv's).
set -uo pipefail
device=cuda bench_only=0 bench_size=tiny
while [ $# -gt 0 ]; do
    case $1 in
        --device) device=${2:?--device cuda|cpu}; shift 2 ;;
        --bench-only) bench_only=1; shift ;;
        --bench-size) bench_size=${2:?--bench-size tiny|1b}; shift 2 ;;
        *) echo "device_seeds.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_seeds.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

if [ -f .carry/site.tar.xz ] && [ ! -f /opt/ptb-site/.complete ]; then
    stamp "carried packages"
    mkdir -p /opt/ptb-site && tar -C /opt/ptb-site -xJf .carry/site.tar.xz && touch /opt/ptb-site/.complete
    echo /opt/ptb-site > "$($PY -c 'import site; print(site.getsitepackages()[0])')/ptb-carried.pth"
fi
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1 CONDOR_CONFIG=/dev/null
if [ "$device" = cpu ]; then
    export CUDA_VISIBLE_DEVICES=""
    gpus=0 gpu_ids=""
else
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || exit 1
    gpus=1 gpu_ids='gpu_ids: "0"'
fi
$PY -c "
import sys, importlib.metadata as m
print('python', sys.version.split()[0])
for p in ('torch', 'transformers', 'accelerate', 'datasets', 'inspect_ai', 'inspect_evals', 'snakemake'):
    print(p, m.version(p))
import torch; print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')
" || exit 1

work=/tmp/ptb-device-seeds
rm -rf "$work" && mkdir -p "$work/profile" "$work/config" "$work/agents/copy_base" "$work/models"
for size in tiny $bench_size; do
    [ -d "$work/models/$size" ] && continue
    stamp "a random Llama 3-shaped model, $size"
    $PY -c "import sys; sys.path.insert(0, 'tests/scorer'); from family_models import build_family_model; build_family_model('llama3', '$work/models/$size', '$size')" 2>/dev/null || exit 1
done
$PY tests/scorer_fixtures.py "$work/hf" gsm8k > /dev/null || exit 1
printf '#!/usr/bin/env bash\nset -eu\ncp -r "$MODEL_TO_TRAIN" final_model\n' > "$work/agents/copy_base/solve.sh"
cp profiles/local/config.yaml "$work/profile/config.yaml"
cat > "$work/profile/site.yaml" <<YAML
site:
  name: device-seeds-$device
  runtime: none
  $gpu_ids
  gpu_reap: own
  hf_home: $work/hf
  hf_cache_mode: ro
  monitor_interval_seconds: 2
YAML
cat > "$work/config/config.yaml" <<YAML
agents: [copy_base]
tasks: [gsm8k]
models: [{name: tiny, path: models/tiny}]
hours: [0.005]
num_gpus: [$gpus]
runs: [1]
solve: {timeout_margin_minutes: 0.2, kill_grace_seconds: 5}
paths: {agents_dir: $work/agents, tasks_dir: $PWD/tasks}
YAML

scrub() { sed -E -e "s#$work#<work>#g" -e "s#$PWD#<repo>#g" -e "s#(\.\./)*/?tmp/#<tmp>/#g" "$1" > "$OUT/$2"; }
run=0 checks=0
if [ "$bench_only" = 0 ]; then
stamp "gsm8k through a cell: the real ladder, --limit -1, five seeds in one attempt ($device)"
timeout -k 10 480 $PY -m snakemake --snakefile "$PWD/Snakefile" --directory "$work" \
    --profile "$work/profile" --cores 1 > "$work/snakemake.log" 2>&1
run=$?
d=$work/results/cells/copy_base/gsm8k/tiny/0.005h-${gpus}gpu-run1
scrub "$work/snakemake.log" snakemake.log
echo "snakemake exit $run"; tail -n 4 "$OUT/snakemake.log"
for f in metrics.json evaluate.json gpu_monitor.csv; do [ -f "$d/$f" ] && scrub "$d/$f" "$f"; done
for f in "$d"/evaluate/*/attempt-*.log; do [ -f "$f" ] && scrub "$f" "$(basename "$f")"; done
$PY - "$d" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
ok = True
def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(f"CHECK {'ok' if cond else 'FAIL'}: {name} {detail}")
try:
    m = json.loads((d / "metrics.json").read_text())
    ev = json.loads((d / "evaluate.json").read_text())
except (OSError, ValueError) as e:
    check("metrics.json and evaluate.json", False, str(e)); sys.exit(1)
check("five seeds scored", (m.get("num_seeds"), m.get("num_seeds_succeeded")) == (5, 5),
      f"{m.get('num_seeds_succeeded')} of {m.get('num_seeds')}")
check("per_seed", sorted(m.get("per_seed", {})) == sorted(map(str, ev["seeds"]["evaluated"])),
      {s: v["metrics"]["accuracy"] for s, v in m.get("per_seed", {}).items()})
first = ev["attempts"][0]
check("five seeds in the first attempt", len(first.get("seeds") or []) == 5, first.get("seeds"))
log = (d / first["log"]).read_text()
check("the model loaded once", first.get("model_loads") == 1 and log.count("PTB_MODEL_LOADED") == 1,
      [ln.split("] ", 1)[-1] for ln in log.splitlines() if "PTB_MODEL_LOADED" in ln])
check("engine", m.get("engine") == "hf", f"{m.get('engine')} {m.get('engine_version')}, decoding {m.get('decoding')}")
print("attempts:", [(a["attempt"], a["max_tokens"], a["duration_s"], a.get("seeds_scored")) for a in ev["attempts"]])
print("mean accuracy", m["accuracy"], "stderr", m.get("stderr"))
sys.exit(0 if ok else 1)
PY
checks=$?
if [ -f "$d/gpu_monitor.csv" ]; then echo "gpu monitor rows: $(( $(wc -l < "$d/gpu_monitor.csv") - 1 ))"; fi
fi

stamp "bench: 5 seeds in one attempt vs 5 attempts vs the bare floor ($device, $bench_size model)"
timeout -k 10 900 $PY bench/bench_seeds.py --model "$work/models/$bench_size" --hf-home "$work/hf" --device "$device" \
    --limit "${BENCH_LIMIT:-3}" --max-tokens "${BENCH_MAX_TOKENS:-256}" --repeats "${BENCH_REPEATS:-3}" \
    --out "$work/bench_seeds.json" 2>&1 | grep -v '^{' | tail -n 3
bench=${PIPESTATUS[0]}
[ -f "$work/bench_seeds.json" ] && scrub "$work/bench_seeds.json" "bench_seeds_${device}_$bench_size.json"
stamp "done: snakemake $run, checks $checks, bench $bench"
[ "$run" = 0 ] && [ "$checks" = 0 ] && [ "$bench" = 0 ]
