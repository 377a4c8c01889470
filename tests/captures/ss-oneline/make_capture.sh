#!/usr/bin/env bash
# Re-creates the `ss -O` (--oneline) captures in this folder: tcp_info on the socket's
# address line, one line per socket (needs root, iperf3, iproute2, ethtool). As
# ../make_captures.sh: namespaces ccpt1-snd/ccpt1-rcv, a veth (198.18.252.1 -> .2),
# offloads off, tbf 100mbit + pfifo 48 on the sender's egress; one cubic iperf3 flow of
# 3 s. A second into it, in the sender's namespace, three TS/TE blocks as ccbench's
# ss loop writes them (hosts.linux.SS_LOOP) but with `ss -tinHO state established`,
# each followed by the same moment's `ss -tinH state established` block (ss-both.txt),
# and one `ss -tinO` with its header and state column (ss-tinO.txt). Everything it
# creates is removed on exit. Usage: make_capture.sh [OUT_DIR]
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")" && pwd)}
SND=ccpt1-snd
RCV=ccpt1-rcv
SRV_PID=""
CLI_PID=""

cleanup() {
    for pid in "$CLI_PID" "$SRV_PID"; do
        if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    done
    ip netns del "$SND" 2>/dev/null || true
    ip netns del "$RCV" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$SND"
ip netns add "$RCV"
ip link add ccpt1-s0 netns "$SND" type veth peer name ccpt1-r0 netns "$RCV"
ip -n "$SND" addr add 198.18.252.1/30 dev ccpt1-s0
ip -n "$RCV" addr add 198.18.252.2/30 dev ccpt1-r0
for ns_dev in "$SND:ccpt1-s0" "$RCV:ccpt1-r0"; do
    ns=${ns_dev%%:*}
    dev=${ns_dev#*:}
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" up
    ip netns exec "$ns" ethtool -K "$dev" gso off tso off gro off
done
ip netns exec "$SND" tc qdisc add dev ccpt1-s0 root handle 1: tbf rate 100mbit burst 15140 latency 50ms
ip netns exec "$SND" tc qdisc add dev ccpt1-s0 parent 1:1 handle 10: pfifo limit 48

ip netns exec "$RCV" iperf3 -s >/dev/null 2>&1 &
SRV_PID=$!
sleep 1
ip netns exec "$SND" iperf3 -c 198.18.252.2 -C cubic -t 3 >/dev/null &
CLI_PID=$!
sleep 1
stamp() { printf '%s %s\n' "$1" "$(date +%s.%N)"; }
{
    for _ in 1 2 3; do
        stamp TS; ip netns exec "$SND" ss -tinHO state established; stamp TE
        stamp TS; ip netns exec "$SND" ss -tinH state established; stamp TE
        sleep 0.2
    done
} >"$OUT/ss-both.txt"
ip netns exec "$SND" ss -tinO >"$OUT/ss-tinO.txt"
wait "$CLI_PID"
CLI_PID=""
wc -l "$OUT"/ss-*.txt
