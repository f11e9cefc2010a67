"""Fine-tune a small causal LM on generated two-digit additions in GSM8K answer format.

The loss is on the answer only ("#### <sum>" and EOS). All 10,000 questions are
tokenized once, so a step costs only the model's forward and backward. A constant
learning rate: this task's loss falls steeply late (around step 1,000), and a decaying
schedule stalls it. Training stops after --seconds of wall-clock time and the model is
saved in Hugging Face format.
"""

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def dataset(tok):
    """Padded input ids, attention mask and labels (-100 outside the answer) of every a + b."""
    prompts = [f"What is {a} + {b}?\n" for a in range(100) for b in range(100)]
    answers = [f"#### {a + b}" for a in range(100) for b in range(100)]
    p_ids = tok(prompts, add_special_tokens=True)["input_ids"]
    a_ids = tok(answers, add_special_tokens=False)["input_ids"]
    seqs = [p + a + [tok.eos_token_id] for p, a in zip(p_ids, a_ids, strict=True)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (p, s) in enumerate(zip(p_ids, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        labels[i, len(p) : len(s)] = torch.tensor(s[len(p) :])
    return ids, mask, labels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # NUM_GPUS=0 cells see no GPU
    tok = AutoTokenizer.from_pretrained(args.base)
    model = AutoModelForCausalLM.from_pretrained(args.base).to(device)
    model.train()
    ids, mask, labels = (t.to(device) for t in dataset(tok))
    print(f"training on {device}, {len(ids)} examples", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < args.seconds:
        rows = torch.randint(len(ids), (args.batch_size,), device=device)
        loss = model(input_ids=ids[rows], attention_mask=mask[rows], labels=labels[rows]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 200 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    print(f"trained {step} steps; saving to {args.out}", flush=True)
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)


if __name__ == "__main__":
    main()
