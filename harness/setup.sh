#!/usr/bin/env bash
# Make the grading harness environment: a venv at $FLOE_HOME/harness-venv (default
# <repo>/.floe/harness-venv) with the official swebench package (requirements.txt) and
# `pip install -e harness`. Kept apart from the engine venv: swebench pulls in datasets,
# docker and friends, which the engine does not need. Idempotent (a stamp of the inputs).
#   FLOE_HOME     where the venv lives     (default <repo>/.floe)
#   FLOE_PYTHON   base interpreter >= 3.10 (default: /usr/bin/python3, else python3)
set -euo pipefail
say() { echo "[floe harness] $*" >&2; }
harness_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(dirname "$harness_dir")"
FLOE_HOME="${FLOE_HOME:-$repo_dir/.floe}"
venv="$FLOE_HOME/harness-venv"
base="${FLOE_PYTHON:-}"
if [ -z "$base" ]; then
  if [ -x /usr/bin/python3 ]; then base=/usr/bin/python3; else base="$(command -v python3)"; fi
fi
want="$(cat "$harness_dir/requirements.txt" "$harness_dir/pyproject.toml" | sha256sum | cut -c1-64) $base"
stamp="$venv/.floe-harness-stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  say "venv up to date ($venv)"
  exit 0
fi
"$base" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { say "$base is older than Python 3.10; set FLOE_PYTHON to a newer interpreter"; exit 1; }
say "creating $venv (swebench 4.1.0 and its dependencies from PyPI, about a minute)…"
rm -rf "$venv"
"$base" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$harness_dir/requirements.txt" >&2
"$venv/bin/python" -m pip install -q --no-deps -e "$harness_dir" >&2
"$venv/bin/python" -c 'import floe_harness.grading.swebench_rules' >&2
echo "$want" > "$stamp"
say "ready ($venv)"
