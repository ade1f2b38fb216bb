#!/usr/bin/env bash
# The editor (ACP) checks, as `make test` runs them: builds `openagents` and the example runners,
# installs the pinned ACP TypeScript SDK and JSON Schema validator (npm ci), runs the node tests
# (the SDK as the editor, every message `openagents acp` writes validated against the schema
# shipped in the SDK package), then one whole turn driven by the official Python ACP package.
# Needs cargo, node/npm and python3; arguments go to node --test.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

echo "== building the openagents binary and the example runners"
(cd "$root" && cargo build --quiet --locked -p openagents-cli -p openagents-runner)

cd "$here"
echo "== npm ci (@agentclientprotocol/sdk and ajv, pinned by package-lock.json)"
npm ci --no-audit --no-fund --silent

echo "== node --test: the TypeScript SDK drives openagents acp"
node --test --test-concurrency=1 "$@" test/*.test.mjs

echo "== pytest: the Python ACP package drives one whole turn"
"$root/clients/python/ensure-venv.sh"
"${OPENAGENTS_VENV:-$root/.venv}/bin/python" -m pytest -q -p no:cacheprovider test_python_client.py
