#!/usr/bin/env bash
# Re-creates the real pcapng capture here (needs root, iperf3, iproute2 and a Python
# with scapy 2.7.0, e.g. `python3 -m venv /tmp/v && /tmp/v/bin/pip install scapy==2.7.0`,
# passed as $1). No tool on the machine writes pcapng (no dumpcap/tshark; tcpdump
# writes pcap), so scapy's PcapNgWriter writes what its AF_PACKET sniffer sees on the
# sender's veth during a short iperf3 flow. Namespaces and processes are removed on
# exit. Usage: make_capture.sh PYTHON_WITH_SCAPY [OUT_DIR]
set -euo pipefail

PY=$1
OUT=${2:-$(cd "$(dirname "$0")" && pwd)}
A=ccb-pn-a
B=ccb-pn-b
SRV_PID=""
SNIFF_PID=""

cleanup() {
    for pid in "$SNIFF_PID" "$SRV_PID"; do
        if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    done
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$A"
ip netns add "$B"
ip link add ccb-pn-a0 netns "$A" type veth peer name ccb-pn-b0 netns "$B"
ip -n "$A" addr add 10.250.1.1/30 dev ccb-pn-a0
ip -n "$B" addr add 10.250.1.2/30 dev ccb-pn-b0
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set ccb-pn-a0 up
ip -n "$B" link set ccb-pn-b0 up
ip netns exec "$B" iperf3 -s >/dev/null 2>&1 &
SRV_PID=$!
sleep 1

# The first 40 TCP packets on the veth (handshakes, iperf3's control exchange, the
# start of the data), at most 96 bytes of each (snaplen), written as pcapng.
ip netns exec "$A" "$PY" - "$OUT/iperf3-netns-40pkts-scapy.pcapng" <<'PYEOF' &
import sys
from scapy.all import sniff
from scapy.utils import PcapNgWriter

pkts = sniff(iface="ccb-pn-a0", filter=None, lfilter=lambda p: p.haslayer("TCP"),
             count=40, timeout=20)
w = PcapNgWriter(sys.argv[1])
for p in pkts:
    cut = p.__class__(bytes(p)[:96])
    cut.time = p.time
    cut.wirelen = len(p)
    w.write(cut)
w.close()
PYEOF
SNIFF_PID=$!
sleep 2
ip netns exec "$A" iperf3 -c 10.250.1.2 -n 64K -l 8K >/dev/null
wait "$SNIFF_PID"
SNIFF_PID=""
gzip -9 -n -c "$OUT/iperf3-netns-40pkts-scapy.pcapng" >"$OUT/iperf3-netns-40pkts-scapy.pcapng.gz"
