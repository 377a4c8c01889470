#!/bin/sh
# Entrypoint of the ccbench Linux-node image: run the given command as is.
# The one extra: `versions` prints one line per tool, "NAME VERSION" (or
# "NAME MISSING"), so a run can record exactly what it measured with.
set -eu

# First line matching the basic regex $1 in the combined output of the command that
# follows, or nothing if that command is absent.
first_match() {
    pattern=$1
    shift
    command -v "$1" >/dev/null 2>&1 || return 0
    "$@" 2>&1 | grep -m 1 -e "$pattern" || true
}

# netperf without --enable-demo rejects -D at option parsing ("Demo Mode not
# configured"); that is the test flent makes too. Port 9 on loopback refuses at once.
netperf_demo() {
    if timeout 5 netperf -l 1 -D -0.2 -H 127.0.0.1 -p 9 2>&1 | grep -q 'Demo Mode not configured'; then
        echo no
    else
        echo yes
    fi
}

# show NAME PATTERN COMMAND...: one "NAME VERSION" line.
show() {
    name=$1
    pattern=$2
    shift 2
    line=$(first_match "$pattern" "$@")
    if [ -n "$line" ]; then
        printf '%-9s %s\n' "$name" "$line"
    else
        printf '%-9s MISSING\n' "$name"
    fi
}

versions() {
    show iperf3 . iperf3 --version
    show iperf2 . iperf --version
    if command -v netperf >/dev/null 2>&1; then
        printf '%-9s %s (demo mode: %s)\n' netperf "$(first_match . netperf -V)" "$(netperf_demo)"
    else
        printf '%-9s MISSING\n' netperf
    fi
    show flent '^Flent v' flent --version
    show irtt . irtt version
    show fping . fping --version
    show ping . ping -V
    show iproute2 . ip -V
    show ethtool . ethtool --version
    show tcpdump . tcpdump --version
    show procps . ps --version
    show python3 . python3 --version
    show kernel . uname -r
}

if [ "$#" -eq 0 ]; then
    set -- versions
fi

if [ "$1" = "versions" ] && [ "$#" -eq 1 ]; then
    versions
    exit 0
fi

exec "$@"
