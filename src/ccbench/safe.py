"""Checks on names that become paths, namespaces or ssh arguments, and the one
recursive delete ccbench allows itself.

Every testbed id (from the CLI, a config, a matrix, a state directory) passes
`testbed_id()` before it names anything; every recursive delete goes through
`remove_tree()`, which refuses a target that does not resolve strictly inside the
folder it belongs to. Host and user names that reach ssh pass `ssh_host()` and
`ssh_user()`: ssh reads a destination starting with '-' as an option.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
from pathlib import Path

from ccbench.errors import CcbenchError

TESTBED_ID = re.compile(r"^[a-z0-9]{1,8}$")
# RFC 1123 labels; a trailing dot is not needed for ssh.
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
# POSIX portable user names (Emulab's are lower-case letters and digits).
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")


def testbed_id(value: object, source: str = "testbed id") -> str:
    """The id itself if it matches ^[a-z0-9]{1,8}$, else one clear error."""
    if not isinstance(value, str) or not TESTBED_ID.fullmatch(value):
        raise CcbenchError(
            f"{source}: {value!r} is not a testbed id (1-8 lower-case letters or digits)"
        )
    return value


def remove_tree(target: Path, inside: Path) -> None:
    """rmtree(target), only if it resolves strictly inside `inside` (and is not a link).

    A missing target is fine (idempotent clean-up); anything else out of place is an
    error, never a delete."""
    root = inside.resolve()
    if target.is_symlink():
        raise CcbenchError(f"refusing to delete {target}: it is a symbolic link")
    resolved = target.resolve()
    if resolved == root or root not in resolved.parents:
        raise CcbenchError(f"refusing to delete {target}: it is not inside {inside}")
    if resolved.exists():
        shutil.rmtree(resolved)


def ssh_host(value: object, source: str = "host") -> str:
    """A hostname or IP address; never something ssh could read as an option."""
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            if _HOSTNAME.fullmatch(value):
                return value
    raise CcbenchError(f"{source}: {value!r} is not a hostname or IP address")


def ssh_user(value: object, source: str = "user") -> str:
    if isinstance(value, str) and _USER.fullmatch(value):
        return value
    raise CcbenchError(f"{source}: {value!r} is not a user name (letters, digits, _ . -)")
