#!/usr/bin/env bash
# The standards tests, as `make test` runs them: third-party clients and parsers (the strict
# JSON-RPC 2.0 clients jsonrpcclient and the npm package json-rpc-2.0, an EventSource-style
# reader, the Prometheus text-format parser) against the real `openagents serve --http`.
# Creates .venv at the repository root if it is missing (clients/python/ensure-venv.sh, which
# pins every package), builds the binary and the example runners, runs pytest on
# tests/standards (arguments go to pytest), then installs tests/standards/js from its lock file
# (npm ci) and runs its node tests.
# Needs only python3 (3.10 or newer), Node.js (20 or newer) and cargo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${OPENAGENTS_VENV:-$root/.venv}"

echo "== the Python test environment ($venv)"
"$root/clients/python/ensure-venv.sh"

echo "== building the openagents binary and the example runners"
(cd "$root" && cargo build --quiet --locked -p openagents-cli -p openagents-runner)

echo "== pytest tests/standards"
cd "$root"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/standards "$@"

echo "== json-rpc-2.0 (npm) against serve --http"
cd "$here/js"
npm ci --no-audit --no-fund --silent
node --test
