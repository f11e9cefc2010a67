#!/usr/bin/env bash
# OpenCode (npm opencode-ai, pinned in agents/cli; `ptb-harness setup-agents` puts
# `opencode` on PATH) run headless: `opencode run --format json` events on stdout are the
# trace, every tool is allowed ("permission": "allow") inside the sandbox, the model is
# the campaign entry's, served by one OpenAI-compatible provider ("ptb", through the
# bundled @ai-sdk/openai-compatible) at the cell's LLM gateway (PTB_LLM_BASE_URL, outside
# the sandbox), with the cell's token (PTB_LLM_TOKEN) as its key in a file the config names
# ({file:...}): the real key (api_keys.json: OPENROUTER_API_KEY) never enters the sandbox.
# The provider's URL (entry env OPENCODE_BASE_URL; default OpenRouter) is the gateway's upstream.
# Optional entry env OPENCODE_PRICE_INPUT / _OUTPUT / _CACHE_READ (USD per million tokens)
# make the trace state the cost. On a resume (entry `reprompt: true`; the harness sets
# PTB_RESUME and PTB_RESUME_MESSAGE) the latest session continues (--continue).
set -uo pipefail

conf="${XDG_CONFIG_HOME:-$HOME/.config}/opencode"
key_file="$conf/provider.key"
mkdir -p "$conf/node_modules"
cli=0
stop() {
    rm -f "$key_file"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$key_file"' EXIT
trap 'stop; exit 143' TERM INT HUP
# printf is a builtin: the key is in no command line
(umask 077 && printf '%s' "${PTB_LLM_TOKEN:-}" >"$key_file")
unset OPENROUTER_API_KEY

model="${AGENT_MODEL:-}"
base_url="${PTB_LLM_BASE_URL:-}"
for value in "$model" "$base_url" "${OPENCODE_PRICE_INPUT:-}" "${OPENCODE_PRICE_OUTPUT:-}" "${OPENCODE_PRICE_CACHE_READ:-}"; do
    case "$value" in *[\"\\]* | *[[:cntrl:]]*)
        echo "opencode solve.sh: the model, PTB_LLM_BASE_URL and OPENCODE_PRICE_* must not hold quotes, backslashes or control characters" >&2
        exit 2
        ;;
    esac
done
if [ -z "$model" ]; then
    echo "opencode solve.sh: the campaign entry names no model (agents: [{name, dir: opencode, model}])" >&2
    exit 2
fi
cost=""
if [ -n "${OPENCODE_PRICE_INPUT:-}" ] && [ -n "${OPENCODE_PRICE_OUTPUT:-}" ]; then
    cost=", \"cost\": {\"input\": $OPENCODE_PRICE_INPUT, \"output\": $OPENCODE_PRICE_OUTPUT, \"cache_read\": ${OPENCODE_PRICE_CACHE_READ:-0}}"
fi
# The config in the job dir's HOME, never the user's: one provider, all permissions, no
# sharing or auto-update.
cat >"$conf/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "ptb": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "PostTrainBench provider",
      "options": {"baseURL": "$base_url", "apiKey": "{file:$key_file}"},
      "models": {"$model": {"name": "$model"$cost}}
    }
  },
  "model": "ptb/$model",
  "permission": "allow",
  "autoupdate": false,
  "share": "disabled"
}
JSON
# OpenCode installs @opencode-ai/plugin from the npm registry into every config dir at
# start unless node_modules exists and package-lock.json lists it: say it is there.
echo '{"dependencies": {"@opencode-ai/plugin": "*"}}' >"$conf/package.json"
echo '{"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}' >"$conf/package-lock.json"
# No models.dev catalogue fetch, default plugins, LSP downloads, update checks, sharing or
# project config (the agent cannot repoint its own provider on a resume); shell commands
# get 10 minutes unless the model asks for more (default 2).
export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1
export OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_PROJECT_CONFIG=1
export OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS=600000

args=(run --format json --model "ptb/$model")
if [ -n "${PTB_RESUME:-}" ]; then
    args+=(--continue -- "$PTB_RESUME_MESSAGE")
else
    args+=(-- "$PROMPT")
fi
# in the background, so a TERM at the deadline removes the key file at once
opencode "${args[@]}" </dev/null &
cli=$!
wait "$cli"
