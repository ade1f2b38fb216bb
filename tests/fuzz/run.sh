#!/usr/bin/env bash
# Runs every fuzz target for a bounded time and prints the executions per target.
#
#   tests/fuzz/run.sh [SECONDS]      (default 30 seconds per target; `make fuzz`)
#   FUZZ_TARGETS="frame ws_message" tests/fuzz/run.sh 60     (some targets only)
#
# Coverage-guided with libFuzzer through cargo-fuzz (installed here if missing). cargo-fuzz
# passes nightly-only flags to rustc; on a stable toolchain RUSTC_BOOTSTRAP=1 lets it, which is
# the only reason it is set. No sanitizer (`-s none`): the code under test forbids `unsafe`, so
# AddressSanitizer would mostly slow the search down; debug assertions are on (`-a`), so integer
# overflow panics.
#
# Corpora start from the shared vectors (tests/vectors/*.json: every valid and invalid document,
# shaped for each target) and grow in tests/fuzz/corpus/<target> (not checked in). A crash is
# saved to tests/fuzz/artifacts/<target>/ and makes this script exit 1: turn it into a case in
# tests/hardening/tests/regressions.rs (input bytes inline) before fixing it.
set -euo pipefail

SECONDS_PER_TARGET="${1:-30}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGETS=(${FUZZ_TARGETS:-frame validators json_reader rpc_engine runner_events sse_resume ws_message})
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked --version 0.13.2
fi

echo "== seeding corpora from tests/vectors"
# `validators` takes one byte choosing the type by its index in openagents_protocol::TYPES, which
# `openagents types` lists in order.
TYPE_NAMES="$(cd "$ROOT" && cargo run --quiet --locked -p openagents-cli -- types | awk '{print $1}' | tr '\n' ' ')"
python3 - "$ROOT/tests/vectors" "$HERE/corpus" "$ROOT/tests/samples" "$TYPE_NAMES" <<'PY'
import hashlib, json, os, sys

vectors, out, samples, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
types = names.split()
docs = []  # (type, bytes)
for f in sorted(os.listdir(vectors)):
    if not f.endswith(".json"):
        continue
    v = json.load(open(os.path.join(vectors, f)))
    for case in v.get("valid", []) + v.get("invalid", []):
        docs.append((v["type"], json.dumps(case["document"], separators=(",", ":")).encode()))
for f in sorted(os.listdir(samples)):
    docs.append(("", open(os.path.join(samples, f), "rb").read().strip()))

def put(target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, "seed-" + name), "wb") as fh:
        fh.write(data)

for ty, doc in docs:
    if ty:
        put("validators", bytes([types.index(ty)]) + doc)
    put("json_reader", doc)
    if ty in ("RpcRequest", "SubmitParams", ""):
        put("rpc_engine", doc)
        put("ws_message", doc)
    if ty in ("Event", "RpcResponse", "ApprovalReply"):
        put("ws_message", doc)
    if ty == "Event":
        put("runner_events", doc + b"\n")
    put("frame", bytes([16, 7]) + doc + b"\r\n" + doc[:20])
# Whole runner outputs: a few events and a terminal.
events = [doc for ty, doc in docs if ty == "Event"]
for i in range(0, len(events), 3):
    put("runner_events", b"\n".join(events[i:i + 3]) + b"\n")
# SSE resume points: [capacity, published, burst1, burst2, k, Last-Event-ID bytes, 0xFF, query].
for hdr, q in [(b"3", b"since=1"), (b"-1", b""), (b" 7 ", b"x=1&since=2"), (b"", b"since=99999999999999999999"), (b"abc", b"since=-5")]:
    put("sse_resume", bytes([4, 10, 3, 2, 1]) + hdr + b"\xff" + q)
print(f"seeded {len(docs)} documents")
PY

echo "== building the fuzz targets"
cd "$ROOT"
cargo fuzz build --fuzz-dir "$HERE" -s none -a

mkdir -p "$HERE/logs"
declare -A EXECS
failed=()
for t in "${TARGETS[@]}"; do
    echo "== $t: ${SECONDS_PER_TARGET}s"
    mkdir -p "$HERE/corpus/$t" "$HERE/artifacts/$t"
    log="$HERE/logs/$t.log"
    status=0
    cargo fuzz run --fuzz-dir "$HERE" -s none -a "$t" "$HERE/corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$HERE/artifacts/$t/" >"$log" 2>&1 || status=$?
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)"
    EXECS[$t]="${execs:-0}"
    if [ "$status" -ne 0 ]; then
        failed+=("$t")
        echo "   CRASH (exit $status): see $log and $HERE/artifacts/$t/"
        grep -m1 -A3 "panicked at" "$log" || true
    fi
done

echo
printf '%-14s %14s %10s\n' target executions corpus
for t in "${TARGETS[@]}"; do
    printf '%-14s %14s %10s\n' "$t" "${EXECS[$t]}" "$(ls "$HERE/corpus/$t" | wc -l)"
done
if [ "${#failed[@]}" -ne 0 ]; then
    echo "crashes in: ${failed[*]}"
    exit 1
fi
echo "no crashes"
