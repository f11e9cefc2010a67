#!/usr/bin/env bash
# Baseline agent: hands back the base model unchanged, so its cells score the base model.
set -euo pipefail
echo "noop: returning base model $MODEL_TO_TRAIN unchanged"
if [ -d "$MODEL_TO_TRAIN" ]; then
    cp -rL "$MODEL_TO_TRAIN" final_model
else
    # a Hugging Face repo id: resolved from the (read-only) hub cache the site provides
    python - <<'PY'
import os
from huggingface_hub import snapshot_download
snapshot_download(os.environ["MODEL_TO_TRAIN"], local_dir="final_model")
PY
fi
ls final_model
