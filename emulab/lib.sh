# ccbench: what the emulab/setup-*.sh start-up scripts share. Sourced (not run) after
# the script has set NAME (its name, for the log and messages) and ROOT (the tests'
# CCBENCH_SETUP_ROOT prefix, empty on a node). POSIX sh: also FreeBSD's /bin/sh.
# shellcheck shell=sh

# --- logging: everything to the log; errors also to the caller's stderr ---
LOGDIR=$ROOT/local/logs
mkdir -p "$LOGDIR" 2>/dev/null || LOGDIR=$ROOT/var/tmp
LOG=$LOGDIR/ccbench-$NAME.log
exec 3>&2
exec >>"$LOG" 2>&1
echo "=== $(date -u '+%Y-%m-%dT%H:%M:%SZ') $NAME $*"

die() {
    echo "$NAME: error: $*"
    echo "$NAME: error: $*" >&3
    exit 1
}
note() { echo "$NAME: $*"; }

# Not ready until this run succeeds (a failed rerun must not look finished).
rm -f "$ROOT/var/tmp/ccbench-setup.done"

# --- packages: CCBENCH_SETUP_NO_PACKAGES=1 installs nothing (a machine that is not a
# fresh Emulab node, e.g. scripts/emulab_rehearsal.py on the control machine: its tools
# are there already and its package set must not change); a missing required tool is
# then an error, a missing optional one a note ---
packages_allowed() { [ "${CCBENCH_SETUP_NO_PACKAGES:-}" != 1 ]; }

# --- argument checks ---
is_uint() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    [ "${#1}" -le 9 ]
}
is_ipv4() { printf '%s\n' "$1" | grep -Eq '^([0-9]{1,3}\.){3}[0-9]{1,3}$'; }
is_net() { printf '%s\n' "$1" | grep -Eq '^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$'; }

# --- NIC records: /var/tmp/ccbench/nic-<interface>.json, one JSON object per
# experiment interface, rewritten on every run of a start-up script ---
NICDIR=$ROOT/var/tmp/ccbench

# $1 as a JSON string (quotes and backslashes escaped, control characters dropped).
json_str() {
    printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

# $1 as a JSON number if it is an unsigned integer, else null.
json_uint() {
    if is_uint "$1"; then printf '%s' "$1"; else printf 'null'; fi
}

# Write the record of interface $1 from "key<TAB>json value" lines on stdin.
write_nic_record() {
    mkdir -p "$NICDIR"
    awk -F '\t' 'BEGIN {printf "{"} NR > 1 {printf ", "} {printf "\"%s\": %s", $1, $2} END {print "}"}' \
        >"$NICDIR/nic-$1.json.tmp" && mv "$NICDIR/nic-$1.json.tmp" "$NICDIR/nic-$1.json"
    note "$1: recorded $NICDIR/nic-$1.json: $(cat "$NICDIR/nic-$1.json")"
}
