#!/bin/sh
# ccbench: set up a FreeBSD sender of the dumbbell on Emulab/CloudLab.
#
# profile.py's startup service runs it as root on every boot:
#   setup-freebsd-sender.sh role=sender addr=10.1.1.2 route=10.1.3.0/24 via=10.1.1.1 offloads=default
#
# - every mod_cc(4) algorithm this kernel has (cc_newreno cc_cubic cc_htcp cc_vegas
#   cc_cdg cc_chd cc_hd cc_dctcp), the RACK and BBR stacks (tcphpts first, for
#   kernels where it is a module) and siftr(4) loaded;
# - the seed's sysctls: host cache off, 10 MB socket buffers;
# - iperf3 (and, optional, fping and tcplog_dumper) installed from packages, unattended and also on a
#   release past its end of life (a package the repository lacks: one line saying so);
# - offloads: offloads=default keeps FreeBSD's settings (as the seed: only the
#   routers are tuned); offloads=off runs ifconfig IF -tso -lro -txcsum -rxcsum on the
#   experiment interface (the one holding addr) and the device under a vlan;
# - those interfaces recorded in /var/tmp/ccbench/nic-<interface>.json (driver,
#   media, ifconfig options);
# - a route to the other side of the dumbbell via rt1.
# The stack and CC of each run are chosen later by ccbench (sysctl
# net.inet.tcp.functions_default / net.inet.tcp.cc.algorithm), not here.
# Everything is applied live: Emulab reruns this at every boot. Idempotent.
# Log: /local/logs/ccbench-setup-freebsd-sender.log; on success /var/tmp/ccbench-setup.done.
# CCBENCH_SETUP_NO_PACKAGES=1 installs nothing (scripts/emulab_rehearsal.py).
# Tests only: CCBENCH_SETUP_ROOT prefixes every file path this script uses;
# CCBENCH_SETUP_BIN is searched first for commands.
set -eu
PATH=${CCBENCH_SETUP_BIN:+$CCBENCH_SETUP_BIN:}/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin
export PATH

NAME=setup-freebsd-sender
BUF=10485760 # 10 MB: twice the 1 Gbit x 40 ms BDP, as in the seed
ROOT=${CCBENCH_SETUP_ROOT:-}

# Logging, die/note, argument checks and helpers shared by the start-up scripts.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# --- arguments: key=value, each checked against a strict pattern ---
role='' addr='' route='' via='' offloads=default
for arg in "$@"; do
    case $arg in
    role=*) role=${arg#*=} ;;
    addr=*) addr=${arg#*=} ;;
    route=*) route=${arg#*=} ;;
    via=*) via=${arg#*=} ;;
    offloads=*) offloads=${arg#*=} ;;
    *) die "unknown argument: $arg" ;;
    esac
done

[ "$role" = sender ] || die "role must be sender, not '$role'"
is_ipv4 "$addr" || die "addr must be an IPv4 address, not '$addr'"
is_net "$route" || die "route must be a network such as 10.1.3.0/24, not '$route'"
is_ipv4 "$via" || die "via must be an IPv4 address, not '$via'"
case $offloads in default | off) ;; *) die "offloads must be default or off, not '$offloads'" ;; esac

# --- helpers ---
# Is word $2 listed by sysctl $1? Works for the old comma lists and for the
# newer tables (net.inet.tcp.cc.available, net.inet.tcp.functions_available).
listed() {
    sysctl -n "$1" 2>/dev/null | tr ',' ' ' |
        awk -v w="$2" '{for (i = 1; i <= NF; i++) if ($i == w) found = 1} END {exit !found}'
}

# The interface holding IPv4 address $1 (waits up to a minute for Emulab's
# interface set-up, in case this runs first).
iface_of() {
    tries=0
    while [ "$tries" -lt 60 ]; do
        dev=$(ifconfig -a | awk -v a="$1" '
            /^[^ \t]/ {name = $1; sub(/:$/, "", name)}
            $1 == "inet" && $2 == a {print name; exit}')
        if [ -n "$dev" ]; then
            printf '%s\n' "$dev"
            return 0
        fi
        tries=$((tries + 1))
        sleep 1
    done
    return 1
}

# For a vlan(4) interface its parent ("vlan: 258 ... parent interface: ix1"),
# then $1 itself: the parent first, a vlan inherits its offload capabilities.
devices_of() {
    ifconfig "$1" | awk '/vlan:/ {for (i = 1; i < NF; i++) if ($i == "interface:") print $(i + 1)}'
    printf '%s\n' "$1"
}

setsysctl() {
    sysctl "$1=$2" || die "cannot set $1=$2"
}

# --- kernel modules ---
for cc in newreno cubic htcp vegas cdg chd hd dctcp; do
    if listed net.inet.tcp.cc.available "$cc"; then
        note "cc $cc: present"
    elif kldload -n "cc_$cc"; then
        note "cc $cc: loaded cc_$cc"
    else
        note "cc $cc: no module cc_$cc in this kernel"
    fi
done
if ! listed net.inet.tcp.functions_available rack || ! listed net.inet.tcp.functions_available bbr; then
    # tcp_rack and tcp_bbr need the high-precision timer system; on kernels built
    # without "options TCPHPTS" it is the tcphpts module and must come first.
    kldload -n tcphpts || note "tcphpts: not loadable (built into this kernel?)"
fi
for stack in rack bbr; do
    if listed net.inet.tcp.functions_available "$stack"; then
        note "stack $stack: present"
    elif kldload -n "tcp_$stack"; then
        note "stack $stack: loaded tcp_$stack"
    else
        note "stack $stack: no module tcp_$stack in this kernel"
    fi
done
kldload -n siftr || note "siftr: not loadable"
kldload -n siftr2 2>/dev/null || note "siftr2: not installed (optional, out of tree)"

# --- sysctls (the seed's values); maxsockbuf first, the others cannot exceed it ---
setsysctl kern.ipc.maxsockbuf "$BUF"
setsysctl net.inet.tcp.sendbuf_max "$BUF"
setsysctl net.inet.tcp.recvbuf_max "$BUF"
setsysctl net.inet.tcp.hostcache.enable 0
sysctl net.inet.tcp.hostcache.purgenow=1 || note "cannot purge the host cache"

# --- packages ---
# pkg unattended on any 14.x image, also one past its end of life: ASSUME_ALWAYS_YES
# answers pkg's questions (its own bootstrap included); IGNORE_OSVERSION lets it take
# packages built for a newer release of the same major version, all the repository
# holds once a release is out of support (14.2's are built on 14.3), where pkg would
# otherwise stop at "Newer FreeBSD version for package ..." (pkg.conf(5) IGNORE_OSVERSION).
pkg_env() { env ASSUME_ALWAYS_YES=yes IGNORE_OSVERSION=yes pkg "$@"; }

# Install package $1 unless it is there; pkg's output goes to the log. On failure,
# pkg_why is one line: what pkg said that names the problem (a package the repository
# lacks is "No packages available to install matching ..."), else its last error line,
# else its last line.
pkg_install() {
    pkg_env info -e "$1" && return 0
    if out=$(pkg_env install -y "$1" 2>&1); then
        printf '%s\n' "$out"
        return 0
    fi
    printf '%s\n' "$out"
    why=$(printf '%s\n' "$out" | grep -E 'No packages available|Newer FreeBSD version' | head -n 1)
    [ -n "$why" ] || why=$(printf '%s\n' "$out" | grep -E '^pkg(-static)?: ' | tail -n 1)
    [ -n "$why" ] || why=$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -n 1)
    case $why in
    *'No packages available'*) pkg_why="$1: not in the package repository ($why)" ;;
    *) pkg_why="$1: pkg install failed (${why:-no output})" ;;
    esac
    return 1
}

if ! packages_allowed; then
    command -v iperf3 >/dev/null 2>&1 || die "iperf3 missing (CCBENCH_SETUP_NO_PACKAGES=1: nothing is installed)"
elif ! pkg_install iperf3; then
    die "$pkg_why"
fi
note "iperf3: $(iperf3 --version 2>&1 | head -n 1)"
# fping for probe_tool fping (latency under load); optional: ping needs nothing
if packages_allowed && ! pkg_install fping; then
    note "warning: $pkg_why; probe_tool ping still works"
fi
# tcplog_dumper writes the TCP black-box logs (bblog: true); optional like fping
if packages_allowed && ! pkg_install tcplog_dumper; then
    note "warning: $pkg_why; runs with bblog: true will record no BBLog"
fi

# Record interface $1 in /var/tmp/ccbench/nic-$1.json: driver (the name without its
# unit number), media and status lines and the options ifconfig(8) lists.
record_nic() {
    out=$(ifconfig "$1" 2>/dev/null) || out=''
    {
        printf 'interface\t%s\n' "$(json_str "$1")"
        printf 'node_script\t%s\n' "$(json_str "$NAME")"
        printf 'driver\t%s\n' "$(json_str "$(printf '%s' "$1" | sed 's/[0-9]*$//')")"
        printf 'media\t%s\n' "$(json_str "$(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*media: //p' | head -n 1)")"
        printf 'status\t%s\n' "$(json_str "$(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*status: //p' | head -n 1)")"
        printf 'options\t%s\n' "$(json_str "$(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*options=[0-9a-f]*<\(.*\)>$/\1/p' | head -n 1)")"
        printf 'time\t%s\n' "$(json_str "$(date -u '+%Y-%m-%dT%H:%M:%SZ')")"
    } | write_nic_record "$1"
}

# --- the experiment interface: offloads (if asked), record, route to the far side ---
dev=$(iface_of "$addr") || die "no interface holds $addr"
for d in $(devices_of "$dev"); do
    if [ "$offloads" = off ]; then
        ifconfig "$d" -tso -lro -txcsum -rxcsum || die "cannot switch offloads off on $d"
        ifconfig "$d" -txcsum6 -rxcsum6 2>/dev/null || true # not every NIC has them
    fi
    ifconfig "$d" | grep -E 'options=' || true
    record_nic "$d"
done
route -n delete -net "$route" >/dev/null 2>&1 || true
route -n add -net "$route" "$via" || die "cannot add route $route via $via"
note "route $route via $via"

# --- provenance for the run records ---
uname -a
sysctl net.inet.tcp.cc.available net.inet.tcp.functions_available || true
kldstat || true

mkdir -p "$ROOT/var/tmp"
printf 'script=%s\nrole=%s\nexperiment_if=%s\naddr=%s\noffloads=%s\ntime=%s\n' \
    "$NAME" "$role" "$dev" "$addr" "$offloads" "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" \
    >"$ROOT/var/tmp/ccbench-setup.done"
note "done: $role on $dev ($addr)"
