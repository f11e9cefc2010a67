"""Traces of every supported agent CLI, written the way the harness records them: each line
prefixed with a UTC timestamp, with installer output, a traceback and foreign JSON between
the events. The event shapes follow shared/notes/posttrainbench.md."""

from __future__ import annotations

import json
from pathlib import Path

NOISE = [
    "Collecting torch==2.4.0",
    "  Downloading torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl (797.2 MB)",
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "PREFLIGHT OK: 1 GPUs: NVIDIA H200",
]
FOREIGN_JSON = ['{"level": "info", "msg": "wandb: syncing run"}', '{"epoch": 1, "loss": 0.42}']
LONG_OUTPUT = "x" * 5000

EVENTS: dict[str, list[dict]] = {
    "claude": [
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-opus-4-5", "tools": ["Bash", "Edit"], "claude_code_version": "2.1.3", "cwd": "/home/ben/task"},
        {"type": "assistant", "parent_tool_use_id": None, "session_id": "s1", "message": {"id": "msg_01", "model": "claude-opus-4-5", "role": "assistant", "content": [{"type": "thinking", "thinking": "Plan: fine-tune with LoRA."}, {"type": "text", "text": "I will fine-tune the model."}], "usage": {"input_tokens": 100, "output_tokens": 20}}},
        {"type": "assistant", "parent_tool_use_id": None, "session_id": "s1", "message": {"id": "msg_02", "model": "claude-opus-4-5", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "nvidia-smi"}}], "usage": {"input_tokens": 50, "output_tokens": 10}}},
        {"type": "user", "parent_tool_use_id": None, "session_id": "s1", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": LONG_OUTPUT}]}},
        {"type": "user", "parent_tool_use_id": None, "session_id": "s1", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": [{"type": "text", "text": "permission denied"}], "is_error": True}]}},
        {"type": "rate_limit_event", "session_id": "s1"},
        {"type": "result", "subtype": "success", "is_error": False, "num_turns": 7, "duration_ms": 123456, "total_cost_usd": 1.2345, "result": "Saved final_model."},
    ],
    "codex": [
        {"type": "thread.started", "thread_id": "th_1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Check the GPU first."}},
        {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc nvidia-smi", "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc nvidia-smi", "aggregated_output": LONG_OUTPUT, "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "changes": [{"path": "train.py", "kind": "add"}]}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "Training started."}},
        {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 300}},
        {"type": "turn.failed", "error": {"message": "stream disconnected"}},
    ],
    "codex_legacy": [
        {"model": "gpt-5-codex", "provider": "openai", "sandbox": "danger-full-access"},
        {"prompt": "Post-train the model."},
        {"id": "0", "msg": {"type": "agent_reasoning", "text": "Look at the data."}},
        {"id": "0", "msg": {"type": "exec_command_begin", "call_id": "call_1", "command": ["bash", "-lc", "ls"]}},
        {"id": "0", "msg": {"type": "exec_command_end", "call_id": "call_1", "stdout": "train.py\n", "stderr": "", "exit_code": 0}},
        {"id": "0", "msg": {"type": "agent_message", "message": "Done training."}},
        {"id": "0", "msg": {"type": "token_count", "input_tokens": 500, "output_tokens": 80}},
        {"id": "0", "msg": {"type": "error", "message": "rate limited"}},
        {"id": "0", "msg": {"type": "task_complete"}},
    ],
    "gemini": [
        {"type": "init", "timestamp": "2026-11-29T10:00:00.000Z", "session_id": "g1", "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": "2026-11-29T10:00:01.000Z", "role": "user", "content": "Post-train the model."},
        {"type": "message", "timestamp": "2026-11-29T10:00:02.000Z", "role": "assistant", "content": "I will ", "delta": True},
        {"type": "message", "timestamp": "2026-11-29T10:00:02.100Z", "role": "assistant", "content": "start training.", "delta": True},
        {"type": "tool_use", "timestamp": "2026-11-29T10:00:03.000Z", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": {"command": "python train.py"}},
        {"type": "tool_result", "timestamp": "2026-11-29T10:00:09.000Z", "tool_id": "t1", "status": "success", "output": LONG_OUTPUT},
        {"type": "error", "timestamp": "2026-11-29T10:00:10.000Z", "message": "quota exceeded"},
        {"type": "result", "timestamp": "2026-11-29T10:00:11.000Z", "status": "success", "stats": {"total_tokens": 900, "input_tokens": 700, "output_tokens": 200, "tool_calls": 1}},
    ],
    "opencode": [
        {"type": "step_start", "timestamp": 1764410400000, "sessionID": "ses_1", "part": {"id": "prt_1", "type": "step-start"}},
        {"type": "text", "timestamp": 1764410401000, "sessionID": "ses_1", "part": {"id": "prt_2", "type": "text", "text": "Let me train."}},
        {"type": "tool_use", "timestamp": 1764410402000, "sessionID": "ses_1", "part": {"id": "prt_3", "type": "tool", "tool": "bash", "callID": "call_9", "state": {"status": "completed", "input": {"command": "python train.py"}, "output": LONG_OUTPUT}}},
        {"type": "step_finish", "timestamp": 1764410403000, "sessionID": "ses_1", "part": {"id": "prt_4", "type": "step-finish", "tokens": {"input": 300, "output": 40, "reasoning": 5}, "cost": 0.02}},
        {"type": "error", "timestamp": 1764410404000, "sessionID": "ses_1", "error": {"message": "provider error"}},
    ],
    "cursor": [
        {"type": "system", "subtype": "init", "apiKeySource": "env", "cwd": "/home/ben/task", "session_id": "c1", "model": "gpt-5", "permissionMode": "default"},
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "Post-train the model."}]}, "session_id": "c1"},
        {"type": "thinking", "subtype": "delta", "text": "Consider", "session_id": "c1", "timestamp_ms": 1764410400000},
        {"type": "thinking", "subtype": "delta", "text": " Lo", "session_id": "c1", "timestamp_ms": 1764410400010},
        {"type": "thinking", "subtype": "delta", "text": "RA.", "session_id": "c1", "timestamp_ms": 1764410400020},
        {"type": "thinking", "subtype": "completed", "session_id": "c1", "timestamp_ms": 1764410400030},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Starting the run."}]}, "session_id": "c1"},
        {"type": "tool_call", "subtype": "started", "call_id": "cc1\nfc_2", "tool_call": {"shellToolCall": {"args": {"command": "python train.py"}}}, "session_id": "c1", "timestamp_ms": 1764410401000},
        {"type": "tool_call", "subtype": "completed", "call_id": "cc1\nfc_2", "tool_call": {"shellToolCall": {"args": {"command": "python train.py"}, "result": {"success": {"stdout": LONG_OUTPUT}}}}, "session_id": "c1", "timestamp_ms": 1764410402000},
        {"type": "result", "subtype": "success", "duration_ms": 5000, "is_error": False, "result": "Finished.", "session_id": "c1"},
    ],
}  # fmt: skip

GEMINI_JSON = {
    "response": "I fine-tuned the model and saved it.",
    "stats": {"models": {"gemini-2.5-pro": {"tokens": {"prompt": 1200, "candidates": 300, "total": 1500}}}},
}

#: what each transcript must contain
EXPECT = {
    "claude": ["cli version: 2.1.3", "model: claude-opus-4-5", "THINKING: Plan: fine-tune with LoRA.", "ASSISTANT: I will fine-tune the model.", 'TOOL CALL Bash (toolu_01): {"command": "nvidia-smi"}', "TOOL RESULT (toolu_01): xxx", "TOOL RESULT (toolu_02) ERROR: permission denied", "RESULT: success, 7 turns", "cost: $1.2345", "input_tokens 150"],
    "codex": ["THINKING: Check the GPU first.", "TOOL CALL shell (item_1): bash -lc nvidia-smi", "TOOL RESULT (item_1) exit 0: xxx", "TOOL CALL apply_patch (item_2): add train.py", "ASSISTANT: Training started.", "ERROR: stream disconnected", "output_tokens 300"],
    "codex_legacy": ["USER: Post-train the model.", "THINKING: Look at the data.", 'TOOL CALL shell (call_1): ["bash", "-lc", "ls"]', "TOOL RESULT (call_1) exit 0: train.py", "ASSISTANT: Done training.", "ERROR: rate limited", "model: gpt-5-codex"],
    "gemini": ["model: gemini-2.5-pro", "USER: Post-train the model.", "ASSISTANT: I will start training.", 'TOOL CALL run_shell_command (t1): {"command": "python train.py"}', "TOOL RESULT (t1): xxx", "ERROR: quota exceeded", "total_tokens 900"],
    "opencode": ["ASSISTANT: Let me train.", 'TOOL CALL bash (call_9): {"command": "python train.py"}', "TOOL RESULT (call_9): xxx", "ERROR: provider error", "cost: $0.0200", "input 300"],
    "cursor": ["model: gpt-5", "USER: Post-train the model.", "THINKING: Consider LoRA.", "ASSISTANT: Starting the run.", 'TOOL CALL shellToolCall (cc1\\nfc_2): {"command": "python train.py"}', "TOOL RESULT (cc1\\nfc_2): ", "RESULT: 5000 ms: Finished."],
    "gemini_json": ["ASSISTANT: I fine-tuned the model and saved it.", "model: gemini-2.5-pro", "total 1,500"],
}  # fmt: skip

STAMP = "[2026-11-29T10:00:00Z] "


def write_trace(path: Path, fmt: str, *, noise: bool = True, truncate_last: bool = False) -> Path:
    """The events of fmt, one per line, stamped, with noise and foreign JSON between."""
    lines: list[str] = []
    if noise:
        lines += [STAMP + n for n in NOISE[:2]]
    for i, event in enumerate(EVENTS[fmt]):
        lines.append(STAMP + json.dumps(event))
        if noise and i == 1:
            lines += [STAMP + n for n in NOISE[2:]] + [STAMP + j for j in FOREIGN_JSON]
    if truncate_last:
        lines.append(STAMP + json.dumps(EVENTS[fmt][-1])[:25])
    path.write_text("\n".join(lines) + ("" if truncate_last else "\n"))
    return path


#: what Gemini CLI (--output-format json) prints around its one object
GEMINI_JSON_AROUND = ("Loaded cached credentials.", "Shutting down.")


def write_gemini_json(path: Path) -> Path:
    lines = [GEMINI_JSON_AROUND[0], *json.dumps(GEMINI_JSON, indent=2).splitlines(), GEMINI_JSON_AROUND[1]]
    path.write_text("\n".join(STAMP + line for line in lines) + "\n")
    return path


#: An aider log (its own plain-text chat) into which another tool's session JSON was
#: interleaved, ending in one line that looks like a Claude Code result. Written for this
#: test: six foreign JSON lines, four text lines, and that last line.
AIDER_MIXED = [
    '{"session": "a1", "event": "start", "cwd": "/home/ben/task"}',
    "aider v0.86.1 -- model: openai/gpt-5, edit format: diff",
    '{"session": "a1", "event": "tokens", "sent": 1200, "received": 80}',
    "ASSISTANT: I will add a LoRA training script in train.py.",
    '{"session": "a1", "event": "edit", "file": "train.py"}',
    "TOOL: run_command python train.py --epochs 1",
    '{"session": "a1", "event": "cost", "usd": 0.01}',
    "Applied edit to train.py",
    '{"session": "a1", "event": "commit", "sha": "abc1234"}',
    '{"session": "a1", "event": "exit", "code": 0}',
    '{"type": "result", "num_turns": 1}',
]


def write_aider_mixed(path: Path) -> Path:
    path.write_text("".join(STAMP + line + "\n" for line in AIDER_MIXED))
    return path
