"""The command line every task's evaluate.py shares (the harness's contract):

    python evaluate.py [--model-path DIR] [--json-output-file FILE] [--limit N (-1 = all)]
                       [--max-tokens N | --max-new-tokens N] [--backend auto|vllm|hf]
                       [--base-architecture ARCH] [--chat-template FILE | --chat-template-from DIR]
                       [--prompt-log FILE] [--seeds S1,S2,... [--first-seed-gates]]

One ``main`` for every task: a task's info.json gives its defaults (``agent_default_limit``,
the first ladder stage's ``max_tokens``) and says whether a grader model grades it
(``uses_grader``: :mod:`ptb_scorer.graded`, whose cap flag is ``--max-new-tokens`` as
upstream's). Prompts are rendered with the chat template the harness wrote beside
evaluate.py (ptb_chat_template.json: the base model's own; ptb_scorer.chat_template),
never the final model's. Writes FILE (atomically) only for a successful run: accuracy,
stderr, n_examples, the engine and its version, the chat template's source, sha256 and
variables, the decoding, the dataset revisions. Prints ``PTB_SCORER_INFO {json}`` before
scoring, and on failure exactly one line of :mod:`ptb_scorer.protocol`, no traceback for
known causes.

The model is loaded once (``PTB_MODEL_LOADED``). With ``--seeds`` (the harness's final
evaluation, PostTrainBench v1.2) every seed runs on it in turn, each request seeded from
the run seed, and each seed's metrics go to their own file as it is scored
(``ptb_scorer.protocol.seed_output``); ``--first-seed-gates``: a failure of the first
seed ends the attempt (the others wait until it has succeeded).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from ptb_scorer import data
from ptb_scorer.chat_template import BUNDLE_FILE, TemplateError
from ptb_scorer.model import ModelInvalid, check_loadable, check_model
from ptb_scorer.protocol import (
    EXIT_DATA_MISSING,
    EXIT_SCORED,
    emit_grader_failed,
    emit_info,
    emit_model_invalid,
    emit_scorer_error,
    emit_seed_failed,
    emit_seed_scored,
    seed_output,
)
from ptb_scorer.task_info import Scoring, TaskInfo, attempt_record, engine_for


def seed_list(text: str) -> list[int]:
    """--seeds: distinct non-negative integers, comma-separated."""
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: integers separated by commas") from None
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: distinct non-negative integers")
    return seeds


def parser(
    name: str,
    default_limit: int,
    default_max_tokens: int | None,
    here: Path,
    *,
    cap_flag: str = "--max-tokens",
    unit: str = "examples",
    how: str = "inspect_ai",
) -> argparse.ArgumentParser:
    """The evaluate.py command line every task shares; `cap_flag` names its ladder's token cap."""
    ap = argparse.ArgumentParser(prog="evaluate.py", description=f"Score a model on {name} ({how}).")
    ap.add_argument("--model-path", default="final_model", help="the model to score (Hugging Face format)")
    ap.add_argument("--json-output-file", default="metrics.json", help="where the metrics go")
    ap.add_argument("--limit", type=int, default=default_limit, help=f"{unit} to score; -1 = all")
    ap.add_argument(cap_flag, type=int, default=default_max_tokens, help="cap on generated tokens")
    ap.add_argument("--backend", choices=("auto", "vllm", "hf"), default="auto", help="auto: vLLM on a GPU, else hf")
    ap.add_argument("--base-architecture", help="the base model's architecture (the harness passes it)")
    ap.add_argument(
        "--chat-template",
        type=Path,
        default=here / BUNDLE_FILE,
        help=f"the chat template the harness chose ({BUNDLE_FILE}: the base model's)",
    )
    ap.add_argument(
        "--chat-template-from",
        type=Path,
        help="instead: a model directory whose own chat template to use (e.g. the base model, run by hand)",
    )
    ap.add_argument("--prompt-log", type=Path, help="hf backend: write each rendered prompt and its token ids here")
    ap.add_argument(
        "--seeds",
        type=seed_list,
        help="final evaluation: run each seed on the one loaded model, each seed's metrics to FILE's .seed-S.json",
    )
    ap.add_argument("--first-seed-gates", action="store_true", help="with --seeds: stop when the first seed fails")
    return ap


def task_parser(name: str, info: TaskInfo, here: Path) -> argparse.ArgumentParser:
    """The command line of one task, its defaults from its info.json."""
    kind = {"unit": "questions", "how": "graded"} if info.uses_grader else {}
    return parser(name, info.default_limit, info.default_max_tokens, here, cap_flag=info.cap_flag, **kind)


def main(name: str, argv: list[str] | None = None) -> int:
    here = Path(sys.argv[0]).resolve().parent
    info = TaskInfo.read(here / "info.json")
    args = task_parser(name, info, here).parse_args(argv)
    # inspect_evals reads it once, at import: its own files (bfcl's) live in the HF home
    os.environ.setdefault("INSPECT_EVALS_CACHE_DIR", str(data.CacheLayout.from_env().hf_home / "inspect_evals"))
    # the attempt's log starts with its token cap (the harness's ladder step) and argv
    seeds = ",".join(map(str, args.seeds)) if args.seeds else "none"
    cap = f"{info.cap_name}={getattr(args, info.cap_name)}"
    print(f"{name}: {cap} limit={args.limit} backend={args.backend} seeds={seeds}", flush=True)
    print(f"argv: {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
    from ptb_scorer.llm_client import LLMUnavailable

    try:
        if info.uses_grader:
            from ptb_scorer import graded

            return _run(name, graded.prepare(name, info, args), args)
        return _run(name, _prepare(name, info, args), args)
    except ModelInvalid as e:
        return emit_model_invalid(e)
    except data.DataMissing as e:
        return emit_scorer_error(f"dataset missing: {e}", EXIT_DATA_MISSING)
    except TemplateError as e:
        return emit_scorer_error(f"chat template: {e}")
    except LLMUnavailable as e:
        return emit_grader_failed(e)
    except Exception as e:
        from ptb_scorer.engine import EngineFailed, EngineSettingInvalid

        # an unknown failure: the traceback helps, then one line
        if not isinstance(e, (EngineFailed, EngineSettingInvalid)):
            traceback.print_exc()
        why = str(e).strip().splitlines()[-1][:300] if str(e).strip() else ""
        return emit_scorer_error(f"{type(e).__name__}: {why}")


def _prepare(name: str, info: TaskInfo, args: argparse.Namespace) -> Scoring:
    """An inspect task's scoring: the model checked, the data there, the engine chosen."""
    from ptb_scorer import engine
    from ptb_scorer.tasks import TASKS

    task_def = TASKS[name]
    checked = check_model(Path(args.model_path), args.base_architecture)
    check_loadable(checked.path)
    data.require(info.datasets)
    chosen = engine_for(args, info, checked, args.max_tokens)

    def score(model: object, run_seed: int | None) -> dict:
        task = task_def.build(run_seed)
        metrics = engine.run_task(task, chosen.spec, limit=args.limit, model=model, run_seed=run_seed)
        return {**task_def.record(run_seed), **metrics}

    return Scoring({**attempt_record(name, info, args, checked, chosen), **task_def.record()}, chosen.spec, score)


def _run(name: str, scoring: Scoring, args: argparse.Namespace) -> int:
    """Load the model once, then score: one run, or each seed in turn."""
    from ptb_scorer import engine

    emit_info(scoring.record)
    model = engine.load_model(scoring.spec)
    if args.seeds is None:
        metrics = scoring.score(model, None)
        engine.write_json_atomic(Path(args.json_output_file), {**scoring.record, **metrics})
        print(f"{name}: accuracy={metrics['accuracy']} n_examples={metrics['n_examples']}", flush=True)
        return EXIT_SCORED
    return _run_seeds(name, scoring, model, args)


def _run_seeds(name: str, scoring: Scoring, model: object, args: argparse.Namespace) -> int:
    """Each seed on the loaded model; a seed whose run failed is named and the next one
    runs, unless it was the first and the first gates the others."""
    from ptb_scorer.engine import EngineFailed, write_json_atomic

    scored = 0
    for i, seed in enumerate(args.seeds):
        try:
            metrics = scoring.score(model, seed)
        except EngineFailed as e:
            emit_seed_failed(seed, f"{type(e).__name__}: {e}")
            if i == 0 and args.first_seed_gates:
                return emit_scorer_error(f"the first seed ({seed}) failed; the other seeds wait until it succeeds")
            continue
        write_json_atomic(seed_output(args.json_output_file, seed), {**scoring.record, **metrics})
        emit_seed_scored(seed, metrics["accuracy"])
        print(f"{name}: seed {seed} accuracy={metrics['accuracy']} n_examples={metrics['n_examples']}", flush=True)
        scored += 1
    return EXIT_SCORED if scored else emit_scorer_error(f"none of the {len(args.seeds)} seeds scored")


def run(name: str) -> None:
    """A task's evaluate.py: ``run("<task>")``."""
    sys.exit(main(name))
