#!/usr/bin/env bash
# Codex (npm @openai/codex, pinned in agents/cli; `ptb-harness setup-agents` puts `codex`
# on PATH) run headless: `codex exec --json` events on stdout are the trace, no approvals
# and no inner sandbox (the harness's sandbox is the fence), the model is the campaign
# entry's. The CLI talks only to the cell's LLM gateway (PTB_LLM_BASE_URL, outside the
# sandbox) with the cell's token (PTB_LLM_TOKEN) as its bearer token in its config: the
# real key (api_keys.json: OPENAI_API_KEY) never enters the sandbox. The provider's URL
# (entry env OPENAI_BASE_URL, default OpenAI's) is the gateway's upstream.
# On a resume (entry `reprompt: true`; the harness sets PTB_RESUME and
# PTB_RESUME_MESSAGE) the same session continues (`codex exec resume --last`).
set -uo pipefail

# the CLI's config lives in the job dir's HOME, never the user's
export CODEX_HOME="$HOME/.codex"
mkdir -p "$CODEX_HOME"
config="$CODEX_HOME/config.toml"
cli=0
stop() {
    rm -f "$config"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$config"' EXIT
trap 'stop; exit 143' TERM INT HUP
# a TOML string; printf is a builtin, so the key is in no command line
toml_string() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
prev_umask=$(umask)
umask 077 # the config holds the key: owner only
cat >"$config" <<TOML
model_provider = "ptb"
approval_policy = "never"
sandbox_mode = "danger-full-access"
model_reasoning_summary = "detailed"
check_for_update_on_startup = false

[model_providers.ptb]
name = "ptb"
base_url = $(toml_string "${PTB_LLM_BASE_URL:-}")
experimental_bearer_token = $(toml_string "${PTB_LLM_TOKEN:-}")
wire_api = "responses"

# tool commands see the whole environment (the key is not in it; excluded by name as
# well), so variables a site passes on purpose, e.g. HF_TOKEN, stay usable
[shell_environment_policy]
inherit = "all"
ignore_default_excludes = true
exclude = ["OPENAI_API_KEY", "CODEX_API_KEY"]

[analytics]
enabled = false

# no plugin marketplace (git clones from github.com), ChatGPT apps/connectors or remote
# plugins (chatgpt.com): the model provider is the only host the CLI talks to
[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
tool_suggest = false
in_app_updates = false

[projects.$(toml_string "$PWD")]
trust_level = "trusted"
TOML
umask "$prev_umask"
unset OPENAI_API_KEY CODEX_API_KEY

args=(--json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --strict-config)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    args=(resume --last "${args[@]}" "$PTB_RESUME_MESSAGE")
else
    args+=("$PROMPT")
fi
# in the background, so a TERM at the deadline removes the config (and its key) at once
codex exec "${args[@]}" </dev/null &
cli=$!
wait "$cli"
