#!/usr/bin/env bash
# ACP agents as runners, end to end: builds the binaries, installs the pinned ACP SDKs (npm ci
# here; the Python virtualenv through clients/python/ensure-venv.sh), then drives the fake agents
# through the real `openagents run`, `serve --http` and the WebSocket. `make test-acp-agents`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

(cd "$root" && "${CARGO:-cargo}" build --locked -p openagents-cli -p openagents-runner)
bash "$root/clients/python/ensure-venv.sh"
cd "$here"
npm ci --no-audit --no-fund --silent
node --test --test-concurrency=1 --test-timeout=120000 test/
