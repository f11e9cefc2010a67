#!/usr/bin/env bash
# Claude Code (npm @anthropic-ai/claude-code, pinned in agents/cli; `ptb-harness
# setup-agents` puts `claude` on PATH) run headless: its stream-json events on stdout are
# the trace, every tool is allowed inside the sandbox, the model is the campaign entry's.
# The key comes by name only (api_keys.json): ANTHROPIC_API_KEY, or ANTHROPIC_AUTH_TOKEN
# for an Anthropic-compatible provider (entry env: ANTHROPIC_BASE_URL). Never printed.
# On a resume (entry `reprompt: true`; the harness sets PTB_RESUME and
# PTB_RESUME_MESSAGE) the same session continues (`claude --continue`).
set -uo pipefail

# as root (containers) --dangerously-skip-permissions is refused unless IS_SANDBOX=1
export IS_SANDBOX=1
# nothing but the model API: no telemetry, error reports, update checks, feedback
export DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 DISABLE_BUG_COMMAND=1
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
# NOT CLAUDE_CODE_SUBPROCESS_ENV_SCRUB=1: it would keep the key out of tool commands, but
# Claude Code 2.1.332 then refuses every command naming a variable ("A variable in this
# command can't be checked before it runs"), $MODEL_TO_TRAIN included. The sanitizer
# redacts the key's value from the traces.
# long training commands: the Bash tool's limit is the budget's business, not the CLI's
export BASH_DEFAULT_TIMEOUT_MS=${BASH_DEFAULT_TIMEOUT_MS:-600000} BASH_MAX_TIMEOUT_MS=36000000

# the CLI's settings live in the job dir's HOME, never the user's
mkdir -p "$HOME/.claude"
cat > "$HOME/.claude/settings.json" <<'JSON'
{"permissions": {"defaultMode": "bypassPermissions"}, "autoUpdates": false, "includeCoAuthoredBy": false}
JSON

args=(-p --output-format stream-json --verbose --dangerously-skip-permissions)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    exec claude --continue "${args[@]}" "$PTB_RESUME_MESSAGE" </dev/null
fi
exec claude "${args[@]}" "$PROMPT" </dev/null
