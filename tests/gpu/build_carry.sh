#!/usr/bin/env bash
# Build .carry/site.tar.xz, the Python packages the device machine lacks for the scorer's
# GPU scripts (device_attention.sh, device_seeds.sh): the scorer lock's inspect_ai,
# inspect_evals, datasets and openai (tasks/requirements-scorer.txt) with their closure,
# as wheels for the machine's Python 3.12 on x86_64, from the repo root:
#
#     bash tests/gpu/build_carry.sh          # then: run(..., carry=[".carry"])
#
# The machine's own packages (the device tool's KINDS.md, "Python packages already there")
# are left out, torch and transformers among them; what the scorer's imports need and the
# machine lacks stays in, each found missing there once (2026-12-07): botocore, zstandard,
# openai (ptb_scorer.hf_backend imports inspect's OpenAI message helpers). inspect_evals is
# trimmed to the scorer's tasks and inspect's sandbox-tool binaries are dropped, so the
# archive fits the device call's 64 MiB (about 37 MB). `.carry/` is git-ignored through
# .git/info/exclude, not .gitignore: it must not reach CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pins=$(grep -E '^(inspect_ai|inspect_evals|datasets|openai)==' tasks/requirements-scorer.txt)
# shellcheck disable=SC2086
python3 -m pip install -q --disable-pip-version-check --target "$work/site" --python-version 3.12 \
    --implementation cp --only-binary=:all: --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 $pins
cd "$work/site"
# the machine's own (same or compatible versions there)
for p in numpy numpy.libs pandas pyarrow PIL pillow.libs pygments aiohttp hf_xet huggingface_hub yaml _yaml \
    attr attrs certifi charset_normalizer click filelock frozenlist fsspec h11 httpcore httpx idna jinja2 \
    markupsafe multidict propcache yarl requests urllib3 six dateutil tqdm psutil typing_extensions.py rich \
    markdown_it mdurl packaging xxhash mpmath sympy networkx regex tiktoken; do
    rm -rf -- "$p" "$p"-*.dist-info "${p//_/-}"-*.dist-info
done
# inspect_evals: the scorer's tasks and their shared modules only
keep=" gsm8k humaneval gpqa bfcl aime2025 aime2026 utils "
for d in inspect_evals/*/; do
    name=$(basename "$d")
    case "$keep" in *" $name "*) ;; *) rm -rf "$d" ;; esac
done
rm -rf inspect_ai/binaries/* bin
find . -name __pycache__ -prune -exec rm -rf {} +
cd - >/dev/null
mkdir -p .carry
grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
XZ_OPT=-3 tar -C "$work/site" -cJf .carry/site.tar.xz .
ls -l .carry/site.tar.xz
