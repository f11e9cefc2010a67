"""Score a model on two-digit additions, GSM8K style: the answer follows '####'.

    python evaluate.py --model-path DIR --json-output-file FILE [--max-tokens N] [--limit N]

Writes {"accuracy", "stderr", "n_examples", "n_correct"} to FILE. A model the scorer refuses
to load (remote code, pickle weights, custom_generate/: ptb_scorer.refusals, next to this
file) is one line `PTB_MODEL_INVALID: why` and exit 3: the agent's failure.
"""

import argparse
import json
import math
import random
import re
import sys

from ptb_scorer.protocol import emit_model_invalid
from ptb_scorer.refusals import refusal

ANSWER = re.compile(r"####\s*(-?[\d,]+(?:\.\d+)?)")


def questions(n: int, seed: int = 20261129) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        out.append((f"What is {a} + {b}?\n", a + b))
    return out


def extract(text: str) -> int | None:
    m = ANSWER.search(text)
    if not m:
        return None
    try:
        return int(float(m.group(1).replace(",", "")))
    except ValueError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--json-output-file", required=True)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--limit", type=int, default=200)
    args = ap.parse_args()
    if why := refusal(args.model_path):
        sys.exit(emit_model_invalid(why))

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_path)
    tok.padding_side = "left"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(args.model_path).to(device).eval()
    qs = questions(200 if args.limit < 0 else args.limit)
    correct = 0
    with torch.no_grad():
        for i in range(0, len(qs), 100):
            batch = qs[i : i + 100]
            enc = tok([q for q, _ in batch], return_tensors="pt", padding=True).to(device)
            out = model.generate(**enc, max_new_tokens=args.max_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
            texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            correct += sum(extract(t) == ans for t, (_, ans) in zip(texts, batch, strict=False))
    n = len(qs)
    acc = correct / n
    result = {"accuracy": acc, "stderr": math.sqrt(acc * (1 - acc) / n), "n_examples": n, "n_correct": correct}
    with open(args.json_output_file, "w") as f:
        json.dump(result, f)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
