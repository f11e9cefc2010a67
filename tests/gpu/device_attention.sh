#!/usr/bin/env bash
# The scorer's attention kernels on one card (issue 35), from the repo root:
#
#     bash tests/gpu/device_attention.sh probe         # per token: tests/gpu/probe_attention.py, 1B and tiny
#     bash tests/gpu/device_attention.sh attempts      # per attempt: bench/bench_seeds.py, 1B, both kernel sets
#     bash tests/gpu/device_attention.sh attempts-tiny # the same with the tiny model
#
# (BENCH_LIMIT, BENCH_MAX_TOKENS, PROBE_TOKENS, PROBE_SIZES: the questions, tokens and model sizes;
# defaults 3, 64, 64, "1b tiny"; PROBE_ROUNDS, PROBE_KERNEL_SETS: the probe's rounds and kernel
# sets, default 3 and "default,with_cudnn"; BENCH_KERNEL_SETS: the attempts' kernel sets, default the scorer's
# and the same with cuDNN, whose answers are then compared: kernel_parity_<size>.json.)
# The packages the machine lacks come from .carry/site.tar.xz (`bash tests/gpu/build_carry.sh` builds it)
# as for tests/gpu/device_seeds.sh
# (inspect_ai, inspect_evals, datasets and their closure for its Python 3.12; torch and
# transformers are the machine's own). Output lands in $OUT (default ./gpu-out).
set -uo pipefail
what=${1:?probe|attempts|attempts-tiny}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_attention_$what.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
if [ -f .carry/site.tar.xz ] && [ ! -f /opt/ptb-site/.complete ]; then
    mkdir -p /opt/ptb-site && tar -C /opt/ptb-site -xJf .carry/site.tar.xz && touch /opt/ptb-site/.complete
    echo /opt/ptb-site > "$($PY -c 'import site; print(site.getsitepackages()[0])')/ptb-carried.pth"
fi
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1 CONDOR_CONFIG=/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c 'import torch, transformers, inspect_ai, inspect_evals, datasets as d
print("torch", torch.__version__, "transformers", transformers.__version__, "inspect_ai", inspect_ai.__version__, "datasets", d.__version__)'
limit=${BENCH_LIMIT:-3} tokens=${BENCH_MAX_TOKENS:-64}
case $what in
    probe)
        for size in ${PROBE_SIZES:-1b tiny}; do
            timeout 240 $PY tests/gpu/probe_attention.py --size "$size" --tokens "${PROBE_TOKENS:-64}" \
                --rounds "${PROBE_ROUNDS:-3}" --kernel-sets "${PROBE_KERNEL_SETS:-default,with_cudnn}" --out "$OUT/probe_attention_$size.json" | grep -v -e WARNING -e '^ *$'
        done ;;
    attempts | attempts-tiny)
        size=1b; [ "$what" = attempts-tiny ] && size=tiny
        sets=${BENCH_KERNEL_SETS:-flash,efficient,math flash,efficient,math,cudnn}
        for kernels in $sets; do
            timeout 560 $PY bench/bench_seeds.py --device cuda --model-size "$size" --repeats 1 --limit "$limit" \
                --questions "$limit" --max-tokens "$tokens" --sdpa-kernels "$kernels" --no-single-seed-attempts \
                --out "$OUT/seeds_${size}_$(echo "$kernels" | tr , -).json" | grep -v -e WARNING -e '^{'
        done
        # the same model's answers under each kernel set: how many differ (sampled near-ties may flip)
        $PY - "$OUT" "$size" <<'PY'
import json, sys
from pathlib import Path
out, size = Path(sys.argv[1]), sys.argv[2]
runs = {p.stem.split("_", 2)[2]: json.loads(p.read_text())["scorer_answers"] for p in sorted(out.glob(f"seeds_{size}_*.json"))}
if len(runs) >= 2:
    (a, ans_a), (b, ans_b) = list(runs.items())[:2]
    differ = sorted(k for k in ans_a.keys() | ans_b.keys() if ans_a.get(k) != ans_b.get(k))
    parity = {"kernel_sets": [a, b], "answers": len(ans_a.keys() | ans_b.keys()), "differ": len(differ), "differing": differ}
    (out / f"kernel_parity_{size}.json").write_text(json.dumps(parity, indent=2) + "\n")
    print("kernel parity", json.dumps({k: v for k, v in parity.items() if k != "differing"}))
PY
        ;;
    *) echo "device_attention.sh: probe, attempts or attempts-tiny" >&2; exit 2 ;;
esac
