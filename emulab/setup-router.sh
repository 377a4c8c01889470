#!/bin/sh
# ccbench: set up a dumbbell router (rt1 or rt2) on Emulab/CloudLab (Linux).
#
# profile.py's startup service runs it as root on every boot:
#   setup-router.sh role=rt1 core_addr=10.1.2.1 if_addrs=10.1.1.1,10.1.2.1 \
#     route=10.1.3.0/24 via=10.1.2.2 rate_mbit=1000 queue=48 aqm=none shape=yes tx_ring=48
#
# - IPv4 forwarding on, a route to the far side of the dumbbell;
# - NIC offloads off on every experiment interface (else the queue holds 64 KB
#   super-packets instead of frames);
# - on the bottleneck interface (the one holding core_addr, toward the other
#   router), with shape=yes: one transmit queue (`ethtool -L combined 1`, or `tx 1`
#   where the driver has separate TX channels), tbf at rate_mbit with a child
#   `pfifo limit queue` (or the AQM with `limit queue`), and the TX ring set to
#   tx_ring (0 = leave); with shape=no: the driver's default qdisc.
# Idempotent: safe to rerun (the qdisc is rebuilt, so its counters restart).
# - every experiment interface (and the device under a VLAN) recorded in
#   /var/tmp/ccbench/nic-<interface>.json: driver, speed, offloads, channels, each
#   transmit queue's BQL state, and on the bottleneck the TX queues and TX ring asked
#   and set (drivers clamp silently: igb to >= 64 on Ubuntu 24.04, >= 80 on older
#   kernels).
# Log: /local/logs/ccbench-setup-router.log; on success /var/tmp/ccbench-setup.done.
# CCBENCH_SETUP_NO_PACKAGES=1 installs nothing (scripts/emulab_rehearsal.py).
# Tests only: CCBENCH_SETUP_ROOT prefixes every file path this script uses;
# CCBENCH_SETUP_BIN is searched first for commands.
set -eu
PATH=${CCBENCH_SETUP_BIN:+$CCBENCH_SETUP_BIN:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

NAME=setup-router
FRAME=1514 # bytes on the wire per full-size frame (what tbf counts)
ROOT=${CCBENCH_SETUP_ROOT:-}

# Logging, die/note, argument checks and helpers shared by the start-up scripts.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib-linux.sh
. "$(dirname "$0")/lib-linux.sh"

# --- arguments: key=value, each checked against a strict pattern ---
role='' core_addr='' if_addrs='' route='' via='' rate_mbit='' queue='' aqm='' shape='' tx_ring=''
for arg in "$@"; do
    case $arg in
    role=*) role=${arg#*=} ;;
    core_addr=*) core_addr=${arg#*=} ;;
    if_addrs=*) if_addrs=${arg#*=} ;;
    route=*) route=${arg#*=} ;;
    via=*) via=${arg#*=} ;;
    rate_mbit=*) rate_mbit=${arg#*=} ;;
    queue=*) queue=${arg#*=} ;;
    aqm=*) aqm=${arg#*=} ;;
    shape=*) shape=${arg#*=} ;;
    tx_ring=*) tx_ring=${arg#*=} ;;
    *) die "unknown argument: $arg" ;;
    esac
done

case $role in rt1 | rt2) ;; *) die "role must be rt1 or rt2, not '$role'" ;; esac
is_ipv4 "$core_addr" || die "core_addr must be an IPv4 address, not '$core_addr'"
is_net "$route" || die "route must be a network such as 10.1.3.0/24, not '$route'"
is_ipv4 "$via" || die "via must be an IPv4 address, not '$via'"
{ is_uint "$rate_mbit" && [ "$rate_mbit" -ge 1 ]; } || die "rate_mbit must be a positive integer, not '$rate_mbit'"
{ is_uint "$queue" && [ "$queue" -ge 2 ]; } || die "queue must be an integer >= 2, not '$queue'"
case $aqm in none | fq_codel | codel | pie | red) ;; *) die "aqm must be none|fq_codel|codel|pie|red, not '$aqm'" ;; esac
case $shape in yes | no) ;; *) die "shape must be yes or no, not '$shape'" ;; esac
is_uint "$tx_ring" || die "tx_ring must be a non-negative integer, not '$tx_ring'"
addrs=$(printf '%s' "$if_addrs" | tr ',' ' ')
[ -n "$addrs" ] || die "if_addrs is missing"
for a in $addrs; do is_ipv4 "$a" || die "if_addrs: '$a' is not an IPv4 address"; done

# --- helpers ---
offloads_off() {
    for dev in "$@"; do
        for feature in tso gso gro lro; do
            ethtool -K "$dev" "$feature" off 2>/dev/null ||
                note "$dev: cannot switch $feature off (fixed by the driver?)"
        done
        ethtool -k "$dev" 2>/dev/null |
            grep -E '^(tcp-segmentation|generic-segmentation|generic-receive|large-receive)-offload:' || true
    done
}

# Current TX ring size of $1 (empty if the driver does not tell).
tx_ring_of() {
    ethtool -g "$1" 2>/dev/null | awk '/^Current hardware settings/ {cur = 1} cur && /^TX:/ {print $2; exit}'
}

# --- packages (Emulab's Ubuntu images normally have both) ---
if ! command -v ethtool >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
    apt_update || die "cannot update the package lists to install ethtool and iproute2"
    apt_install ethtool iproute2 || die "cannot install ethtool and iproute2"
fi

# --- forwarding and routing ---
mkdir -p "$ROOT/etc/sysctl.d"
cat >"$ROOT/etc/sysctl.d/90-ccbench-router.conf" <<'EOF'
# written by ccbench emulab/setup-router.sh
net.ipv4.ip_forward = 1
EOF
sysctl -p "$ROOT/etc/sysctl.d/90-ccbench-router.conf"

core_if=$(iface_of "$core_addr") || die "no interface holds $core_addr"
ip route replace "$route" via "$via" || die "cannot add route $route via $via"
note "route $route via $via"

# --- offloads off on every experiment interface ---
for a in $addrs; do
    dev=$(iface_of "$a") || die "no interface holds $a"
    # shellcheck disable=SC2046  # one device name per line; names have no spaces
    offloads_off $(devices_of "$dev")
done

# --- the bottleneck queue ---
# Start from the driver default: a rerun must not stack on an earlier set-up.
tc qdisc del dev "$core_if" root 2>/dev/null || true
txq_asked='' txq_refused=''
if [ "$shape" = yes ]; then
    # One transmit queue. A forwarded packet takes the TX queue numbered like the RX
    # queue it arrived on (net/core/dev.c skb_tx_hash), so on a multiqueue NIC (igb on
    # an I350: up to 8) flows from different senders usually sit in different TX
    # rings, each capped by its own BQL limit and served round-robin by the NIC: a
    # per-flow layer-2 buffer behind the one tbf. Before the ring is sized: igb
    # rebuilds its rings when the count changes (igb_ethtool.c igb_set_channels).
    txq_asked=1
    kind=''
    ch_max=$(channels_of "$core_if" max Combined)
    if is_uint "$ch_max" && [ "$ch_max" -gt 0 ]; then
        kind=combined
    else
        ch_max=$(channels_of "$core_if" max TX)
        if is_uint "$ch_max" && [ "$ch_max" -gt 0 ]; then kind=tx; fi
    fi
    if [ -z "$kind" ]; then
        note "$core_if: the driver offers no combined or TX channels to set; transmit queues in use: $(tx_queue_count "$core_if")"
    else
        ch_name=Combined
        [ "$kind" = tx ] && ch_name=TX
        current=$(channels_of "$core_if" cur "$ch_name")
        if [ "$current" != 1 ]; then
            # Changing the count resets the link: only when it differs.
            if ! out=$(ethtool -L "$core_if" "$kind" 1 2>&1); then
                txq_refused=$(printf '%s' "$out" | tr '\n' ' ' | sed 's/ *$//')
                note "$core_if: the driver refused $kind 1 (it stays $current): $txq_refused"
            fi
            note "$core_if: $kind channels $(channels_of "$core_if" cur "$ch_name"), transmit queues in use: $(tx_queue_count "$core_if")"
        fi
    fi
    if [ "$tx_ring" -gt 0 ]; then
        current=$(tx_ring_of "$core_if")
        if [ -z "$current" ]; then
            note "$core_if: the driver does not report ring sizes; tx ring left as is"
        elif [ "$current" != "$tx_ring" ]; then
            # Changing the ring can reset the link: only when it differs.
            ethtool -G "$core_if" tx "$tx_ring" ||
                note "$core_if: the driver refused tx ring $tx_ring (it stays $current)"
            note "$core_if: tx ring $(tx_ring_of "$core_if")"
        fi
    fi
    # tbf burst: 1 ms at the rate, but at least 10 full frames.
    burst=$((rate_mbit * 125))
    [ "$burst" -ge $((10 * FRAME)) ] || burst=$((10 * FRAME))
    tc qdisc replace dev "$core_if" root handle 1: tbf rate "${rate_mbit}mbit" burst "$burst" latency 100ms ||
        die "cannot install tbf on $core_if"
    case $aqm in
    none)
        set -- pfifo limit "$queue"
        ;;
    fq_codel | codel | pie)
        set -- "$aqm" limit "$queue"
        ;;
    red)
        # RED counts bytes: hard limit = queue frames, max threshold a quarter of
        # it, min a third of max, burst as tc-red(8) suggests.
        limit=$((queue * FRAME))
        max=$((limit / 4))
        min=$((max / 3))
        set -- red limit "$limit" min "$min" max "$max" avpkt "$FRAME" \
            burst $(((2 * min + max) / (3 * FRAME) + 1)) bandwidth "${rate_mbit}mbit"
        ;;
    esac
    if ! tc qdisc replace dev "$core_if" parent 1:1 handle 10: "$@"; then
        # Leave no half-built bottleneck behind.
        tc qdisc del dev "$core_if" root 2>/dev/null || true
        die "cannot install '$*' on $core_if (is the $1 qdisc in this kernel?)"
    fi
fi
tc -s qdisc show dev "$core_if"

# --- what the NICs run with: /var/tmp/ccbench/nic-<interface>.json ---
asked=''
if [ "$shape" = yes ] && [ "$tx_ring" -gt 0 ]; then asked=$tx_ring; fi
for a in $addrs; do
    dev=$(iface_of "$a") || die "no interface holds $a"
    for d in $(devices_of "$dev"); do
        if [ "$dev" = "$core_if" ]; then
            record_nic "$d" "$asked" "$txq_asked" "$txq_refused"
        else
            record_nic "$d" ''
        fi
    done
done

mkdir -p "$ROOT/var/tmp"
printf 'script=%s\nrole=%s\nbottleneck_if=%s\nshape=%s\naqm=%s\nqueue=%s\nrate_mbit=%s\ntime=%s\n' \
    "$NAME" "$role" "$core_if" "$shape" "$aqm" "$queue" "$rate_mbit" "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" \
    >"$ROOT/var/tmp/ccbench-setup.done"
note "done: $role, bottleneck interface $core_if, shape=$shape aqm=$aqm queue=$queue rate=${rate_mbit}mbit"
