#!/bin/sh
# ccbench: set up a Linux sender or receiver of the dumbbell on Emulab/CloudLab.
#
# profile.py's startup service runs it as root on every boot:
#   setup-linux-host.sh role=receiver addr=10.1.3.2 route=10.1.1.0/24 via=10.1.3.1 \
#     offloads=default container=no
#
# - the seed's TCP sysctls (10 MB buffers, no metrics cache), written to
#   /etc/sysctl.d/90-ccbench.conf and applied;
# - the kernel's optional TCP congestion-control modules loaded (where present);
# - NIC offloads: offloads=default keeps the OS's settings (as the seed: only the
#   routers are tuned; Linux receivers coalesce ACKs with GRO); offloads=off switches
#   TSO/GSO/GRO/LRO off on the experiment interface (the one holding addr);
# - the experiment interface (and the device under a VLAN) recorded in
#   /var/tmp/ccbench/nic-<interface>.json: driver, speed, offloads, TX ring;
# - a route to the other side of the dumbbell via its router;
# - iperf3 and ethtool installed; with container=yes also podman, catatonit and the ccbench
#   tooling image built from /local/repository/containers/linux-node; the optional
#   probe tools (irtt, fping, flent, netperf) after an apt-get update, always.
# Idempotent: safe to rerun. Log: /local/logs/ccbench-setup-linux-host.log; on
# success /var/tmp/ccbench-setup.done.
# CCBENCH_SETUP_NO_PACKAGES=1 installs nothing (scripts/emulab_rehearsal.py).
# Tests only: CCBENCH_SETUP_ROOT prefixes every file path this script uses;
# CCBENCH_SETUP_BIN is searched first for commands.
set -eu
PATH=${CCBENCH_SETUP_BIN:+$CCBENCH_SETUP_BIN:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

NAME=setup-linux-host
ROOT=${CCBENCH_SETUP_ROOT:-}
REPO=$ROOT/local/repository # the profile's repository clone
IMAGE=localhost/ccbench-linux-node:latest # the name containers/build.sh uses
BASE_IMAGE=docker.io/library/ubuntu:24.04

# Logging, die/note, argument checks and helpers shared by the start-up scripts.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib-linux.sh
. "$(dirname "$0")/lib-linux.sh"

# --- arguments: key=value, each checked against a strict pattern ---
role='' addr='' route='' via='' offloads=default container=no
for arg in "$@"; do
    case $arg in
    role=*) role=${arg#*=} ;;
    addr=*) addr=${arg#*=} ;;
    route=*) route=${arg#*=} ;;
    via=*) via=${arg#*=} ;;
    offloads=*) offloads=${arg#*=} ;;
    container=*) container=${arg#*=} ;;
    *) die "unknown argument: $arg" ;;
    esac
done

case $role in sender | receiver) ;; *) die "role must be sender or receiver, not '$role'" ;; esac
is_ipv4 "$addr" || die "addr must be an IPv4 address, not '$addr'"
is_net "$route" || die "route must be a network such as 10.1.3.0/24, not '$route'"
is_ipv4 "$via" || die "via must be an IPv4 address, not '$via'"
case $offloads in default | off) ;; *) die "offloads must be default or off, not '$offloads'" ;; esac
case $container in yes | no) ;; *) die "container must be yes or no, not '$container'" ;; esac

# --- helpers ---
# --- packages first: ethtool is needed below ---
need=''
command -v iperf3 >/dev/null 2>&1 || need="$need iperf3"
command -v ethtool >/dev/null 2>&1 || need="$need ethtool"
if [ "$container" = yes ] && ! command -v podman >/dev/null 2>&1; then need="$need podman"; fi
# podman run --init's PID 1 (ccbench's tool containers pass signals through it)
if [ "$container" = yes ] && [ ! -x /usr/libexec/podman/catatonit ]; then need="$need catatonit"; fi
updated=no # package lists refreshed by this run (an image's lists are stale: installs fail)
if [ -n "$need" ]; then
    packages_allowed || die "missing:$need (CCBENCH_SETUP_NO_PACKAGES=1: nothing is installed)"
    # iperf3's package asks whether to start a daemon: no, ccbench starts servers.
    echo 'iperf3 iperf3/start_daemon boolean false' | debconf-set-selections
    apt_update || die "apt-get update failed"
    updated=yes
    # shellcheck disable=SC2086  # a list of package names
    apt_install $need || die "cannot install:$need"
fi
note "iperf3: $(iperf3 --version 2>&1 | head -n 1)"

# --- latency-under-load probes (probe_tool irtt / flent): Ubuntu's universe and
# multiverse carry them. Optional: a node without them still runs the ping probe, and a
# run asking for a missing tool fails with the tool's error, so only warn here. ---
optional=''
for tool in irtt fping flent netperf; do
    command -v "$tool" >/dev/null 2>&1 || optional="$optional $tool"
done
if [ -n "$optional" ]; then
    if ! packages_allowed; then
        note "CCBENCH_SETUP_NO_PACKAGES=1: not installing$optional (probe_tool ping still works)"
    elif [ "$updated" = yes ] || apt_update; then
        # shellcheck disable=SC2086  # a list of package names
        apt_install $optional || note "warning: could not install$optional (probe_tool ping still works)"
    else
        note "warning: apt-get update failed: not installing$optional (probe_tool ping still works)"
    fi
fi

# --- TCP sysctls (the seed's values) ---
mkdir -p "$ROOT/etc/sysctl.d"
cat >"$ROOT/etc/sysctl.d/90-ccbench.conf" <<'EOF'
# written by ccbench emulab/setup-linux-host.sh (seed testbed values)
net.core.rmem_max = 10485760
net.core.wmem_max = 10485760
net.ipv4.tcp_rmem = 4096 131072 10485760
net.ipv4.tcp_wmem = 4096 16384 10485760
net.ipv4.tcp_no_metrics_save = 1
EOF
sysctl -p "$ROOT/etc/sysctl.d/90-ccbench.conf" || die "cannot apply the TCP sysctls"

# Load the optional congestion controls so a run can pick any of them.
for cc in tcp_bbr tcp_htcp tcp_vegas tcp_dctcp tcp_cdg tcp_hybla tcp_illinois tcp_westwood tcp_highspeed tcp_scalable tcp_lp tcp_nv tcp_yeah tcp_veno tcp_bic; do
    modprobe -q "$cc" 2>/dev/null || note "no module $cc"
done
note "available congestion controls: $(sysctl -n net.ipv4.tcp_available_congestion_control)"

# --- the experiment interface: offloads (if asked), record, route to the far side ---
dev=$(iface_of "$addr") || die "no interface holds $addr"
for d in $(devices_of "$dev"); do
    if [ "$offloads" = off ]; then
        for feature in tso gso gro lro; do
            ethtool -K "$d" "$feature" off 2>/dev/null || note "$d: cannot switch $feature off (fixed by the driver?)"
        done
    fi
    ethtool -k "$d" 2>/dev/null |
        grep -E '^(tcp-segmentation|generic-segmentation|generic-receive|large-receive)-offload:' || true
    record_nic "$d" ''
done
ip route replace "$route" via "$via" || die "cannot add route $route via $via"
note "route $route via $via"

# --- optional: the tooling container ---
if [ "$container" = yes ]; then
    context=$REPO/containers/linux-node
    if [ -f "$context/Dockerfile" ] || [ -f "$context/Containerfile" ]; then
        # BASE is the Dockerfile's base-image ARG
        podman build --network host --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" "$context" ||
            die "podman build of $context failed"
        note "container image $IMAGE built"
    else
        die "container=yes but $context has no Dockerfile"
    fi
fi

mkdir -p "$ROOT/var/tmp"
printf 'script=%s\nrole=%s\nexperiment_if=%s\naddr=%s\noffloads=%s\ncontainer=%s\ntime=%s\n' \
    "$NAME" "$role" "$dev" "$addr" "$offloads" "$container" "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" \
    >"$ROOT/var/tmp/ccbench-setup.done"
note "done: $role on $dev ($addr)"
