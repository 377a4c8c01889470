#!/usr/bin/env bash
# Re-creates the tracefs (tcp:tcp_probe, tcp:tcp_cong_state_set, tcp:tcp_retransmit_skb)
# and nstat captures (needs root, iperf3, iproute2, iptables, a kernel with these
# tracepoints). Two namespaces joined by a veth; iperf3 client (the sender) in
# ccb-tp-a, server in ccb-tp-b. Capture 1: no loss. Capture 2: the receiver's INPUT
# drops 5 % of the segments to port 5201 at random. Everything it creates (trace
# instances, namespaces with their iptables rules, processes) is removed on exit.
# Usage: make_captures.sh [TRACEFS_OUT_DIR [NSTAT_OUT_DIR]]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE}
NSTAT_OUT=${2:-$HERE/../nstat}
T=/sys/kernel/tracing
A=ccb-tp-a
B=ccb-tp-b
INST=ccb-capture
SRV_PID=""
PIPE_PID=""
TMP=$(mktemp -d)

cleanup() {
    for pid in "$PIPE_PID" "$SRV_PID"; do
        if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    done
    for inst in "$INST" "$INST-t"; do
        if [[ -d "$T/instances/$inst" ]]; then
            for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
                echo 0 >"$T/instances/$inst/events/tcp/$ev/enable" 2>/dev/null || true
            done
            rmdir "$T/instances/$inst" 2>/dev/null || true
        fi
    done
    ip netns exec "$B" iptables -F INPUT 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

ip netns add "$A"
ip netns add "$B"
ip link add ccb-tp-a0 netns "$A" type veth peer name ccb-tp-b0 netns "$B"
ip -n "$A" addr add 10.250.0.1/30 dev ccb-tp-a0
ip -n "$B" addr add 10.250.0.2/30 dev ccb-tp-b0
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set ccb-tp-a0 up
ip -n "$B" link set ccb-tp-b0 up
# Offloads off: one event per segment, not per 64 KB GSO/GRO super-packet.
ip netns exec "$A" ethtool -K ccb-tp-a0 gso off tso off gro off >/dev/null
ip netns exec "$B" ethtool -K ccb-tp-b0 gso off tso off gro off >/dev/null

ip netns exec "$B" iperf3 -s >/dev/null 2>&1 &
SRV_PID=$!
sleep 1

FILTER='sport == 5201 || dport == 5201'
# instance NAME [TCP_PROBE_FILTER]: a trace instance with the three events, each
# filtered to port 5201 (tcp_probe: to TCP_PROBE_FILTER if given)
instance() {
    local d=$T/instances/$1
    mkdir "$d"
    echo 8192 >"$d/buffer_size_kb"
    for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
        echo "$FILTER" >"$d/events/tcp/$ev/filter"
    done
    if [[ -n "${2:-}" ]]; then echo "$2" >"$d/events/tcp/tcp_probe/filter"; fi
    for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
        echo 1 >"$d/events/tcp/$ev/enable"
    done
}
stop_instance() {
    for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
        echo 0 >"$T/instances/$1/events/tcp/$ev/enable"
    done
}
start_pipe() { cat "$T/instances/$INST/trace_pipe" >"$1" & PIPE_PID=$!; }
stop_pipe() { sleep 1; kill "$PIPE_PID"; wait "$PIPE_PID" 2>/dev/null || true; PIPE_PID=""; }
# Keep the head of a capture: whole lines, at most $2 bytes.
trim() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
src, limit, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(src, "rb").read()
if len(data) > limit:
    data = data[: data.rfind(b"\n", 0, limit) + 1]
open(dst, "wb").write(data)
PY
}
client() { ip netns exec "$A" iperf3 -c 10.250.0.2 -C cubic "$@" >/dev/null; }

# --- capture 1: no loss; trace_pipe of one instance, `trace` of a second -----------
instance "$INST"
instance "$INST-t"
start_pipe "$TMP/clean.pipe"
client -t 2 -b 2M
stop_instance "$INST"
stop_instance "$INST-t"
stop_pipe
cat "$T/instances/$INST-t/trace" >"$TMP/clean.trace"
rmdir "$T/instances/$INST-t"
rmdir "$T/instances/$INST"

# --- capture 2: 5 % random loss at the receiver, nstat before/after in the sender ---
nstat_snap() {  # nstat_snap NAME: absolute counters, zeros too, history not touched
    ip netns exec "$A" nstat -a -z -s --json >"$NSTAT_OUT/nstat-$1.json"
    ip netns exec "$A" nstat -a -z -s >"$NSTAT_OUT/nstat-$1.txt"
}
ip netns exec "$B" iptables -A INPUT -p tcp --dport 5201 -m statistic --mode random \
    --probability 0.05 -j DROP
nstat_snap before-loss5
instance "$INST" 'dport == 5201'  # tcp_probe: the sender's sockets only
start_pipe "$TMP/loss.pipe"
client -t 4 -b 2M
stop_instance "$INST"
stop_pipe
nstat_snap after-loss5
ip netns exec "$B" iptables -D INPUT -p tcp --dport 5201 -m statistic --mode random \
    --probability 0.05 -j DROP
rmdir "$T/instances/$INST"

wc -c "$TMP"/*
trim "$TMP/clean.pipe" 300000 "$OUT/trace_pipe-cubic-2M-noloss.txt"
trim "$TMP/clean.trace" 30000 "$OUT/trace-cubic-2M-noloss-head.txt"
trim "$TMP/loss.pipe" 300000 "$OUT/trace_pipe-cubic-2M-loss5.txt"
