"""The command line every task's evaluate.py shares (the harness's contract):

    python evaluate.py [--model-path DIR] [--json-output-file FILE] [--limit N (-1 = all)]
                       [--max-tokens N | --max-new-tokens N] [--backend auto|vllm|hf]
                       [--base-architecture ARCH] [--chat-template FILE | --chat-template-from DIR]
                       [--prompt-log FILE]

One ``main`` for every task: a task's info.json gives its defaults (``agent_default_limit``,
the first ladder stage's ``max_tokens``) and says whether a grader model grades it
(``uses_grader``: :mod:`ptb_scorer.graded`, whose cap flag is ``--max-new-tokens`` as
upstream's). Prompts are rendered with the chat template the harness wrote beside
evaluate.py (ptb_chat_template.json: the base model's own; ptb_scorer.chat_template),
never the final model's. Writes FILE (atomically) only for a successful run: accuracy,
stderr, n_examples, the engine and its version, the chat template's source, sha256 and
variables, the dataset revisions. Prints ``PTB_SCORER_INFO {json}`` before scoring, and on failure exactly one
line of :mod:`ptb_scorer.protocol`, no traceback for known causes.
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
)
from ptb_scorer.task_info import TaskInfo, attempt_record, engine_for


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
    print(
        f"{name}: {info.cap_name}={getattr(args, info.cap_name)} limit={args.limit} backend={args.backend}", flush=True
    )
    print(f"argv: {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
    from ptb_scorer.llm_client import LLMUnavailable

    try:
        if info.uses_grader:
            from ptb_scorer import graded

            return graded.score(name, info, args)
        return _score(name, info, args)
    except ModelInvalid as e:
        return emit_model_invalid(e)
    except data.DataMissing as e:
        return emit_scorer_error(f"dataset missing: {e}", EXIT_DATA_MISSING)
    except TemplateError as e:
        return emit_scorer_error(f"chat template: {e}")
    except LLMUnavailable as e:
        return emit_grader_failed(e)
    except Exception as e:
        from ptb_scorer.engine import EngineFailed

        if not isinstance(e, EngineFailed):  # an unknown failure: the traceback helps, then one line
            traceback.print_exc()
        why = str(e).strip().splitlines()[-1][:300] if str(e).strip() else ""
        return emit_scorer_error(f"{type(e).__name__}: {why}")


def _score(name: str, info: TaskInfo, args: argparse.Namespace) -> int:
    from ptb_scorer import engine
    from ptb_scorer.tasks import TASKS

    task_def = TASKS[name]
    checked = check_model(Path(args.model_path), args.base_architecture)
    check_loadable(checked.path)
    data.require(info.datasets)
    backend, template, spec = engine_for(args, info, checked, args.max_tokens)
    record = {
        **attempt_record(name, info, args, checked, backend, template),
        **task_def.record(),
    }
    emit_info(record)
    metrics = engine.run_task(task_def.build(), spec, limit=args.limit)
    engine.write_json_atomic(Path(args.json_output_file), {**record, **metrics})
    print(f"{name}: accuracy={metrics['accuracy']} n_examples={metrics['n_examples']}", flush=True)
    return EXIT_SCORED


def run(name: str) -> None:
    """A task's evaluate.py: ``run("<task>")``."""
    sys.exit(main(name))
