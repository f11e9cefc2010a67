#!/usr/bin/env bash
# Demo agent: supervised fine-tuning of the base model on generated additions, until it
# answers 98% of a sample exactly or shortly before its deadline (read from ~/timer.sh),
# whichever comes first (train.py logs which). The code is in ~/agent (payload/).
set -euo pipefail
left=$(bash "$HOME/timer.sh" --seconds)
echo "demo_sft: $left s left; fine-tuning $MODEL_TO_TRAIN for $BENCHMARK_ID"
python "$HOME/agent/train.py" --base "$MODEL_TO_TRAIN" --out final_model --seconds "$(( left > 15 ? left - 10 : left * 2 / 3 ))"
