#!/usr/bin/env bash
# Gemini CLI (npm @google/gemini-cli, pinned in agents/cli; `ptb-harness setup-agents`
# puts `gemini` on PATH) run headless: its stream-json events on stdout are the trace,
# every tool is allowed (--yolo) inside the sandbox, the model is the campaign entry's.
# The CLI talks only to the cell's LLM gateway (PTB_LLM_BASE_URL, outside the sandbox)
# with the cell's token (PTB_LLM_TOKEN) as its key, in the CLI's own credential store
# (its encrypted-file form, $HOME/.gemini/gemini-credentials.json, as Gemini CLI writes it
# when no keychain is there): the real key (api_keys.json: GEMINI_API_KEY) never enters the
# sandbox. Another endpoint: entry env GOOGLE_GEMINI_BASE_URL (the gateway's upstream). On a resume (entry `reprompt: true`;
# the harness sets PTB_RESUME and PTB_RESUME_MESSAGE) the latest session continues.
set -uo pipefail

conf="$HOME/.gemini"
key_file="$conf/gemini-credentials.json"
mkdir -p "$conf"
cli=0
stop() {
    rm -f "$key_file"
    if [ "$cli" != 0 ]; then kill -TERM "$cli" 2>/dev/null; fi
}
trap 'rm -f "$key_file"' EXIT
trap 'stop; exit 143' TERM INT HUP
# Gemini CLI's FileKeychain format (0.61): AES-256-GCM, key scrypt("gemini-cli-oauth",
# "<host>-<user>-gemini-cli"), "iv:tag:ciphertext" in hex, holding the API-key entry. The
# key reaches node on stdin (printf is a builtin): it is in no command line.
export GEMINI_FORCE_FILE_STORAGE=true
printf '%s' "${PTB_LLM_TOKEN:-}" | node -e '
const crypto = require("crypto"), fs = require("fs"), os = require("os");
const apiKey = fs.readFileSync(0, "utf8");
const salt = `${os.hostname()}-${os.userInfo().username}-gemini-cli`;
const secret = crypto.scryptSync("gemini-cli-oauth", salt, 32);
const entry = {serverName: "default-api-key", token: {accessToken: apiKey, tokenType: "ApiKey"}, updatedAt: Date.now()};
const store = {"gemini-cli-api-key": {"default-api-key": JSON.stringify(entry)}};
const iv = crypto.randomBytes(12);
const cipher = crypto.createCipheriv("aes-256-gcm", secret, iv, {authTagLength: 16});
const data = cipher.update(JSON.stringify(store), "utf8", "hex") + cipher.final("hex");
fs.writeFileSync(process.argv[1], [iv.toString("hex"), cipher.getAuthTag().toString("hex"), data].join(":"), {mode: 0o600});
' "$key_file" || exit 2
unset GEMINI_API_KEY GOOGLE_API_KEY
export GOOGLE_GEMINI_BASE_URL="${PTB_LLM_BASE_URL:-}"

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
