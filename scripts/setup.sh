#!/usr/bin/env bash
# Set up this checkout on a fresh Debian/Ubuntu machine with Python 3.11+: a virtualenv
# in .venv with the harness, the demo's CPU build of torch and the test tools.
# Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup: $PY is not Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    else
        echo "setup: the venv module is missing; install python3-venv (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
# fuse-overlayfs: the HF cache overlay (site.hf_cache_mode: overlay) and its tests
if ! command -v fuse-overlayfs >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse-overlayfs fuse3) >/dev/null \
        || echo "setup: could not install fuse-overlayfs (only the overlay cache mode needs it)" >&2
fi
# Node.js and npm: `ptb-harness setup-agents` installs the agent CLIs with them (the demo
# does not need them)
if ! command -v npm >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >/dev/null \
        || echo "setup: could not install nodejs/npm (only the agent CLIs need them)" >&2
fi
# bubblewrap: the isolating sandbox runtime (site.runtime: bwrap) and its tests; slirp4netns
# and iproute2 (ip): its network (site.network: internet)
if ! (command -v bwrap && command -v slirp4netns && command -v ip) >/dev/null && command -v apt-get >/dev/null \
    && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap slirp4netns iproute2) \
        >/dev/null || echo "setup: could not install bubblewrap, slirp4netns, iproute2 (only site.runtime: bwrap needs them)" >&2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[demo,test]"
# the scorer lock (inspect_ai, inspect_evals, ...): the benchmark tasks' engine on CPU
.venv/bin/python -m pip install -q -r tasks/requirements-scorer.txt
echo "setup: .venv ready ($(.venv/bin/snakemake --version 2>/dev/null | tail -1) snakemake)"
