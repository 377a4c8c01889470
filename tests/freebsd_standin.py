"""A stand-in FreeBSD kernel for plan tests (no FreeBSD here): `sysctl`, `kldstat`,
`kldload` and `kldunload` as small sh scripts over a state directory, first on PATH,
so ccbench's FreeBSD scripts (testbed.lab KLD_RESTORE/KLD_SAME, the capability checks)
run for real against the rules they must respect. Each rule is the upstream one:

- `sysctl net.inet.tcp.functions_default=NAME` needs the stack registered (its module
  loaded); `net.inet.tcp.cc.algorithm=NAME` needs the algorithm (built in or cc_NAME.ko).
- Unloading the module of the default stack fails with EBUSY (sys/netinet/tcp_subr.c,
  deregister_tcp_functions: "You can't free the current default"), so does the module of
  the default CC (sys/netinet/cc/cc.c, cc_modevent MOD_UNLOAD / cc_deregister_algo_locked
  via cc_check_default): kldunload prints "can't unload file: Device busy", exits 1.
- A module another loaded module depends on (tcphpts under tcp_rack) is refused here
  while its dependent is loaded: stricter than FreeBSD, which drops a reference and
  unloads it with its last dependent (sys/kern/kern_linker.c, linker_file_unload), so
  an order that passes here passes there.
- kldstat prints its header and one line per file, the name in column 5; `-q -m NAME`
  exits 0 when module NAME is loaded (sbin/kldstat/kldstat.c).
- An unknown oid: "sysctl: unknown oid 'NAME'" on stderr, exit 1 (sbin/sysctl/sysctl.c).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ccbench.exec import Result

_SYSCTL = r"""#!/bin/sh
S=$CCB_STANDIN; n=0; N=0
while getopts nNqi o; do case $o in n) n=1 ;; N) N=1 ;; esac; done
shift $((OPTIND - 1)); r=0
loaded() { grep -qx "$1" "$S/modules"; }
noent() { echo "sysctl: $1: No such file or directory" >&2; r=1; }
show() {  # $1 a name, its value as -n / -N / neither asks
  if [ $N = 1 ]; then echo "$1"; elif [ $n = 1 ]; then cat "$S/sysctl/$1"
  else echo "$1: $(cat "$S/sysctl/$1")"; fi
}
for a in "$@"; do
  k=${a%%=*}; f="$S/sysctl/$k"
  case $a in
  *=*)
    v=${a#*=}
    if [ ! -f "$f" ]; then echo "sysctl: unknown oid '$k'" >&2; r=1; continue; fi
    case $k in
    net.inet.tcp.functions_default)
      [ "$v" = freebsd ] || loaded "tcp_$v.ko" || { noent "$k=$v"; continue; } ;;
    net.inet.tcp.cc.algorithm)
      case " $(cat "$S/builtin_cc") " in
      *" $v "*) ;;
      *) loaded "cc_$v.ko" || { noent "$k=$v"; continue; } ;;
      esac ;;
    esac
    echo "$k: $(cat "$f") -> $v"; printf '%s\n' "$v" > "$f" ;;
  *)
    if [ -f "$f" ]; then show "$k"
    elif ls "$S/sysctl/" | grep -q "^$k\."; then
      for g in $(ls "$S/sysctl/" | grep "^$k\."); do show "$g"; done
    else echo "sysctl: unknown oid '$k'" >&2; r=1; fi ;;
  esac
done
exit $r
"""

_KLDSTAT = r"""#!/bin/sh
S=$CCB_STANDIN; q=0; m=""
while getopts qm: o; do case $o in q) q=1 ;; m) m=$OPTARG ;; esac; done
if [ -n "$m" ]; then
  grep -qx "${m%.ko}.ko" "$S/modules" && exit 0
  [ $q = 1 ] || echo "kldstat: can't find module $m: No such file or directory" >&2; exit 1
fi
echo "Id Refs Address                Size Name"
i=1
while read -r f; do
  printf '%2d %4d 0xffffffff80200000 %8x %s\n' $i 1 4096 "$f"; i=$((i + 1))
done < "$S/modules"
"""

_KLDLOAD = r"""#!/bin/sh
S=$CCB_STANDIN; [ "$1" = -n ] && shift; f=${1%.ko}.ko
grep -qx "$f" "$S/modules" && exit 0
grep -qx "$f" "$S/available" ||
  { echo "kldload: can't load ${1%.ko}: No such file or directory" >&2; exit 1; }
# tcp_rack and tcp_bbr depend on tcphpts: the linker loads it first
case $f in tcp_rack.ko|tcp_bbr.ko)
  grep -qx tcphpts.ko "$S/available" && ! grep -qx tcphpts.ko "$S/modules" &&
    echo tcphpts.ko >> "$S/modules" ;;
esac
echo "$f" >> "$S/modules"
"""

_KLDUNLOAD = r"""#!/bin/sh
S=$CCB_STANDIN; [ "$1" = -n ] && shift; f=${1%.ko}.ko; [ "$1" = kernel ] && f=kernel
grep -qx "$f" "$S/modules" || { echo "kldunload: can't find file $1" >&2; exit 1; }
busy() { echo "kldunload: can't unload file: Device busy" >&2; exit 1; }
d=$(cat "$S/sysctl/net.inet.tcp.functions_default")
c=$(cat "$S/sysctl/net.inet.tcp.cc.algorithm")
case $f in
kernel) busy ;;
tcp_*.ko) [ "tcp_$d.ko" = "$f" ] && busy ;;
cc_*.ko) [ "cc_$c.ko" = "$f" ] && busy ;;
tcphpts.ko) grep -qx -e tcp_rack.ko -e tcp_bbr.ko "$S/modules" && busy ;;
esac
grep -vx "$f" "$S/modules" > "$S/modules.new"; mv "$S/modules.new" "$S/modules"
"""

SYSCTLS = {
    "net.inet.tcp.functions_default": "freebsd",
    "net.inet.tcp.cc.algorithm": "cubic",
    "net.inet.tcp.hostcache.enable": "1",
    "kern.ipc.maxsockbuf": "2097152",
    "net.inet.tcp.sendbuf_max": "2097152",
    "net.inet.tcp.recvbuf_max": "2097152",
}


class FreeBSDStandin:
    """One stand-in host under `root`: `loaded` the kernel files loaded at first,
    `available` those kldload finds, `sysctls` beside the defaults above."""

    def __init__(
        self, root: Path, *, loaded: Sequence[str] = ("kernel",),
        available: Sequence[str] = ("tcphpts.ko", "tcp_rack.ko", "tcp_bbr.ko", "cc_htcp.ko",
                                    "cc_cdg.ko", "siftr.ko"),
        builtin_cc: Sequence[str] = ("newreno", "cubic"), sysctls: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.state, self.bin = root / "state", root / "bin"
        (self.state / "sysctl").mkdir(parents=True)
        self.bin.mkdir()
        (self.state / "modules").write_text("".join(f"{m}\n" for m in loaded))
        (self.state / "available").write_text("".join(f"{m}\n" for m in available))
        (self.state / "builtin_cc").write_text(" ".join(builtin_cc))
        for k, v in {**SYSCTLS, **(sysctls or {})}.items():
            (self.state / "sysctl" / k).write_text(v + "\n")
        for name, text in (("sysctl", _SYSCTL), ("kldstat", _KLDSTAT), ("kldload", _KLDLOAD),
                           ("kldunload", _KLDUNLOAD)):  # fmt: skip
            p = self.bin / name
            p.write_text(text)
            p.chmod(0o755)
        self.log: list[list[str]] = []
        self.name = root.name

    def modules(self) -> list[str]:
        return (self.state / "modules").read_text().split()

    def sysctl(self, key: str) -> str:
        return (self.state / "sysctl" / key).read_text().strip()

    def run(self, argv: Sequence[str], check: bool = True, timeout: float | None = 30,
            **_: object) -> Result:  # fmt: skip
        """As an executor's run(), here, with the stand-in's tools first on PATH."""
        argv = [str(a) for a in argv]
        self.log.append(argv)
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}",
               "CCB_STANDIN": str(self.state)}  # fmt: skip
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        return Result(tuple(argv), cp.returncode, cp.stdout, cp.stderr)

    run_where_tools_run = run  # no container on FreeBSD: the tools run on the host
