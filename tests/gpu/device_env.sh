# Sourced by the device scripts, from the repo root: install the wheels in .whl/ that the
# GPU machine lacks (snakemake and its closure), point Python at them and at src/, and
# set OUT (the folder whose files come back).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src CONDOR_CONFIG=/dev/null PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1
python3 -m snakemake --version || exit 1
