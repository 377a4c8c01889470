"""Emulab's delay node: a FreeBSD bridge whose dummynet pipes delay the dumbbell's
traffic. ccbench never configures it; it only reads it (sudo on the node)."""

from __future__ import annotations

from ccbench.hosts.base import Argv


class DummynetNode:
    os = "dummynet"

    def drop_counters(self) -> dict[str, Argv]:
        return {"dummynet": ["ipfw", "pipe", "show"]}
