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

# --- argument checks ---
is_uint() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    [ "${#1}" -le 9 ]
}
is_ipv4() { printf '%s\n' "$1" | grep -Eq '^([0-9]{1,3}\.){3}[0-9]{1,3}$'; }
is_net() { printf '%s\n' "$1" | grep -Eq '^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$'; }
