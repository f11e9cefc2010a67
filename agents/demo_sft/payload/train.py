"""Fine-tune a small causal LM on generated two-digit additions in GSM8K answer format.

Each answer is written as a scratchpad, the sum's digits ones first, then the answer the
scorer reads: "What is 47 + 38?\n" -> "58#### 85" and EOS. Written left to right, the sum's
first digit needs the carry from the last, which a tiny model learns only after a long
plateau (0.84 exact after 1,500 steps, and at some learning rates not in 2,000); reversed,
each digit needs only the digits before it, and the same model is 0.88-0.99 exact after
400-500 steps (learning rate 1e-3, three seeds). The loss is on the answer only. All
10,000 questions are tokenized once, so a step costs only the model's forward and
backward.

Training stops when the model answers --target of a fixed sample of 500 questions
exactly (checked every 100 steps: teacher-forced argmax, which is what greedy decoding
produces), or after --seconds of wall-clock time, whichever comes first; the log says
which, with the steps taken. The model is saved in Hugging Face format.

The CPU may be shared (a laptop with a browser and a build open): torch's threads then
wait on each other (two threads on two busy cores took 190-360 ms a step, one thread 97
ms; idle, two took 40-48 and one 68). So the thread count is chosen by timing a few steps
with each, at the start and every few hundred steps.
"""

import argparse
import os
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

#: steps between checks of the exact-answer rate (a check costs about 3 steps)
CHECK_EVERY = 100
#: steps between choices of the thread count, and the steps timed for each count
RETIME_EVERY, TIMED_STEPS = 300, 8


def answer(a: int, b: int) -> str:
    """The text the model learns to write after the question: scratchpad, then the answer."""
    return f"{str(a + b)[::-1]}#### {a + b}"


def dataset(tok):
    """Padded input ids, attention mask and labels (-100 outside the answer) of every a + b."""
    prompts = [f"What is {a} + {b}?\n" for a in range(100) for b in range(100)]
    answers = [answer(a, b) for a in range(100) for b in range(100)]
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


def exact_rate(model, ids, mask, labels) -> float:
    """The share of these examples whose every answer token is the model's argmax."""
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    model.train()
    predicted, wanted = logits[:, :-1].argmax(-1), labels[:, 1:]
    return ((predicted == wanted) | (wanted == -100)).all(-1).float().mean().item()


def fastest_threads(train_step) -> tuple[int, int]:
    """Time TIMED_STEPS training steps with a thread per usable core and with one; keep the
    faster count (the steps train the model all the same). Returns (threads, steps taken)."""
    counts = sorted({len(os.sched_getaffinity(0)), 1}, reverse=True)  # the cores this process may use
    took = {}
    for count in counts:
        torch.set_num_threads(count)
        begun = time.monotonic()
        for _ in range(TIMED_STEPS):
            train_step()
        took[count] = time.monotonic() - begun
    best = min(took, key=took.get)
    torch.set_num_threads(best)
    return best, TIMED_STEPS * len(counts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--target", type=float, default=0.98, help="stop once this share of the sample is exact")
    args = ap.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # NUM_GPUS=0 cells see no GPU
    tok = AutoTokenizer.from_pretrained(args.base)
    model = AutoModelForCausalLM.from_pretrained(args.base).to(device)
    model.train()
    ids, mask, labels = (t.to(device) for t in dataset(tok))
    sample = torch.randperm(len(ids), generator=torch.Generator().manual_seed(1))[:500].to(device)
    print(
        f"training on {device}, {len(ids)} examples, until {args.target:.0%} exact or {args.seconds:.0f} s", flush=True
    )
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.0)

    def train_step() -> float:
        rows = torch.randint(len(ids), (args.batch_size,), device=device)
        loss = model(input_ids=ids[rows], attention_mask=mask[rows], labels=labels[rows]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    start = time.monotonic()
    step, exact, loss = 0, 0.0, float("nan")
    while time.monotonic() - start < args.seconds:
        if device == "cpu" and step % RETIME_EVERY == 0:
            threads, timed = fastest_threads(train_step)
            step += timed
            print(f"step {step}: {threads} thread(s)", flush=True)
        loss = train_step()
        step += 1
        if step % CHECK_EVERY == 0:
            exact = exact_rate(model, ids[sample], mask[sample], labels[sample])
            print(f"step {step} loss {loss:.4f} exact {exact:.3f}", flush=True)
            if exact >= args.target:
                break
    spent = time.monotonic() - start
    if exact >= args.target:
        print(f"reached {exact:.1%} exact after {step} steps in {spent:.0f} s", flush=True)
    else:
        print(
            f"time budget spent after {step} steps in {spent:.0f} s at {exact:.1%} exact (target {args.target:.0%}):"
            " this demo needs about 500-700 steps, and a busy CPU gave it fewer",
            flush=True,
        )
    print(f"saving to {args.out}", flush=True)
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)


if __name__ == "__main__":
    main()
