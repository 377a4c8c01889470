from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ccbench

HOST_SYSCTLS = (
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.ip_forward",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_no_metrics_save",
)


def host_sysctls() -> dict[str, str]:
    return {
        k: subprocess.run(["sysctl", "-n", k], capture_output=True, text=True).stdout.strip()
        for k in HOST_SYSCTLS
    }


def namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(prefix)]


def write_config(path: Path, tb_id: str, **topo: object) -> Path:
    cfg = {
        "testbed": {"id": tb_id},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, **topo},
        # attempts: an invalid run (e.g. the VM stalled the delay element) is retried,
        # as the tool does for users; a second invalid attempt fails the test.
        "run": {"duration_s": 5, "interval_s": 0.5, "attempts": 2, "flows": [{"cc": "cubic"}]},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def bdp_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real 100 Mbit x 40 ms dumbbell with a 1-BDP pfifo, shared by a module's tests."""
    tb_id = "itbdp"
    cfg = write_config(tmp_path_factory.mktemp("tb") / "tb.yaml", tb_id, queue={"limit_bdp": 1})
    ccbench("testbed", "down", "--id", tb_id)
    ccbench("testbed", "up", "--config", str(cfg))
    try:
        yield tb_id, cfg
    finally:
        ccbench("testbed", "down", "--id", tb_id)
        assert namespaces(f"ccb-{tb_id}-") == []
