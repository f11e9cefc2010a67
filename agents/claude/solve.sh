#!/usr/bin/env bash
# Claude Code (npm @anthropic-ai/claude-code, pinned in agents/cli; `ptb-harness
# setup-agents` puts `claude` on PATH) run headless: its stream-json events on stdout are
# the trace, every tool is allowed inside the sandbox, the model is the campaign entry's.
# The CLI talks only to the cell's LLM gateway (PTB_LLM_BASE_URL, outside the sandbox),
# with the cell's token (PTB_LLM_TOKEN) as its key: the real key (api_keys.json:
# ANTHROPIC_API_KEY, or ANTHROPIC_AUTH_TOKEN for an Anthropic-compatible provider, whose
# URL in the entry's ANTHROPIC_BASE_URL is the gateway's upstream) never enters the
# sandbox. The token goes into a file Claude Code reads through its apiKeyHelper.
# On a resume (entry `reprompt: true`; the harness sets PTB_RESUME and
# PTB_RESUME_MESSAGE) the same session continues (`claude --continue`).
set -uo pipefail

# as root (containers) --dangerously-skip-permissions is refused unless IS_SANDBOX=1
export IS_SANDBOX=1
# nothing but the model API: no telemetry, error reports, update checks, feedback
export DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 DISABLE_BUG_COMMAND=1
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
# (not CLAUDE_CODE_SUBPROCESS_ENV_SCRUB=1, which would also hide the key from tool
# commands: Claude Code 2.1.332 then refuses every command naming a variable, "A variable
# in this command can't be checked before it runs", $MODEL_TO_TRAIN included)
# long training commands: the Bash tool's limit is the budget's business, not the CLI's
export BASH_DEFAULT_TIMEOUT_MS=${BASH_DEFAULT_TIMEOUT_MS:-600000} BASH_MAX_TIMEOUT_MS=36000000

# the CLI's settings live in the job dir's HOME, never the user's
mkdir -p "$HOME/.claude"
key_file="$HOME/.claude/.api-key"
cli=0
stop() {
    rm -f "$key_file"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$key_file"' EXIT
trap 'stop; exit 143' TERM INT HUP
# printf is a builtin: the token is in no command line
(umask 077 && printf '%s' "${PTB_LLM_TOKEN:-}" >"$key_file")
unset ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN
export ANTHROPIC_BASE_URL="${PTB_LLM_BASE_URL:-}"
cat >"$HOME/.claude/settings.json" <<'JSON'
{
  "apiKeyHelper": "cat \"$HOME/.claude/.api-key\"",
  "permissions": {"defaultMode": "bypassPermissions"},
  "autoUpdates": false,
  "includeCoAuthoredBy": false
}
JSON

args=(-p --output-format stream-json --verbose --dangerously-skip-permissions)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    args=(--continue "${args[@]}" "$PTB_RESUME_MESSAGE")
else
    args+=("$PROMPT")
fi
# in the background, so a TERM at the deadline removes the key file at once
claude "${args[@]}" </dev/null &
cli=$!
wait "$cli"
