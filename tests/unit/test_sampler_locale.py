"""The samplers' bash loops (hosts.linux SS_LOOP, QDISC_LOOP) under a locale whose
decimal point is a comma, as ssh forwards a user's LC_NUMERIC (OpenSSH's default
`SendEnv LANG LC_*`, Debian's sshd `AcceptEnv LANG LC_*`): bash writes $EPOCHREALTIME
with the locale's decimal point (bash 5, `1795932264,156099`), which the loops'
${EPOCHREALTIME/./} would not remove. The loops set LC_ALL=C; run here for real with
stand-in `ss` and `tc`, on a comma locale compiled into tmp_path (localedef, a few ms)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from ccbench.hosts.linux import LinuxHost

# A locale with only its numbers defined: decimal point `,` (as de_DE's LC_NUMERIC).
COMMA = (
    'LC_NUMERIC\ndecimal_point "<U002C>"\nthousands_sep "<U002E>"\ngrouping 3;3\nEND LC_NUMERIC\n'
)
STUBS = {
    "ss": "#!/bin/sh\necho 'ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000'\n",
    # tc -s -j -batch -: one JSON line per `qdisc show` command read
    "tc": "#!/bin/sh\nwhile read -r l; do echo '[]'; done\n",
}
MARK = re.compile(r"^T[SE] \d+\.\d{6}$")


@pytest.fixture
def comma_env(tmp_path: Path) -> dict[str, str]:
    src = tmp_path / "comma.src"
    src.write_text(COMMA)
    loc = tmp_path / "locales"
    loc.mkdir()
    # -c: the other categories are missing on purpose (warnings, exit 1, files written)
    subprocess.run(["localedef", "-c", "-i", str(src), "-f", "ISO-8859-1", str(loc / "xx_XX")],
                   capture_output=True, check=False)  # fmt: skip
    if not (loc / "xx_XX" / "LC_NUMERIC").exists():
        pytest.skip("localedef could not compile a locale here")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in STUBS.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    env = {**os.environ, "LOCPATH": str(loc), "LC_NUMERIC": "xx_XX",
           "PATH": f"{bin_}:{os.environ['PATH']}"}  # fmt: skip
    env.pop("LC_ALL", None)
    return env


def run_for(argv: list[str], env: dict[str, str], seconds: float) -> str:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=5)
    assert "syntax error" not in err and "invalid" not in err, err
    return out


@pytest.mark.parametrize("loop", ["ss", "qdisc"])
def test_the_loops_stamp_with_a_dot_under_a_comma_locale(
    comma_env: dict[str, str], loop: str
) -> None:
    shown = subprocess.run(["bash", "-c", "echo $EPOCHREALTIME"], env=comma_env,
                           capture_output=True, text=True).stdout  # fmt: skip
    assert "," in shown and "." not in shown  # the locale is in effect
    h = LinuxHost()
    argv = h.ss_sampler(0.02) if loop == "ss" else h.qdisc_sampler("eth0", 0.02)
    assert argv is not None
    out = run_for(argv, comma_env, 0.25)
    marks = [ln for ln in out.splitlines() if ln[:3] in ("TS ", "TE ")]
    assert len(marks) >= 4, out[:300]
    assert all(MARK.match(m) for m in marks), marks[:4]
