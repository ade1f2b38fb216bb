#!/usr/bin/env bash
# ACP agents as runners, end to end: builds the binaries, installs the pinned ACP SDKs (npm ci
# here; the Python virtualenv through clients/python/ensure-venv.sh; the TypeScript client's build),
# then drives the fake agents through the real `openagents run`, `serve --http`, `serve --stdio`
# and the WebSocket, with the shipped Python and TypeScript clients too. `make test-acp-agents`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

(cd "$root" && "${CARGO:-cargo}" build --locked -p openagents-cli -p openagents-runner)
bash "$root/clients/python/ensure-venv.sh"
# The shipped TypeScript client, built (as `make test-typescript` leaves it) unless it is already.
if [ ! -f "$root/clients/typescript/dist/node.js" ]; then
    (cd "$root/clients/typescript" && npm ci --no-audit --no-fund --silent && npm run --silent build)
fi
cd "$here"
npm ci --no-audit --no-fund --silent
node --test --test-concurrency=1 --test-timeout=120000 test/
