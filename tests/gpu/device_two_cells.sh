#!/usr/bin/env bash
# On a machine with 2+ GPUs (as root), from the repo root, wheels in .whl/: the GPU
# checks (with the GPU-0-must-survive scope checks), then the demo campaign with two
# GPU cells at once on the local profile, each leasing its own card from gpu_pool.
set -uo pipefail
source tests/gpu/device_env.sh
nvidia-smi -L

echo "== GPU checks"
python3 tests/gpu/gpu_checks.py 2>&1 | grep -v "^    reap (dry run)\|^    reap killed" | tee "$OUT/gpu_checks.log"
checks=${PIPESTATUS[0]}

echo "== two cells at once, one card each"
work=/tmp/gpu-two
rm -rf "$work" && mkdir -p "$work/config" "$work/profile"
cp profiles/local/config.yaml "$work/profile/config.yaml"
cat > "$work/profile/site.yaml" <<YAML
site:
  name: device-h200-x2
  runtime: none
  gpu_pool: "0,1"           # each GPU job leases its own card
  gpu_reap: own             # safe with leases: a reap only sees its own card
  monitor_interval_seconds: 2
YAML
cat > "$work/config/config.yaml" <<YAML
agents: [noop, demo_sft]
tasks: [arith]
models: [{name: tiny-arith, path: resources/models/tiny-arith}]
hours: [0.01]
num_gpus: [1]
runs: [1, 2]
solve: {timeout_margin_minutes: 0.5, kill_grace_seconds: 10}
paths: {agents_dir: $PWD/agents, tasks_dir: $PWD/tasks}
YAML
timeout -k 10 480 python3 -m snakemake --snakefile "$PWD/Snakefile" --directory "$work" \
    --profile "$work/profile" --cores 2 > "$OUT/snakemake.log" 2>&1
demo=$?
tail -n 5 "$OUT/snakemake.log"
cat "$work/results/tables/leaderboard.md"
python3 - "$work/results" <<'PY' | tee "$OUT/two_cells.txt"
import csv, json, sys
from pathlib import Path
root = Path(sys.argv[1]) / "cells"
cells = sorted(root.glob("*/arith/tiny-arith/*"))
ok = True
spans = {}
for c in cells:
    solve = json.loads((c / "solve.json").read_text())
    uuids = {g["uuid"] for g in solve["gpus"]}
    rows = list(csv.DictReader((c / "gpu_monitor.csv").open()))
    seen = {r["gpu_uuid"] for r in rows}
    ev = (c / "logs/evaluate.log").read_text()
    reaps = [l.split("): ", 1)[1] for l in ev.splitlines() if "GPU reap" in l]
    name = "/".join(c.parts[-4:])
    spans[name] = (solve["started_at"], solve["ended_at"], sorted(uuids))
    good = len(uuids) == 1 and seen == uuids and (c / "metrics.json").exists()
    ok &= good
    print(f"{'PASS' if good else 'FAIL'} {name}: solve.json GPU {sorted(uuids)}; monitor rows {len(rows)} on {sorted(seen)}; reaps {reaps}; score {json.loads((c / 'metrics.json').read_text())['accuracy'] if (c / 'metrics.json').exists() else None}")
for n, s in spans.items():
    print(f"  {n}: solve {s[0]} .. {s[1]} on {s[2]}")
print("two-cell checks:", "all passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
cells=${PIPESTATUS[0]}
echo "gpu_checks exit $checks; demo exit $demo; cell checks exit $cells"
[ "$checks" = 0 ] && [ "$demo" = 0 ] && [ "$cells" = 0 ]
