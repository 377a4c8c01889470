"""Run the ccbench Linux-node tooling image inside a testbed network namespace.

The image (containers/linux-node, built locally by containers/build.sh) carries
iperf3, netperf, flent, irtt, fping and friends. A container joins an existing
namespace made by ``ip netns add`` and runs privileged, because the tools set
congestion control, capture packets and open raw sockets. Everything here builds
argv lists; nothing goes through a shell.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

DEFAULT_IMAGE = "localhost/ccbench-linux-node:latest"
PODMAN = "podman"
NETNS_DIR = "/run/netns"
# The init `podman run --init` mounts as the container's PID 1 (containers/common,
# pkg/config/default.go: DefaultInitPath). It passes on the signals podman proxies and
# reaps: a tool that is PID 1 itself keeps the default action of no signal, so ping,
# fping or flent ignored SIGTERM, and every stop waited out its grace and left the
# container running. Debian's and Ubuntu's package: catatonit.
INIT_PATH = "/usr/libexec/podman/catatonit"

# What `ip netns add` accepts as a name and is safe to put in a path.
_NETNS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# podman's rule for container names.
_CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


def container_argv(
    netns: str,
    image: str,
    argv: Sequence[str],
    name: str | None = None,
    interactive: bool = False,
) -> list[str]:
    """The podman command that runs ``argv`` in ``image`` inside network namespace ``netns``.

    The container is removed when it exits (``--rm``), never pulls (the image is built
    locally), shares the namespace ``/run/netns/<netns>`` and is privileged. ``name``,
    if given, becomes the container name so the caller can stop it (``podman rm -f``).
    """
    if not _NETNS_NAME.fullmatch(netns) or netns in {".", ".."}:
        raise ValueError(f"not a network namespace name: {netns!r}")
    network = ["--network", f"ns:{NETNS_DIR}/{netns}"]
    return _podman_run(network, image, argv, name, interactive)


def host_network_argv(
    image: str, argv: Sequence[str], name: str | None = None, interactive: bool = False
) -> list[str]:
    """The same for a real host (the SSH testbed): the container shares the network
    namespace podman runs in (``--network host``), i.e. the node's own interfaces."""
    return _podman_run(["--network", "host"], image, argv, name, interactive)


def _podman_run(
    network: list[str], image: str, argv: Sequence[str], name: str | None, interactive: bool
) -> list[str]:
    if not image or image.startswith("-") or any(c.isspace() for c in image):
        raise ValueError(f"not an image reference: {image!r}")
    if isinstance(argv, str):
        raise TypeError("argv must be a sequence of arguments, not a string")
    if not argv:
        raise ValueError("argv must name a command")
    if name is not None and not _CONTAINER_NAME.fullmatch(name):
        raise ValueError(f"not a container name: {name!r}")
    # Tools get addresses, never names, so no resolver: one that fails at once. A
    # node's real resolver may sit behind a default route into the dumbbell (as in a
    # testbed namespace) and make a lookup wait 5 s for its timeout, and flent looks a
    # name up before its first sample.
    cmd = [PODMAN, "run", "--rm", "--pull=never", "--init", *network, "--privileged",
           "--dns", "127.0.0.1"]  # fmt: skip
    if interactive:  # keep stdin open: the start gate reads its "go" line from it
        cmd.append("-i")
    if name is not None:
        cmd.extend(["--name", name])
    cmd.append(image)
    cmd.extend(argv)
    return cmd


def init_missing(where: str = "", fix: str = "apt-get install catatonit") -> str:
    """The line naming the init `--init` needs as missing (`where`: on which hosts)."""
    return f"podman's init {INIT_PATH} is missing{where} ({fix})"


def missing_init() -> str | None:
    """One line naming what `--init` needs and this machine lacks, or None."""
    return None if Path(INIT_PATH).is_file() else init_missing()


def image_present(image: str = DEFAULT_IMAGE) -> bool:
    """True if podman is installed and has ``image`` in its local store."""
    podman = shutil.which(PODMAN)
    if podman is None:
        return False
    try:
        result = subprocess.run(
            [podman, "image", "exists", image],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0
