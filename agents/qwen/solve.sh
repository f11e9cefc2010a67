#!/usr/bin/env bash
# Qwen Code (npm @qwen-code/qwen-code, pinned in agents/cli; `ptb-harness setup-agents`
# puts `qwen` on PATH) run headless: its stream-json events on stdout are the trace, every
# tool is allowed (--yolo) inside the sandbox, the model is the campaign entry's, spoken
# to over the OpenAI-compatible Chat Completions API.
# The CLI talks only to the cell's LLM gateway (PTB_LLM_BASE_URL, outside the sandbox)
# with the cell's token (PTB_LLM_TOKEN) as its key in its settings file
# ($HOME/.qwen/settings.json, security.auth.apiKey): the real key (api_keys.json:
# DASHSCOPE_API_KEY, Alibaba Model Studio) never enters the sandbox. The provider's URL
# (entry env OPENAI_BASE_URL; default Model Studio's international OpenAI-compatible
# endpoint) is the gateway's upstream. On a resume (entry `reprompt:
# true`; the harness sets PTB_RESUME and PTB_RESUME_MESSAGE) the latest session continues.
set -uo pipefail

conf="$HOME/.qwen"
key_file="$conf/settings.json"
mkdir -p "$conf"
cli=0
stop() {
    rm -f "$key_file"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$key_file"' EXIT
trap 'stop; exit 143' TERM INT HUP
key="${PTB_LLM_TOKEN:-}"
unset DASHSCOPE_API_KEY OPENAI_API_KEY
case "$key" in *[\"\\]* | *[[:cntrl:]]*)
    echo "qwen solve.sh: PTB_LLM_TOKEN holds a quote, backslash or control character" >&2
    exit 2
    ;;
esac
export OPENAI_BASE_URL="${PTB_LLM_BASE_URL:-}"

# Settings in the job dir's HOME, never the user's: OpenAI-compatible auth with the key,
# no folder trust check, no usage statistics (else it reports to an Aliyun RUM host),
# telemetry or update checks; shell commands get 10 minutes unless the model asks for
# more (default 2). printf is a builtin: the key is in no command line.
(umask 077 && printf '%s' '{
  "security": {
    "auth": {"selectedType": "openai", "apiKey": "' "$key" '"},
    "folderTrust": {"enabled": false}
  },
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false},
  "tools": {"shell": {"defaultTimeoutMs": 600000}}
}
' >"$key_file")
unset key
export QWEN_CODE_SUPPRESS_YOLO_WARNING=1

args=(--yolo --output-format stream-json)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    args+=(--continue "--prompt=$PTB_RESUME_MESSAGE")
else
    args+=("--prompt=$PROMPT")
fi
# in the background, so a TERM at the deadline removes the key file at once
qwen "${args[@]}" </dev/null &
cli=$!
wait "$cli"
