#!/usr/bin/env bash
# On a GPU machine (as root), from the repo root, with the harness's missing wheels in
# .whl/: the real-GPU checks (tests/gpu/gpu_checks.py), then the demo campaign with one
# GPU per cell (runtime none) and the GPU monitor on. Results go to $OUT (or ./gpu-out).
set -uo pipefail
source tests/gpu/device_env.sh

echo "== GPU checks"
python3 tests/gpu/gpu_checks.py 2>&1 | tee "$OUT/gpu_checks.log"
checks=${PIPESTATUS[0]}

echo "== demo campaign on the GPU"
work=/tmp/gpu-demo
rm -rf "$work" && mkdir -p "$work/config" "$work/profile"
cp profiles/local/config.yaml "$work/profile/config.yaml"
cat > "$work/profile/site.yaml" <<YAML
site:
  name: device-h200
  runtime: none
  gpu_ids: "0"              # a single-GPU machine with no scheduler: the cell's GPU is 0
  gpu_reap: own
  monitor_interval_seconds: 2
YAML
cat > "$work/config/config.yaml" <<YAML
agents: [noop, demo_sft]
tasks: [arith]
models: [{name: tiny-arith, path: resources/models/tiny-arith}]
hours: [0.01]
num_gpus: [1]
runs: [1]
solve: {timeout_margin_minutes: 0.5, kill_grace_seconds: 10}
paths: {agents_dir: $PWD/agents, tasks_dir: $PWD/tasks}
YAML
# one job at a time: the local executor does not give each job its own GPU
timeout -k 10 420 python3 -m snakemake --snakefile "$PWD/Snakefile" --directory "$work" \
    --profile "$work/profile" --cores 1 2>&1 | tail -n 25
demo=$?
r=$work/results
cat "$r/tables/leaderboard.md"
for a in noop demo_sft; do
    d=$r/cells/$a/arith/tiny-arith/0.01h-1gpu-run1
    cp "$d/gpu_monitor.csv" "$OUT/gpu_monitor_$a.csv" 2>/dev/null
    cp "$d/solve.json" "$OUT/solve_$a.json" 2>/dev/null
    cp "$d/logs/evaluate.log" "$OUT/evaluate_log_$a.txt" 2>/dev/null
    cp "$d/preflight.json" "$OUT/preflight_$a.json" 2>/dev/null
done
cp "$r/tables/cells.csv" "$OUT/cells.csv" 2>/dev/null
echo "gpu_checks exit $checks; demo exit $demo"
[ "$checks" = 0 ] && [ "$demo" = 0 ]
