"""`python -m ccbench.sampler`: poll `ss -tinH` every INTERVAL into TS blocks.

Runs inside a sender's namespace for the length of a run. The file format (a line
`TS <unix seconds>` then the raw ss output) is what ccbench.parse.ss reads; keeping
ss's own text makes the raw file checkable by eye against ss(8).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

_stop = False


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ccbench.sampler")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--out", help="file to write (default: stdout)")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    cmd = ["ss", "-tinH", "state", "established"]
    nxt = time.monotonic()
    with open(a.out, "w") if a.out else sys.stdout as out:
        while not _stop:
            ts = time.time()
            cp = subprocess.run(cmd, capture_output=True, text=True)
            out.write(f"TS {ts:.6f}\n{cp.stdout}")
            nxt += a.interval
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:  # fell behind (busy CPU): skip, don't burst
                nxt = time.monotonic()
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
