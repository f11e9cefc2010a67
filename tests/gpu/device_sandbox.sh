#!/usr/bin/env bash
# On the device tool's GPU machine (as root), from the repo root: the demo campaign with
# one GPU per cell under runtime bwrap, the sandbox as the harness builds it (own user,
# PID, network namespaces, no capability, only the cell's card bound), plus a probe
# agent that reports, from inside its sandbox, what it can see of the GPU and itself.
# A foreign GPU process (another Unix user's) runs throughout: the reap before each
# scorer must leave it alone. Everything lands in $OUT as it happens.
#
# The machine has no registry: .carry/site.tar.xz holds the harness's and the scorer's
# Python packages it lacks (built for its Python 3.12) and .carry/debs/ bubblewrap,
# slirp4netns and libslirp0 from Debian 12.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_sandbox.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

stamp "carried packages and tools"
mkdir -p /opt/ptb-site && tar -C /opt/ptb-site -xJf .carry/site.tar.xz
echo /opt/ptb-site > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/ptb-carried.pth"
for deb in .carry/debs/bubblewrap_*.deb .carry/debs/slirp4netns_*.deb .carry/debs/libslirp0_*.deb; do
    command -v "$(basename "$deb" | cut -d_ -f1)" >/dev/null || dpkg -x "$deb" /
done
ldconfig
bwrap --version; slirp4netns --version | head -1
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1 CONDOR_CONFIG=/dev/null
network=internet
for tool in slirp4netns nsenter ip; do command -v "$tool" >/dev/null || network=none; done
[ -c /dev/net/tun ] || network=none
echo "sandbox network: $network"

stamp "a foreign GPU process (user ptbother), which nothing of ours may touch"
id ptbother >/dev/null 2>&1 || useradd -M -d /nonexistent ptbother
setpriv --reuid=ptbother --regid=ptbother --clear-groups "$(command -v python3)" -c \
    'import torch, time; x = torch.ones(2**28, device="cuda"); print("holding", flush=True); time.sleep(900)' \
    > "$OUT/foreign.log" 2>&1 &
foreign=$!

work=/tmp/gpu-sandbox
rm -rf "$work" && mkdir -p "$work/profile" "$work/config" "$work/agents"
cp -r agents/noop agents/demo_sft "$work/agents/"
mkdir -p "$work/agents/gpu_probe"
cat > "$work/agents/gpu_probe/solve.sh" <<'SH'
#!/usr/bin/env bash
# What the agent sees of itself and the GPU, from inside its sandbox; then the base model.
echo "PROBE status: $(grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status | tr -s '\t\n' ' ')"
echo "PROBE uid $(id -u) host $(hostname) CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
echo "PROBE dev: $(ls /dev | grep -i nvidia | tr '\n' ' ')"
echo "PROBE driver gpus: $(ls /proc/driver/nvidia/gpus 2>&1 | tr '\n' ' ')"
echo "PROBE nvidia-smi -L: $(nvidia-smi -L 2>&1 | tr '\n' ' ')"
python - <<'PY'
import pynvml, torch
pynvml.nvmlInit()
print("PROBE nvml count", pynvml.nvmlDeviceGetCount())
print("PROBE torch cuda", torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.get_device_name(0))
x = torch.randn(4096, 4096, device="cuda")
print("PROBE matmul ok", bool(torch.isfinite(x @ x).all()))
PY
cp -rL "$MODEL_TO_TRAIN" final_model
SH
cp profiles/local/config.yaml "$work/profile/config.yaml"
cat > "$work/profile/site.yaml" <<YAML
site:
  name: device-h200
  runtime: bwrap
  network: $network
  gpu_ids: "0"
  gpu_reap: own
  monitor_interval_seconds: 1
YAML
cat > "$work/config/config.yaml" <<YAML
agents: [noop, demo_sft, gpu_probe]
tasks: [arith]
models: [{name: tiny-arith, path: resources/models/tiny-arith}]
hours: [0.01]
num_gpus: [1]
runs: [1]
solve: {timeout_margin_minutes: 0.2, kill_grace_seconds: 5}
paths: {agents_dir: $work/agents, tasks_dir: $PWD/tasks}
YAML
# doctor starts a real sandbox of this profile too (beside the campaign: time is short)
python3 -m ptb_harness doctor --profile "$work/profile" > "$OUT/doctor.log" 2>&1 &
stamp "demo campaign, num_gpus [1], runtime bwrap (one job at a time: one card)"
timeout -k 10 400 python3 -m snakemake --snakefile "$PWD/Snakefile" --directory "$work" \
    --profile "$work/profile" --cores 1 > "$OUT/snakemake.log" 2>&1
echo "snakemake exit $?"; tail -n 6 "$OUT/snakemake.log"
r=$work/results
cat "$r/tables/leaderboard.md" 2>/dev/null | head -20
for a in noop demo_sft gpu_probe; do
    d=$r/cells/$a/arith/tiny-arith/0.01h-1gpu-run1
    grep -h "PROBE\|trained\|training on" "$d/solve_out.txt" 2>/dev/null | sed 's/^/  /'
    cp "$d/gpu_monitor.csv" "$OUT/gpu_monitor_$a.csv" 2>/dev/null
    grep -hi "reap" "$d"/logs/*.log 2>/dev/null | sed "s/^/  $a: /" | head -5
    python3 -c "import json,sys; s=json.load(open('$d/solve.json')); print('  $a solve:', s['status'], s.get('gpus'), 'limits hit:', (s.get('limits') or {}).get('hit'))" 2>/dev/null
    python3 -c "import json; print('  $a metrics:', json.load(open('$d/metrics.json')))" 2>/dev/null
done
cp "$r/tables/cells.csv" "$OUT/cells.csv" 2>/dev/null
stamp "doctor (bwrap profile)"
wait %2 2>/dev/null; grep -E "sandbox|runtime|GPU|cgroup|rlimit" "$OUT/doctor.log" | cut -c1-400
stamp "the foreign process after the campaign"
if kill -0 "$foreign" 2>/dev/null; then echo "foreign GPU process alive: untouched"; else echo "foreign GPU process GONE"; fi
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
kill "$foreign" 2>/dev/null
stamp "done"
