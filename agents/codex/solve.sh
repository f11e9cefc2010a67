#!/usr/bin/env bash
# Codex (npm @openai/codex, pinned in agents/cli; `ptb-harness setup-agents` puts `codex`
# on PATH) run headless: `codex exec --json` events on stdout are the trace, no approvals
# and no inner sandbox (the harness's sandbox is the fence), the model is the campaign
# entry's. The key comes by name only (api_keys.json: OPENAI_API_KEY) and is never
# printed; the provider's URL is OPENAI_BASE_URL (entry env), default OpenAI's.
# On a resume (entry `reprompt: true`; the harness sets PTB_RESUME and
# PTB_RESUME_MESSAGE) the same session continues (`codex exec resume --last`).
set -uo pipefail

# the CLI's config lives in the job dir's HOME, never the user's
export CODEX_HOME="$HOME/.codex"
mkdir -p "$CODEX_HOME"
toml_string() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
cat > "$CODEX_HOME/config.toml" <<TOML
model_provider = "ptb"
approval_policy = "never"
sandbox_mode = "danger-full-access"
model_reasoning_summary = "detailed"
check_for_update_on_startup = false

[model_providers.ptb]
name = "ptb"
base_url = $(toml_string "${OPENAI_BASE_URL:-https://api.openai.com/v1}")
env_key = "OPENAI_API_KEY"
wire_api = "responses"

# tool commands see the whole environment but the provider's key, which stays with the
# CLI (other variables a site passes on purpose, e.g. HF_TOKEN, stay usable)
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

args=(--json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --strict-config)
[ -n "${AGENT_MODEL:-}" ] && args+=(--model "$AGENT_MODEL")
if [ -n "${PTB_RESUME:-}" ]; then
    exec codex exec resume --last "${args[@]}" "$PTB_RESUME_MESSAGE" </dev/null
fi
exec codex exec "${args[@]}" "$PROMPT" </dev/null
