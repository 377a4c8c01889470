#!/usr/bin/env bash
# Re-creates the real captures in this folder (needs root, iperf3, iproute2, ethtool).
# Two namespaces joined by a veth pair; the sender's egress is shaped by
# tbf 100mbit + child pfifo limit 48 so that the queue fills and drops.
# The namespaces and processes it starts are removed on exit, even on failure.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")" && pwd)}
SND=ccpt-snd
RCV=ccpt-rcv
SRV_PID=""
SS_PID=""
CLI_PID=""

cleanup() {
    for pid in "$SS_PID" "$CLI_PID" "$SRV_PID"; do
        if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; fi
    done
    ip netns del "$SND" 2>/dev/null || true
    ip netns del "$RCV" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$SND"
ip netns add "$RCV"
ip link add ccpt-s0 netns "$SND" type veth peer name ccpt-r0 netns "$RCV"
ip -n "$SND" addr add 198.18.251.1/30 dev ccpt-s0
ip -n "$RCV" addr add 198.18.251.2/30 dev ccpt-r0
for ns_dev in "$SND:ccpt-s0" "$RCV:ccpt-r0"; do
    ns=${ns_dev%%:*}
    dev=${ns_dev#*:}
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" up
    # Offloads off: otherwise the 48-packet queue holds 64 KB super-packets.
    ip netns exec "$ns" ethtool -K "$dev" gso off tso off gro off
done
ip netns exec "$SND" tc qdisc add dev ccpt-s0 root handle 1: tbf rate 100mbit burst 15140 latency 50ms
ip netns exec "$SND" tc qdisc add dev ccpt-s0 parent 1:1 handle 10: pfifo limit 48

ip netns exec "$RCV" iperf3 -s >/dev/null 2>&1 &
SRV_PID=$!
sleep 1

# TS blocks as ccbench.sampler writes them (50 ms sleep; ss itself adds ~50 ms).
start_ss() {
    # shellcheck disable=SC2016  # expanded by the inner bash, per sample
    ip netns exec "$SND" bash -c \
        'while :; do printf "TS %s\n" "$(date +%s.%N)"; ss -tinH state established; sleep 0.05; done' \
        >"$1" &
    SS_PID=$!
}
stop_ss() {
    kill "$SS_PID"
    wait "$SS_PID" 2>/dev/null || true
    SS_PID=""
}

client() { ip netns exec "$SND" iperf3 -c 198.18.251.2 "$@"; }

ip netns exec "$SND" ping -c 5 -i 0.2 198.18.251.2 >"$OUT/ping-linux-netns-idle.txt"
# Every 4th echo request dropped at the receiver (the seeds' iptables nth method).
ip netns exec "$RCV" iptables -A INPUT -p icmp -m statistic --mode nth --every 4 --packet 0 -j DROP
ip netns exec "$SND" ping -c 20 -i 0.2 198.18.251.2 >"$OUT/ping-linux-netns-nth4-loss.txt" || true
ip netns exec "$RCV" iptables -F INPUT

start_ss "$OUT/ss-cubic-5s.txt"
client -C cubic -t 5 -J >"$OUT/iperf3.12-cubic-5s.json"
stop_ss

start_ss "$OUT/ss-bbr-5s.txt"
client -C bbr -t 5 -J >"$OUT/iperf3.12-bbr-5s.json"
stop_ss

client -C reno -t 5 -J >"$OUT/iperf3.12-reno-5s.json"

# ping and tc while two flows fill the queue (backlog non-zero), then tc after.
client -C cubic -P 2 -t 10 -J >"$OUT/iperf3.12-cubic-P2-10s.json" &
CLI_PID=$!
sleep 2
ip netns exec "$SND" ping -c 20 -i 0.2 198.18.251.2 >"$OUT/ping-linux-netns-loaded.txt" || true
ip netns exec "$SND" tc -s qdisc show dev ccpt-s0 >"$OUT/tc-tbf-pfifo48-during.txt"
ip netns exec "$SND" tc -s -j qdisc show dev ccpt-s0 >"$OUT/tc-tbf-pfifo48-during.json"
wait "$CLI_PID"
CLI_PID=""
ip netns exec "$SND" tc -s qdisc show dev ccpt-s0 >"$OUT/tc-tbf-pfifo48-after.txt"
ip netns exec "$SND" tc -s -j qdisc show dev ccpt-s0 >"$OUT/tc-tbf-pfifo48-after.json"

client -C cubic -t 3 -i 0.1 -J >"$OUT/iperf3.12-cubic-i0.1-3s.json"

# Nothing listens on 5299: iperf3 exits 1 with an "error" member in its JSON.
client -p 5299 -t 1 -J >"$OUT/iperf3.12-error-refused.json" || true
