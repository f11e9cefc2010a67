#!/usr/bin/env bash
# On a GPU machine (the device tool's H200), from the repo root: gsm8k through a GPU cell
# of the real workflow (runtime none, one GPU, the real tasks/gsm8k with its real ladder
# and `--limit -1`) on fixture data offline, scored by inspect_ai's transformers provider
# on the GPU; then bench/bench_scorer.py on the GPU. The machine has no registry: the
# scorer lock's packages and Snakemake's closure come pre-extracted in /tmp/site (see
# docs/evidence/README.md), made visible to every process of python3 by a .pth file,
# since the scorer's sandbox passes no PYTHONPATH. Results go to $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1 CONDOR_CONFIG=/dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
echo /tmp/site > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/ptb-carried.pth"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "
import sys, importlib.metadata as m
print('python', sys.version.split()[0], sys.executable)
for p in ('torch', 'transformers', 'accelerate', 'datasets', 'inspect_ai', 'inspect_evals', 'snakemake'):
    print(p, m.version(p))
import torch; print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))
" || exit 1

work=/tmp/gpu-tasks
rm -rf "$work" /tmp/hf && mkdir -p "$work/profile" "$work/config" "$work/agents/copy_base" "$work/models"
# a tiny Llama 3-shaped base model that ships its chat template (the scorer renders with it)
python3 -c "import sys; sys.path.insert(0, 'tests/scorer'); from family_models import build_family_model; build_family_model('llama3', '$work/models/tiny')" 2>/dev/null
python3 tests/scorer_fixtures.py /tmp/hf gsm8k || exit 1
printf '#!/usr/bin/env bash\nset -eu\ncp -r "$MODEL_TO_TRAIN" final_model\n' > "$work/agents/copy_base/solve.sh"
cp profiles/local/config.yaml "$work/profile/config.yaml"
cat > "$work/profile/site.yaml" <<YAML
site:
  name: device-h200
  runtime: none
  gpu_ids: "0"
  gpu_reap: own
  hf_home: /tmp/hf
  hf_cache_mode: ro
  monitor_interval_seconds: 2
YAML
cat > "$work/config/config.yaml" <<YAML
agents: [copy_base]
tasks: [gsm8k]
models: [{name: tiny, path: models/tiny}]
hours: [0.005]
num_gpus: [1]
runs: [1]
solve: {timeout_margin_minutes: 0.2, kill_grace_seconds: 5}
paths: {agents_dir: $work/agents, tasks_dir: $PWD/tasks}
YAML
echo "== gsm8k through a GPU cell (real ladder: 4000/3000/2000, --limit -1)"
start=$(date +%s)
timeout -k 10 420 python3 -m snakemake --snakefile "$PWD/Snakefile" --directory "$work" \
    --profile "$work/profile" --cores 1 > "$OUT/snakemake.log" 2>&1
run=$?
echo "snakemake exit $run after $(( $(date +%s) - start )) s"; tail -n 8 "$OUT/snakemake.log"
d=$work/results/cells/copy_base/gsm8k/tiny/0.005h-1gpu-run1
cp "$d/metrics.json" "$d/evaluate.json" "$d/provenance.json" "$d/gpu_monitor.csv" "$OUT/" 2>/dev/null
cp "$d"/evaluate/*/attempt-1.log "$OUT/attempt-1.log" 2>/dev/null
echo "== metrics.json"; cat "$d/metrics.json"
echo "== attempt log (head)"; head -n 12 "$OUT/attempt-1.log" | cut -c1-300
echo "== bench: scorer attempt vs bare transformers, GPU"
timeout -k 10 150 python3 bench/bench_scorer.py --model "$work/models/tiny" --hf-home /tmp/hf --repeats 3 \
    --out "$OUT/bench_scorer_gpu.json" 2>&1 | grep -v '^{' | tail -n 3
[ "$run" = 0 ]
