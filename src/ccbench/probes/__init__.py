"""Latency under load: the RTT probe that runs beside a run's bulk flows, s1 -> r1.

Probe tools are classes registered here by name (`probe_tool` in a config): ping,
fping, irtt, flent. Each names its raw file, the sender OSes it runs on, its plan
(argv lists) and its reader. Adding a tool is one module here, its parser in
ccbench.parse, and a line in REGISTRY; the config schema's list of tools is this
registry's (ccbench.config).
"""

from __future__ import annotations

from pathlib import Path

from ccbench import layout, leftovers
from ccbench.errors import CcbenchError, registered
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeRun, ProbeSettings, ProbeTool
from ccbench.probes.flent import Flent
from ccbench.probes.fping import Fping
from ccbench.probes.irtt import Irtt
from ccbench.probes.ping import Ping
from ccbench.spec import os_titles

REGISTRY: dict[str, ProbeTool] = {t.name: t for t in (Ping(), Fping(), Irtt(), Flent())}
NAMES = tuple(REGISTRY)


def tool(name: str) -> ProbeTool:
    return registered(REGISTRY, name, "probe_tool", "tool")


def plan(name: str, s: ProbeSettings, sender_os: str) -> ProbePlan:
    """Tool `name`'s plan for a run from a sender running `sender_os`."""
    t = tool(name)
    if sender_os not in t.oses:
        raise CcbenchError(f"probe_tool {name}: needs a {os_titles(t.oses)} sender (s1 runs "
                           f"{sender_os})")  # fmt: skip
    return t.plan(s, sender_os)


def raw_files() -> list[str]:
    return [t.raw_file for t in REGISTRY.values()]


def node_files() -> list[str]:
    """What every probe tool writes on a node (ProbeTool.node_files), each once."""
    return list(dict.fromkeys(f for t in REGISTRY.values() for f in t.node_files))


def node_dirs(tb_id: str) -> list[str]:
    """Testbed `tb_id`'s directories of per-process entries (ProbeTool.node_dirs) as
    leftovers.remove_files_argv takes them (leftovers.per_process)."""
    return [leftovers.per_process(d) for t in REGISTRY.values() for d in t.node_dirs(tb_id)]


def stored(raw: Path) -> tuple[ProbeTool, Path] | None:
    """The probe tool whose raw file the run has, and the file; None: no probe."""
    for t in REGISTRY.values():
        p = layout.stored(raw, t.raw_file)
        if p is not None:
            return t, p
    return None


def read(raw: Path, run: ProbeRun | None = None) -> ProbeResult | None:
    """The probe's samples from whichever raw file the run has (None: no probe); `run`:
    what the run recorded about it (meta.json, through ccbench.runmeta; None: nothing).
    Raises what the tool's reader raises on a file that is not its output."""
    found = stored(raw)
    if found is None:
        return None
    t, path = found
    return t.read(path, run or ProbeRun())


__all__ = ["NAMES", "REGISTRY", "ProbePlan", "ProbeResult", "ProbeRun", "ProbeSettings",
           "ProbeTool", "node_dirs", "node_files", "plan", "raw_files", "read", "stored",
           "tool"]  # fmt: skip
