#!/usr/bin/env bash
# Re-creates trace_pipe-cubic-lost.txt: a trace whose reader fell behind, so the kernel's
# ring buffer overwrote events and trace_pipe says so (`CPU:N [LOST M EVENTS]`). As
# make_captures.sh (two namespaces, a veth, offloads off, iperf3 cubic client in
# ccb-tpl-a, server in ccb-tpl-b), with the three events of ccbench's tcp_probe
# instrument filtered as it filters them (instruments.tcp_probe.port_filter) and its
# `ccbench_unix=` marker; but the instance's buffer is 16 KB per CPU (ccbench's is
# 16 MB) and the reader, `cat trace_pipe` as ccbench runs it, is stopped (SIGSTOP)
# while an unpaced 2 s flow runs and continued after it. The per-CPU stats printed
# (stderr) before it continues count the overrun the LOST lines report. (With a 4 KB
# buffer this kernel wrote no more events and counted no overrun: no LOST line.)
# Needs root, iperf3, iproute2, ethtool. Everything it creates is removed on exit
# (tracefs, mounted if it was not, stays mounted, as ccbench leaves it).
# Usage: make_lost_capture.sh [OUT_FILE]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE/trace_pipe-cubic-lost.txt}
T=/sys/kernel/tracing
A=ccb-tpl-a
B=ccb-tpl-b
INST=ccb-capture-lost
SRV_PID=""
PIPE_PID=""

cleanup() {
    for pid in "$PIPE_PID" "$SRV_PID"; do
        if [[ -n "$pid" ]]; then
            kill -CONT "$pid" 2>/dev/null || true
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    if [[ -d "$T/instances/$INST" ]]; then
        for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
            echo 0 >"$T/instances/$INST/events/tcp/$ev/enable" 2>/dev/null || true
        done
        rmdir "$T/instances/$INST" 2>/dev/null || true
    fi
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
# mounted where ccbench mounts it (instruments.tcp_probe.mount_tracefs), left mounted
mountpoint -q "$T" || mount -t tracefs nodev "$T"

ip netns add "$A"
ip netns add "$B"
ip link add ccb-tpl-a0 netns "$A" type veth peer name ccb-tpl-b0 netns "$B"
ip -n "$A" addr add 10.250.4.1/30 dev ccb-tpl-a0
ip -n "$B" addr add 10.250.4.2/30 dev ccb-tpl-b0
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set ccb-tpl-a0 up
ip -n "$B" link set ccb-tpl-b0 up
ip netns exec "$A" ethtool -K ccb-tpl-a0 gso off tso off gro off >/dev/null
ip netns exec "$B" ethtool -K ccb-tpl-b0 gso off tso off gro off >/dev/null

ip netns exec "$B" iperf3 -s >/dev/null 2>&1 &
SRV_PID=$!
sleep 1

d=$T/instances/$INST
mkdir "$d"
echo 16 >"$d/buffer_size_kb"
for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
    echo 'dport >= 5201 && dport <= 5201' >"$d/events/tcp/$ev/filter"
    echo 1 >"$d/events/tcp/$ev/enable"
done
cat "$d/trace_pipe" >"$OUT" &
PIPE_PID=$!
printf "ccbench_unix=%s\n" "$(date +%s.%N)" >"$d/trace_marker"
sleep 0.5            # the reader takes the marker
kill -STOP "$PIPE_PID"  # then falls behind: the flow's events overrun its 4 KB
ip netns exec "$A" iperf3 -c 10.250.4.2 -C cubic -t 2 >/dev/null
cat "$d/per_cpu/cpu0/stats" "$d/per_cpu/cpu1/stats" >&2
kill -CONT "$PIPE_PID"
sleep 1
for ev in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
    echo 0 >"$d/events/tcp/$ev/enable"
done
sleep 1
kill "$PIPE_PID"
wait "$PIPE_PID" 2>/dev/null || true
PIPE_PID=""
grep -c 'LOST' "$OUT" || true
wc -c "$OUT"
