#!/usr/bin/env bash
# The soak (`make soak`): thousands of turns and requests over stdio, HTTP, SSE and the WebSocket
# against the real release binaries, with faults injected at random, for a bounded time; prints a
# report and exits 1 if any invariant broke. Not part of `make test`.
#
#   tests/hardening/soak.sh [SECONDS] [SEED]     (default 120 s, a time-based seed)
set -euo pipefail
SECONDS_TO_RUN="${1:-120}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
cargo build --release --locked -p openagents-cli -p openagents-runner -p openagents-hardening
args=(--seconds "$SECONDS_TO_RUN")
if [ -n "${2:-}" ]; then
    args+=(--seed "$2")
fi
exec "$ROOT/target/release/soak" "${args[@]}"
