#!/usr/bin/env bash
# First step of `npm run demo` and `npm test`: make sure the Node packages match the lockfile.
# Everything else (Temporal, Postgres, podman, the sandbox image, Python) is `floe up`'s job.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=node_modules/.floe-lock-hash
want=$(sha256sum package-lock.json | cut -c1-64)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[floe up] npm        installing Node packages (npm ci)…" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
