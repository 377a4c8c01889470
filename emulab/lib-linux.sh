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

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$@"
}
