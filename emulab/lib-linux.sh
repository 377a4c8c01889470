# ccbench: helpers of the Linux start-up scripts (setup-router.sh,
# setup-linux-host.sh), sourced after lib.sh.
# shellcheck shell=sh

# The interface holding IPv4 address $1. Emulab configures experiment interfaces
# early in boot; wait up to a minute in case this runs first.
iface_of() {
    tries=0
    while [ "$tries" -lt 60 ]; do
        dev=$(ip -o -4 addr show | awk -v a="$1" '{split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
        if [ -n "$dev" ]; then
            printf '%s\n' "$dev"
            return 0
        fi
        tries=$((tries + 1))
        sleep 1
    done
    return 1
}

# For a VLAN interface (eth1.258) the device(s) under it, then $1 itself: lower
# first, since a stacked device cannot drop an offload its lower device still does.
devices_of() {
    for lower in /sys/class/net/"$1"/lower_*; do
        [ -e "$lower" ] && printf '%s\n' "${lower##*/lower_}"
    done
    printf '%s\n' "$1"
}

apt_update() {
    packages_allowed || { note "CCBENCH_SETUP_NO_PACKAGES=1: no apt-get update"; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q
}

apt_install() {
    packages_allowed || { note "CCBENCH_SETUP_NO_PACKAGES=1: not installing $*"; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$@"
}

# $1 as a JSON string that keeps its lines (\n) and tabs (\t), e.g. ethtool's tables;
# other control characters dropped.
json_text() {
    tab=$(printf '\t')
    printf '%s' "$1" | tr -d '\000-\010\013-\037' |
        sed "s/\\\\/\\\\\\\\/g; s/\"/\\\\\"/g; s/$tab/\\\\t/g" |
        awk 'BEGIN {printf "\""} {printf "%s%s", (NR > 1 ? "\\n" : ""), $0} END {printf "\""}'
}

# Channel count of $1 as `ethtool -l` prints it: $2 "max" (Pre-set maximums) or "cur"
# (Current hardware settings), $3 RX, TX, Other or Combined. Empty when the driver
# does not tell; "n/a" (netlink ethtool) or 0 (ioctl ethtool) when it has none of that
# kind (ethtool netlink/channels.c channels_reply_cb, ethtool.c dump_channels).
channels_of() {
    ethtool -l "$1" 2>/dev/null | awk -v part="$2" -v k="$3:" '
        /^Current hardware settings/ {cur = 1}
        $1 == k && (cur ? part == "cur" : part == "max") {print $2; exit}'
}

# How many transmit queues the kernel uses on $1: one queues/tx-N directory each
# (net/core/net-sysfs.c netdev_queue_update_kobjects follows real_num_tx_queues).
# Empty when $1 has no queues directory.
tx_queue_count() {
    [ -d "/sys/class/net/$1/queues" ] || return 0
    n=0
    for q in /sys/class/net/"$1"/queues/tx-*; do
        [ -d "$q" ] && n=$((n + 1))
    done
    printf '%s\n' "$n"
}

# Each transmit queue's byte queue limits (BQL: limit, limit_max, inflight in bytes;
# net/core/net-sysfs.c bql_show_limit, bql_show_inflight) as `grep -H` prints them,
# "/sys/class/net/eth5/queues/tx-0/byte_queue_limits/limit:30280"; nothing where the
# driver has no BQL (veth).
bql_of() {
    q=/sys/class/net/$1/queues
    grep -H . "$q"/tx-*/byte_queue_limits/limit "$q"/tx-*/byte_queue_limits/limit_max \
        "$q"/tx-*/byte_queue_limits/inflight 2>/dev/null || true
}

# Record interface $1 (Linux) in /var/tmp/ccbench/nic-$1.json: driver, link speed,
# offloads, and the TX ring: $2 descriptors asked (empty: none asked), what the driver
# set (ethtool -g after setting: drivers clamp without an error, igb to at least 64 on
# Ubuntu 24.04's kernel, 80 on kernels before 2023's "igb: Change IGB_MIN" patch)
# and its maximum. "tx_ring_note" says why asked and set differ.
# Its transmit queues: `ethtool -l` as printed ("ethtool_l"), how many the kernel uses
# ("tx_queues"), $3 how many were asked (empty: none asked), "tx_queues_note" why
# they may differ ($4: what ethtool said when the driver refused), and each
# queue's BQL state at set-up ("tx_bql", bql_of: the limit starts at 0 after a queue
# reset and grows with traffic, lib/dynamic_queue_limits.c dql_reset).
record_nic() {
    rings=$(ethtool -g "$1" 2>/dev/null) || rings=''
    tx_set=$(printf '%s\n' "$rings" | awk '/^Current hardware settings/ {c = 1} c && /^TX:/ {print $2; exit}')
    tx_max=$(printf '%s\n' "$rings" | awk '/^Current/ {exit} /^TX:/ {print $2; exit}')
    info=$(ethtool -i "$1" 2>/dev/null) || info=''
    field() { printf '%s\n' "$info" | awk -v k="$1" 'index($0, k ": ") == 1 {print substr($0, length(k) + 3); exit}'; }
    driver=$(field driver)
    speed=$(cat "/sys/class/net/$1/speed" 2>/dev/null) || speed=''
    features=$(ethtool -k "$1" 2>/dev/null) || features=''
    feature() { printf '%s\n' "$features" | awk -v k="$1" '$1 == k ":" {print $2; exit}'; }
    chans=$(ethtool -l "$1" 2>/dev/null) || chans=''
    txq=$(tx_queue_count "$1")
    qwhy=''
    if [ -n "${3:-}" ] && [ -n "${4:-}" ]; then
        qwhy="${driver:-the driver} refused it: $4"
    elif [ -n "${3:-}" ] && [ -z "$chans" ]; then
        qwhy="the driver does not report channels"
    fi
    why=''
    if [ -n "$2" ] && [ "$2" -gt 0 ]; then
        if [ -z "$tx_set" ]; then
            why="the driver does not report ring sizes"
        elif [ "$tx_set" -gt "$2" ]; then
            why="${driver:-the driver} raised it: below its minimum"
        elif [ "$tx_set" -lt "$2" ]; then
            why="${driver:-the driver} lowered it: above its maximum${tx_max:+ $tx_max}"
        fi
    fi
    {
        printf 'interface\t%s\n' "$(json_str "$1")"
        printf 'node_script\t%s\n' "$(json_str "$NAME")"
        printf 'driver\t%s\n' "$(json_str "$driver")"
        printf 'driver_version\t%s\n' "$(json_str "$(field version)")"
        printf 'firmware\t%s\n' "$(json_str "$(field firmware-version)")"
        printf 'bus\t%s\n' "$(json_str "$(field bus-info)")"
        printf 'speed_mbps\t%s\n' "$(json_uint "$speed")"
        printf 'tx_ring_asked\t%s\n' "$(json_uint "$2")"
        printf 'tx_ring_set\t%s\n' "$(json_uint "$tx_set")"
        printf 'tx_ring_max\t%s\n' "$(json_uint "$tx_max")"
        printf 'tx_ring_note\t%s\n' "$(json_str "$why")"
        printf 'ethtool_l\t%s\n' "$(json_text "$chans")"
        printf 'tx_queues\t%s\n' "$(json_uint "$txq")"
        printf 'tx_queues_asked\t%s\n' "$(json_uint "${3:-}")"
        printf 'tx_queues_note\t%s\n' "$(json_str "$qwhy")"
        printf 'tx_bql\t%s\n' "$(json_text "$(bql_of "$1")")"
        for k in tcp-segmentation-offload generic-segmentation-offload generic-receive-offload large-receive-offload; do
            printf '%s\t%s\n' "$k" "$(json_str "$(feature "$k")")"
        done
        printf 'time\t%s\n' "$(json_str "$(date -u '+%Y-%m-%dT%H:%M:%SZ')")"
    } | write_nic_record "$1"
}
