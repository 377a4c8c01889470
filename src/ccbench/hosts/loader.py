"""FreeBSD boot tunables (a role's `loader:` settings): read as the running kernel has
them, written into /boot/loader.conf between ccbench's own marker lines, and judged.

A boot tunable takes effect only when the host boots, so a run cannot set it: before a
run, ccbench reads each asked tunable on the run's FreeBSD endpoints; where a host does
not report the asked value, ccbench writes its block there and the run waits for the
reboot, as a run waits for its kernel (ccbench.lifecycle). Plans only: an Executor runs
them, so every command is exactly testable without FreeBSD at hand.

Which report proves a tunable (checked against FreeBSD's sources):
- `kenv -q NAME` prints the kernel environment's value and a newline, nothing and a
  non-zero exit where there is none (bin/kenv/kenv.c, kgetenv). That environment is the
  loader's, copied at boot (sys/kern/kern_environment.c, init_dynamic_kenv from md_envp
  and kern_envp; kenv(2) KENV_GET reads it): it proves the loader passed the value, not
  that any code read it (a misspelt name, or hw.vmx.* on FreeBSD 14, whose iflib vmx
  driver reads no hw.vmx tunable: sys/dev/vmware/vmxnet3/if_vmx.c, vmxnet3_attach_pre,
  takes its queue counts from iflib's dev.vmx.N.iflib.override_* instead).
- `sysctl -n NAME` prints what the kernel uses, for a tunable that is also a sysctl
  marked CTLFLAG_RDTUN: the kernel reads the environment into it at boot
  (sys/kern/kern_sysctl.c, sysctl_load_tunable_by_oid_locked), and may replace it.
`KERNEL_VALUE` names the tunables whose sysctl holds the value as passed unless the
kernel refused it: those are judged on the sysctl (a value the kernel capped is found
out, not measured under the wrong label); every other one on kenv.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ccbench.errors import CcbenchError, Refused
from ccbench.exec import Executor
from ccbench.host_settings import ROLES, SYSCTL_NAME, SYSCTL_VALUE, HostSettings
from ccbench.hosts.base import Argv
from ccbench.part import Part, d
from ccbench.reasons import Code, Reason

LOADER_CONF = "/boot/loader.conf"
OS = "freebsd"
BEGIN = "# ccbench begin"  # BLOCK's begin marker, a whole line

# Tunable -> where FreeBSD declares it a CTLFLAG_RDTUN sysctl that holds the value the
# loader passed (or the kernel's replacement for a value it refused).
KERNEL_VALUE = {
    # netisr_init: above mp_ncpus it is forced down; -1 means every CPU (DERIVED)
    "net.isr.maxthreads": "sys/net/netisr.c SYSCTL_INT(_net_isr, maxthreads, CTLFLAG_RDTUN)",
    "net.isr.bindthreads": "sys/net/netisr.c SYSCTL_INT(_net_isr, bindthreads, CTLFLAG_RDTUN)",
    "net.isr.maxqlimit": "sys/net/netisr.c SYSCTL_UINT(_net_isr, maxqlimit, CTLFLAG_RDTUN)",
    # netisr_init: above net.isr.maxqlimit it is forced down to it
    "net.isr.defaultqlimit":
        "sys/net/netisr.c SYSCTL_UINT(_net_isr, defaultqlimit, CTLFLAG_RDTUN)",
    "net.link.ifqmaxlen": "sys/net/if.c SYSCTL_INT(_net_link, ifqmaxlen, CTLFLAG_RDTUN)",
    "net.inet.tcp.soreceive_stream":
        "sys/netinet/tcp_subr.c SYSCTL_INT(_net_inet_tcp, soreceive_stream, CTLFLAG_RDTUN)",
}  # fmt: skip
# Values the kernel replaces by design, so only kenv can show what was asked:
# net.isr.maxthreads -1 becomes the CPU count (sys/net/netisr.c, netisr_init).
DERIVED = {"net.isr.maxthreads": ("-1",)}

# Writes the lines ($2...) between ccbench's markers at the end of file $1, with any
# earlier ccbench block removed and every other line kept as it was; no lines: only
# the block is removed. The new file is made beside the old one (cp -p: its owner and
# mode) and renamed over it, so the file is whole at every moment. Prints "written" or
# "unchanged" (the file already was so); exits 3 if the markers do not pair up (someone
# edited them: nothing is touched).
BLOCK = r"""f=$1; shift
t="$f.ccbench-new"; b='# ccbench begin'; e='# ccbench end'
if [ $# -eq 0 ] && ! grep -qxF "$b" "$f" 2>/dev/null; then
  echo unchanged; exit 0
elif [ -e "$f" ]; then
  cp -p "$f" "$t" || exit 1
  awk -v b="$b" -v e="$e" '
    $0 == b { if (inb) bad = 1; inb = 1; next }
    $0 == e { if (!inb) bad = 1; inb = 0; next }
    !inb { print }
    END { if (bad || inb) exit 3 }' "$f" > "$t"
  rc=$?
  if [ $rc -ne 0 ]; then
    rm -f "$t"
    [ $rc -eq 3 ] && echo "$f: its '$b' and '$e' lines do not pair up: fix them by hand" >&2
    exit $rc
  fi
else
  : > "$t" || exit 1
fi
[ $# -eq 0 ] || printf '%s\n' "$b" "$@" "$e" >> "$t" || { rm -f "$t"; exit 1; }
if [ -e "$f" ] && cmp -s "$f" "$t"; then rm -f "$t"; echo unchanged; exit 0; fi
mv -f "$t" "$f" && echo written
"""


def _name(name: str) -> str:
    """A tunable's name as an argv element (host_settings checked it; checked again
    here because it also becomes a line of /boot/loader.conf)."""
    if not SYSCTL_NAME.fullmatch(name):
        raise CcbenchError(f"bad loader tunable name {name!r}")
    return name


def read_plans(name: str) -> dict[str, Argv]:
    """How the host reports `name`: what the loader passed, what the kernel uses."""
    return {"kenv": ["kenv", "-q", _name(name)], "sysctl": ["sysctl", "-n", name]}


def judged_on(name: str, value: str) -> str:
    """'sysctl' where the kernel's value proves the tunable, else 'kenv' (the module's
    docstring says why)."""
    if name in KERNEL_VALUE and value not in DERIVED.get(name, ()):
        return "sysctl"
    return "kenv"


def lines(asked: Mapping[str, str]) -> list[str]:
    """The block's lines, `name="value"` (stand/lua/config.lua's env_var="value" form)."""
    out = []
    for name, value in sorted(asked.items()):
        if not SYSCTL_VALUE.fullmatch(value) or '"' in value:
            raise CcbenchError(f"bad loader tunable value {name}={value!r}")
        out.append(f'{_name(name)}="{value}"')
    return out


def write_block(asked: Mapping[str, str]) -> Argv:
    """ccbench's block of /boot/loader.conf made `asked` (a constant script; the lines
    are its arguments, never shell text)."""
    return ["sh", "-c", BLOCK, "ccbench-loader", LOADER_CONF, *lines(asked)]


def remove_block() -> Argv:
    """ccbench's block removed from /boot/loader.conf, every other line kept (the
    running kernel keeps its values until the next boot)."""
    return ["sh", "-c", BLOCK, "ccbench-loader", LOADER_CONF]


def block_gone() -> Argv:
    """Exits 0 when /boot/loader.conf holds no ccbench block: no file, or no line that is
    the begin marker (FreeBSD's grep(1), usr.bin/grep: exit 1 when no line is selected,
    above 1 on an error, which proves nothing)."""
    script = 'test ! -e "$1" || { grep -qxF "$2" "$1"; [ $? -eq 1 ]; }'
    return ["sh", "-c", script, "ccbench-loader", LOADER_CONF, BEGIN]


class Reported(Part):
    """One boot tunable as the host reported it."""

    kenv: str | None = d("what the loader passed: `kenv -q NAME` (null: not in the "
                         "kernel's environment)")  # fmt: skip
    sysctl: str | None = d("what the kernel uses: `sysctl -n NAME` (null: no such sysctl)")
    judged_on: str = d(
        "which of the two the asked value is compared with: sysctl where the kernel keeps "
        "the value passed (net.isr.*, net.link.ifqmaxlen, net.inet.tcp.soreceive_stream), "
        "kenv where it derives its own (net.isr.maxthreads -1) or reads none (hw.vmx.* on "
        "FreeBSD 14)"
    )


def read(ex: Executor, asked: Mapping[str, str]) -> dict[str, Reported]:
    """Each asked tunable as `ex`'s host reports it; nothing raises."""
    out = {}
    for name, value in sorted(asked.items()):
        got: dict[str, str | None] = {}
        for source, argv in read_plans(name).items():
            r = ex.run(argv, check=False)
            got[source] = r.stdout.strip() if r.ok and r.stdout.strip() else None
        out[name] = Reported(kenv=got["kenv"], sysctl=got["sysctl"],
                             judged_on=judged_on(name, value))  # fmt: skip
    return out


def _same(asked: str, found: str | None) -> bool:
    return found is not None and asked.split() == found.split()


def not_booted(asked: Mapping[str, str], found: Mapping[str, Reported]) -> list[str]:
    """The tunables the loader did not pass as asked: the host has not booted with them."""
    return [n for n, v in sorted(asked.items()) if n not in found or not _same(v, found[n].kenv)]


def judge(node: str, asked: Mapping[str, str], found: Mapping[str, Reported]) -> list[Reason]:
    """Reasons naming host, tunable, asked and found: not booted with it (kenv), or the
    kernel uses another value than the loader passed (sysctl)."""
    return [Reason.of(Code.HOST_SETTING, f"{node}: {words}", node=node, setting=f"loader {name}",
                      asked=asked[name], found=have, judged_on=on)
            for name, have, on, words in _mismatches(asked, found)]  # fmt: skip


def _mismatches(
    asked: Mapping[str, str], found: Mapping[str, Reported]
) -> list[tuple[str, str | None, str, str]]:
    """(tunable, the value found, where: kenv or sysctl, in words) of each tunable asked
    and not in force."""
    out = []
    for name, value in sorted(asked.items()):
        r = found.get(name)
        if r is None or not _same(value, r.kenv):
            have = r.kenv if r else None
            out.append((name, have, "kenv", f"loader {name} asked {value!r}, found {have!r} "
                        "(kenv: not booted with it)"))  # fmt: skip
        elif r.judged_on == "sysctl" and not _same(value, r.sysctl):
            out.append((name, r.sysctl, "sysctl", f"loader {name} asked {value!r}, found "
                        f"{r.sysctl!r} (sysctl: the loader passed {r.kenv!r}, the kernel uses "
                        f"{r.sysctl!r})"))  # fmt: skip
    return out


@dataclass(frozen=True)
class NodeWait:
    """A host the run waits for: what its role asks, what it reported (kenv), and
    whether ccbench wrote its block at this check (False: it was there already)."""

    node: str
    role: str
    asked: dict[str, str]
    found: dict[str, str | None]
    wrote: bool

    def to_dict(self) -> dict[str, object]:
        return {"role": self.role, "asked": self.asked, "found": self.found,
                "wrote": self.wrote}  # fmt: skip


def pending(ex: Executor, node: str, role: str, asked: Mapping[str, str]) -> NodeWait | None:
    """None when `node` reports every asked tunable as the loader's; else ccbench's block
    is written there (unless it already holds these lines) and the wait returned.
    CcbenchError, one line, where the block cannot be written."""
    found = read(ex, asked)
    if not not_booted(asked, found):
        return None
    r = ex.run(write_block(asked), check=False)
    if not r.ok:
        why = (r.stderr or r.stdout).strip().splitlines()
        raise CcbenchError(f"{node}: could not write ccbench's lines into {LOADER_CONF}: "
                           f"{why[0] if why else f'exit {r.returncode}'}")  # fmt: skip
    kenv = {n: f.kenv for n, f in found.items()}
    return NodeWait(node, role, dict(sorted(asked.items())), kenv, r.stdout.strip() == "written")


def waiting_reason(waits: list[NodeWait]) -> str:
    """'waiting for loader tunables net.isr.maxthreads=-1 on s1, s2: ccbench wrote them
    to /boot/loader.conf; reboot s1, s2' (hosts asking the same lines grouped)."""
    groups: dict[str, list[str]] = {}
    for w in waits:
        groups.setdefault(", ".join(f"{k}={v}" for k, v in w.asked.items()), []).append(w.node)
    what = "; ".join(f"{tun} on {', '.join(nodes)}" for tun, nodes in groups.items())
    return (f"waiting for loader tunables {what}: ccbench wrote them to {LOADER_CONF}; "
            f"reboot {', '.join(w.node for w in waits)}")  # fmt: skip


def check_booted(ex: Executor, where: str, os_name: str, asked: Mapping[str, str]) -> None:
    """Right before a run's changes: Refused (one line, nothing changed) unless the host
    runs FreeBSD and reports every asked tunable (the run waited for the reboot: what
    is found here is a kernel that replaced a value, or a host changed since)."""
    if os_name != OS:
        raise Refused(f"{where}: loader tunables are FreeBSD's boot settings ({LOADER_CONF}); "
                      f"{os_name} has none")  # fmt: skip
    wrong = _mismatches(asked, read(ex, asked))
    if wrong:
        raise Refused(f"{where}: {'; '.join(words for *_, words in wrong)}")


def check_variant(where: str, sender_os: str, testbed_oses: tuple[str, ...],
                  host: HostSettings) -> None:  # fmt: skip
    """At `ccbench matrix`: loader tunables asked of hosts that cannot run FreeBSD (the
    variant's senders run `sender_os`; the receivers run one of the testbed's OSes),
    refused in one line. What only the hosts can say is refused before the run
    (host_apply)."""
    for role in ROLES:
        if not host.role(role).loader:
            continue
        if role == "senders" and sender_os != OS:
            raise CcbenchError(f"{where}: host.senders.loader: loader tunables are "
                               f"FreeBSD's boot settings; its senders run {sender_os}")  # fmt: skip
        if OS not in testbed_oses:
            raise CcbenchError(f"{where}: host.{role}.loader: loader tunables are FreeBSD's "
                               f"boot settings; this testbed's hosts run "
                               f"{', '.join(sorted(testbed_oses))}")  # fmt: skip
