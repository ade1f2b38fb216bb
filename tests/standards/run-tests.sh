#!/usr/bin/env bash
# The standards tests, as `make test` runs them: third-party clients and parsers (a strict
# JSON-RPC 2.0 client, an EventSource-style reader, the Prometheus text-format parser) against
# the real `openagents serve --http`. Creates .venv at the repository root if it is missing
# (clients/python/ensure-venv.sh, which pins every package), builds the binary and the example
# runners, then runs pytest on tests/standards. Arguments go to pytest.
# Needs only python3 (3.10 or newer) and cargo.
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
