#!/usr/bin/env bash
# Gemini CLI (npm @google/gemini-cli, pinned in agents/cli; `ptb-harness setup-agents`
# puts `gemini` on PATH) run headless: its stream-json events on stdout are the trace,
# every tool is allowed (--yolo) inside the sandbox, the model is the campaign entry's.
# The key comes by name only (api_keys.json: GEMINI_API_KEY) and goes into a file the CLI
# reads at start ($HOME/.gemini/.env), removed when this script ends; never printed.
# Another endpoint: entry env GOOGLE_GEMINI_BASE_URL. On a resume (entry `reprompt: true`;
# the harness sets PTB_RESUME and PTB_RESUME_MESSAGE) the latest session continues.
set -uo pipefail

conf="$HOME/.gemini"
key_file="$conf/.env"
mkdir -p "$conf"
cli=0
stop() {
    rm -f "$key_file"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$key_file"' EXIT
trap 'stop; exit 143' TERM INT HUP
# printf is a builtin: the key is in no command line
(umask 077 && printf "GEMINI_API_KEY='%s'\n" "${GEMINI_API_KEY:-}" >"$key_file")
unset GEMINI_API_KEY GOOGLE_API_KEY

# Settings in the job dir's HOME, never the user's: API-key auth (else exit 41), no folder
# trust check (else --yolo is downgraded), no usage statistics, telemetry or update
# checks, no 5-minute limit on silent shell commands (training is silent for long).
cat >"$conf/settings.json" <<'JSON'
{
  "security": {
    "auth": {"selectedType": "gemini-api-key"},
    "folderTrust": {"enabled": false}
  },
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "tools": {"sandbox": false, "shell": {"inactivityTimeout": 36000}}
}
JSON
export GEMINI_SANDBOX=false

args=(--yolo --output-format stream-json)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    args+=(--resume latest "--prompt=$PTB_RESUME_MESSAGE")
else
    args+=("--prompt=$PROMPT")
fi
# in the background, so a TERM at the deadline removes the key file at once
gemini "${args[@]}" </dev/null &
cli=$!
wait "$cli"
