"""The delay node dl (Emulab's FreeBSD dummynet bridge): what it really runs, and whether
that is what the run asked for.

Pure: the caller runs READ_COMMANDS on dl (as root: `sudo`, as Emulab's own tools do),
gives their outputs to read(), and check() compares the reading with the run. Facts used,
from FreeBSD's dummynet (sys/netpfil/ipfw/ip_dn_io.c, ip_dummynet.c; sbin/ipfw/dummynet.c):
- A pipe's delay is kept in clock ticks (`delay * hz / 1000`) and a delayed packet leaves
  at the first tick at or after its due time: with kern.hz at 1000 a 20 ms pipe delays
  19-20 ms. Emulab's delay set-up runs dl at kern.hz 10000 (0.1 ms ticks).
- An unlimited pipe (bw 0) moves every packet into its delay line as it arrives
  (serve_sched: no credit to wait for), so its queue never holds more than that packet.
- A pipe with a bandwidth releases packets once per tick, so its queue must hold what
  arrives in a tick, or it drops; the default queue is 50 slots, at most
  net.inet.ip.dummynet.pipe_slot_limit (100 by default) or 1 MB in bytes.
profile.py asks Emulab for unlimited pipes (PROFILE_PIPE_BANDWIDTH_BPS): dl only delays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ccbench.parse.drops import DummynetPipe, dummynet

# What to run on dl, each with sudo (argv lists; the caller's executor adds sudo).
READ_COMMANDS: dict[str, list[str]] = {
    "kern_hz": ["sysctl", "-n", "kern.hz"],
    "pipes": ["ipfw", "pipe", "show"],
}
# The bandwidth profile.py asks for dl's pipes: None = unlimited (bw 0). See profile.py's
# build_request: a pipe limited to the link speed would need a queue of a clock tick's
# frames, and dummynet cannot even hold a 10 Gb/s rate (its bandwidth is 32-bit bit/s).
PROFILE_PIPE_BANDWIDTH_BPS: int | None = None
# The evidence's word for a delay node whose configuration could not be read (not a
# dummynet node: the rehearsal's Linux delay node, or Emulab's unnamed link-shaping one).
NOT_DUMMYNET = "not dummynet: configuration not read"

DELAY_TOLERANCE_MS = 0.5
# A full frame as dummynet counts it on a bridge (Ethernet header + 1500-byte packet) and
# as it takes the wire (+ preamble, frame check sequence, inter-frame gap): frames arrive
# at most at rate / (8 x 1538) per second.
FRAME_BYTES = 1514
WIRE_FRAME_BYTES = 1538
# Queue margin: a rate-limited pipe releases packets once per tick, so it holds one tick's
# arrivals; dummynet counts ticks that came late or were merged
# (net.inet.ip.dummynet.tick_lost), and a tick late by one more tick doubles what waits.
# Two ticks' arrivals survive one late tick.
TICKS_OF_QUEUE = 2
# One per direction. Emulab numbers them 60000 + n (libvtop _pipenumber): 60111 and 60121
# on an explicit bridge such as profile.py's dl, 60110 and 60120 on a delay node Emulab
# inserts itself (link-shaping mode, where there is no dl to read).
PIPES_PER_DUMBBELL = 2


@dataclass(frozen=True)
class DelayNodeReading:
    """What dl runs: its clock and every dummynet pipe."""

    node: str
    kern_hz: int
    pipes: tuple[DummynetPipe, ...]

    @property
    def tick_ms(self) -> float:
        return 1000.0 / self.kern_hz

    def to_dict(self) -> dict[str, Any]:
        """For calibration.json and the run's provenance."""
        return {
            "node": self.node,
            "configuration": "read",
            "kern_hz": self.kern_hz,
            "tick_ms": self.tick_ms,
            "pipes": [
                {
                    "number": p.number,
                    "delay_ms": p.delay_ms,
                    "bandwidth": p.bandwidth,
                    "bandwidth_bps": p.bandwidth_bps,  # null: unlimited
                    "queue_slots": p.queue_slots,
                    "queue_bytes": p.queue_bytes,
                    "plr": p.plr,
                }
                for p in self.pipes
            ],
        }


@dataclass(frozen=True)
class DelayNodeUnread:
    """A delay node whose configuration could not be read, and why."""

    node: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "configuration": NOT_DUMMYNET, "why": self.why}


def parse_hz(text: str) -> int:
    """`sysctl -n kern.hz` -> ticks per second."""
    word = text.strip()
    if not word.isdigit() or int(word) == 0:
        raise ValueError(f"sysctl -n kern.hz: {word[:60]!r} is not a clock rate")
    return int(word)


def read(node: str, kern_hz_text: str, pipes_text: str) -> DelayNodeReading:
    """The outputs of READ_COMMANDS -> a reading; ValueError names what is not dummynet's.
    An empty `ipfw pipe show` (no pipes at all) is a reading with no pipes: check() says
    what that means."""
    hz = parse_hz(kern_hz_text)
    pipes = dummynet(pipes_text) if pipes_text.strip() else {}
    return DelayNodeReading(node, hz, tuple(pipes[n] for n in sorted(pipes)))


def frames_per_tick(link_mbit: float, kern_hz: int) -> float:
    """Full frames a link of `link_mbit` can deliver to dl in one clock tick."""
    return link_mbit * 1e6 / (8 * WIRE_FRAME_BYTES * kern_hz)


def slots_needed(link_mbit: float, kern_hz: int) -> int:
    """Queue slots a rate-limited pipe needs: TICKS_OF_QUEUE ticks of full frames (at
    1 Gb/s: 163 at kern.hz 1000, 17 at 10000)."""
    return math.ceil(TICKS_OF_QUEUE * frames_per_tick(link_mbit, kern_hz))


def ipfw_bandwidth(bps: int | None) -> str:
    """A bandwidth as `ipfw pipe show` prints it ("%7.3f" of the largest unit), so that an
    asked rate and a read one compare at the printed precision."""
    if not bps:
        return "unlimited"
    for unit, scale in (("Gbit/s", 10**9), ("Mbit/s", 10**6), ("Kbit/s", 10**3)):
        if bps >= scale:
            return f"{bps / scale:.3f} {unit}"
    return f"{bps:.3f} bit/s"


def check(
    reading: DelayNodeReading,
    rtt_ms: float,
    link_mbit: float,
    expect_bw_bps: int | None = PROFILE_PIPE_BANDWIDTH_BPS,
) -> list[str]:
    """Mismatches between dl and the run, one line each (empty: dl is right).

    rtt_ms: the run's base RTT (each pipe delays half of it). link_mbit: the speed of the
    links into dl (frames can arrive that fast even when rt1 shapes below it: tbf sends
    its burst at line rate). expect_bw_bps: the pipes' bandwidth as profile.py asked (None:
    unlimited)."""
    node, hz = reading.node, reading.kern_hz
    if not reading.pipes:
        return [f"{node}: no dummynet pipes (ipfw pipe show lists none): the delay node "
                f"bridges without delaying; expected {PIPES_PER_DUMBBELL} pipes of "
                f"{rtt_ms / 2:g} ms"]  # fmt: skip
    out = []
    if len(reading.pipes) != PIPES_PER_DUMBBELL:
        out.append(f"{node}: {len(reading.pipes)} dummynet pipes "
                   f"({', '.join(str(p.number) for p in reading.pipes)}), expected "
                   f"{PIPES_PER_DUMBBELL} (one per direction)")  # fmt: skip
    want_ms = rtt_ms / 2
    need = slots_needed(link_mbit, hz)
    for p in reading.pipes:
        where = f"{node} pipe {p.number}"
        if abs(p.delay_ms - want_ms) > DELAY_TOLERANCE_MS:
            out.append(f"{where}: delay {p.delay_ms} ms, expected {want_ms:g} ms (RTT/2) "
                       f"within {DELAY_TOLERANCE_MS:g} ms")  # fmt: skip
        if " ".join(p.bandwidth.split()) != ipfw_bandwidth(expect_bw_bps):
            out.append(f"{where}: bandwidth {p.bandwidth}, expected "
                       f"{ipfw_bandwidth(expect_bw_bps)}"
                       + (" (profile.py asks for unlimited pipes: dl only delays)"
                          if expect_bw_bps is None else ""))  # fmt: skip
        if p.bandwidth_bps is None:
            continue  # an unlimited pipe never queues (see the module's docstring)
        if p.queue_bytes is not None and p.queue_bytes < need * FRAME_BYTES:
            out.append(f"{where}: queue {p.queue_bytes} bytes, expected >= "
                       f"{need * FRAME_BYTES} ({need} full frames) "
                       f"{_why(link_mbit, hz)}")  # fmt: skip
        elif p.queue_bytes is None and (p.queue_slots or 0) < need:
            out.append(f"{where}: queue {p.queue_slots} slots, expected >= {need} "
                       f"{_why(link_mbit, hz)}")  # fmt: skip
    if reading.tick_ms > DELAY_TOLERANCE_MS:
        # The recovery is what Emulab's own delay set-up does (clientside/tmcc/freebsd/
        # delaysetup): kern.hz is a boot-time tunable, so it takes a reboot.
        out.append(f"{node}: kern.hz {hz}: dummynet releases delayed packets on "
                   f"{reading.tick_ms:g} ms clock ticks, so each pipe delays up to "
                   f"{reading.tick_ms:g} ms less than set; expected kern.hz >= "
                   f"{math.ceil(1000 / DELAY_TOLERANCE_MS)} (Emulab's delay set-up uses "
                   f"10000): put kern.hz=10000 in {node}'s /boot/loader.conf, reboot {node} "
                   "and run `ccbench testbed up` again")  # fmt: skip
    return out


def _why(link_mbit: float, hz: int) -> str:
    return (f"(a rate-limited pipe holds a clock tick's arrivals: "
            f"{frames_per_tick(link_mbit, hz):.1f} full frames per tick at {link_mbit:g} "
            f"Mbit/s and kern.hz {hz}, x{TICKS_OF_QUEUE} for a late tick)")  # fmt: skip


def from_outputs(
    node: str, outputs: dict[str, tuple[int, str, str]]
) -> DelayNodeReading | DelayNodeUnread:
    """READ_COMMANDS' results {name: (exit status, stdout, stderr)} -> a reading, or why
    there is none (a command failed: not a dummynet node, or no sudo; unreadable output)."""
    for name, argv in READ_COMMANDS.items():
        rc, _, err = outputs[name]
        if rc != 0:
            last = (err.strip().splitlines() or [""])[-1]
            return DelayNodeUnread(node, f"`sudo {' '.join(argv)}` exited {rc}: {last}"[:300])
    try:
        return read(node, outputs["kern_hz"][1], outputs["pipes"][1])
    except ValueError as e:
        return DelayNodeUnread(node, str(e))
