#!/usr/bin/env bash
# Two builds of oa-bench side by side, interleaved round by round, as run.sh measures them:
# `status` over stdio (each build's `stdio-ours` and the floor loop, under AFTER's driver) or SSE
# fan-out (each build's `serve-ours` with 1 and 16 subscribers, under AFTER's subscribers).
#
#   BEFORE=<oa-bench> AFTER=<oa-bench> PART=stdio|sse [ROUNDS=7] crates/server/benches/ab.sh
#
# Prints every run, then the medians of the per-round ratios, by the clock and by the measured
# program's CPU time. Knobs: STDIO_LINES (500000), SSE_EVENTS (200000). Needs taskset, two cores.
set -euo pipefail

BEFORE="${BEFORE:?BEFORE=<an oa-bench binary>}"
AFTER="${AFTER:?AFTER=<an oa-bench binary>}"
PART="${PART:-stdio}"
ROUNDS="${ROUNDS:-7}"
STDIO_LINES="${STDIO_LINES:-500000}"
SSE_EVENTS="${SSE_EVENTS:-200000}"
PRIO=""
if nice -n -20 true 2>/dev/null; then PRIO="nice -n -20"; fi
RAW="$(mktemp)"
trap 'rm -f "$RAW"' EXIT

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

for r in $(seq 1 "$ROUNDS"); do
    if [ "$PART" = stdio ]; then
        for side in before after floor; do
            case "$side" in
                before) exe="$BEFORE" mode=stdio-ours ;;
                after) exe="$AFTER" mode=stdio-ours ;;
                floor) exe="$AFTER" mode=stdio-floor ;;
            esac
            line="$($PRIO taskset -c 1 "$AFTER" stdio-drive "$STDIO_LINES" taskset -c 0 "$exe" "$mode")"
            echo "round=$r side=$side $line" | tee -a "$RAW"
        done
    else
        for side in before after; do
            exe="$BEFORE"; [ "$side" = after ] && exe="$AFTER"
            for n in 1 16; do
                log="$(mktemp)"
                $PRIO taskset -c 0 "$exe" serve-ours 127.0.0.1:0 > "$log" &
                pid=$!
                for _ in $(seq 1 100); do [ -s "$log" ] && break; sleep 0.05; done
                t0="$(cpu_ticks "$pid")"
                line="$($PRIO taskset -c 1 "$AFTER" sse "$(head -1 "$log")" "$n" "$SSE_EVENTS")"
                t1="$(cpu_ticks "$pid")"
                kill "$pid"; wait "$pid" 2>/dev/null || true; rm -f "$log"
                echo "round=$r side=$side $line cpu_ticks=$((t1 - t0))" | tee -a "$RAW"
            done
        done
    fi
done

python3 - "$PART" "$RAW" <<'EOF'
import statistics, sys
part, raw = sys.argv[1], sys.argv[2]
runs = [dict(kv.split("=", 1) for kv in line.split()) for line in open(raw)]
def med(xs): return f"{statistics.median(xs):.3f} ({', '.join(f'{x:.2f}' for x in xs)})"
if part == "stdio":
    by = {}
    for d in runs:
        by.setdefault(d["round"], {})[d["side"]] = (float(d["lines_per_s"]), float(d["cpu_ticks"]))
    for side in ("before", "after"):
        clock = [r[side][0] / r["floor"][0] for r in by.values()]
        cpu = [r["floor"][1] / r[side][1] for r in by.values()]
        print(f"stdio {side} / floor: clock {med(clock)}; CPU per line {med(cpu)}")
    print(f"stdio after / before: clock {med([r['after'][0] / r['before'][0] for r in by.values()])}")
else:
    by = {}
    for d in runs:
        by.setdefault((d["round"], d["side"]), {})[d["subscribers"]] = (float(d["events_per_s"]), float(d["delivered"]) / max(float(d["cpu_ticks"]), 1.0))
    for side in ("before", "after"):
        rows = [v for k, v in by.items() if k[1] == side]
        print(f"SSE {side}, 16 subscribers / 1: clock {med([v['16'][0] / v['1'][0] for v in rows])}; per server CPU {med([v['16'][1] / v['1'][1] for v in rows])}")
EOF
