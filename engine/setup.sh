#!/usr/bin/env bash
# Make the Python environment for floe's engine and trainer: a venv at
# $FLOE_HOME/venv (default <repo>/.floe/venv) that sees the system's torch
# (--system-site-packages) and gets only safetensors (+ pytest if absent) from PyPI,
# then `pip install -e engine`. Idempotent: skips everything when the stamp
# matches requirements.txt + pyproject.toml + the base interpreter.
#   FLOE_HOME     where the venv lives        (default <repo>/.floe)
#   FLOE_PYTHON   base interpreter with torch (default: /usr/bin/python3 if it has
#                 torch, else python3 if it has torch, else Debian's python3-torch is installed)
set -euo pipefail
say() { echo "[floe engine] $*" >&2; }

engine_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(dirname "$engine_dir")"
FLOE_HOME="${FLOE_HOME:-$repo_dir/.floe}"
venv="$FLOE_HOME/venv"

has_torch() { "$1" -c 'import torch' >/dev/null 2>&1; }

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

# 1. a base interpreter that has torch
base="${FLOE_PYTHON:-}"
if [ -z "$base" ]; then
  if [ -x /usr/bin/python3 ] && has_torch /usr/bin/python3; then base=/usr/bin/python3
  elif command -v python3 >/dev/null 2>&1 && has_torch "$(command -v python3)"; then base="$(command -v python3)"
  else
    say "no interpreter with torch found: installing Debian's python3-torch (CPU)"
    apt_install python3-torch python3-venv
    base=/usr/bin/python3
  fi
fi
has_torch "$base" || { say "$base cannot import torch; set FLOE_PYTHON to an interpreter that can"; exit 1; }

# 2. Debian's torch links the generic libblas.so.3; with only the reference BLAS
#    installed it runs ~15x slower than with OpenBLAS, so make sure OpenBLAS provides it.
if [ "$base" = /usr/bin/python3 ] && command -v dpkg >/dev/null 2>&1 \
   && dpkg -s python3-torch >/dev/null 2>&1 && ! dpkg -s libopenblas0-pthread >/dev/null 2>&1 \
   && ! dpkg -s libopenblas0-openmp >/dev/null 2>&1 && ! dpkg -s libopenblas0-serial >/dev/null 2>&1; then
  say "Debian torch is using the reference BLAS: installing OpenBLAS"
  apt_install libopenblas0-pthread
fi
if ! "$base" -m venv --help >/dev/null 2>&1 || ! "$base" -c 'import ensurepip' >/dev/null 2>&1; then
  [ "$base" = /usr/bin/python3 ] && apt_install python3-venv
fi

# 3. the venv, if the stamp is stale
want="$(hash_inputs) $base"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  say "venv up to date ($venv)"
  exit 0
fi
if [ -x "$venv/bin/python" ] && ! has_torch "$venv/bin/python"; then
  say "existing venv cannot see torch: recreating it"; rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating venv $venv (from $base, --system-site-packages)"
  mkdir -p "$FLOE_HOME"
  "$base" -m venv --system-site-packages "$venv"
fi
py="$venv/bin/python"
say "pip install -r engine/requirements.txt"
"$py" -m pip install -q --disable-pip-version-check -r "$engine_dir/requirements.txt" >&2
if ! "$py" -c 'import pytest' >/dev/null 2>&1; then
  say "pip install pytest (not found on the system)"
  "$py" -m pip install -q --disable-pip-version-check 'pytest>=7' >&2
fi
say "pip install -e engine"
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e "$engine_dir" >&2
"$py" -c 'import torch, safetensors, floe_engine; print("[floe engine] ready: torch", torch.__version__, "python", __import__("sys").version.split()[0])' >&2
echo "$want" > "$stamp"
