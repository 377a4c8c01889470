"""profile.py as the Emulab portal runs it, under both geni-lib versions.

The portal runs a profile with its own geni-lib (upstream 0.9.9.5, not on PyPI; the
modules a profile imports are in vendor/geni-lib-upstream, UPSTREAM below), twice: a
parameter pass (GENILIB_PORTAL_MODE=1, GENILIB_PORTAL_DUMPPARAMS_PATH: the form as JSON)
and a request pass (GENILIB_PORTAL_PARAMS_PATH holding {"bindings": {name: {"value": v}}},
GENILIB_PORTAL_REQUEST_PATH: the request RSpec). Each pass runs here under PyPI's 0.9.9.4
(the venv's, fixed up by scripts/fix_genilib.py) and under upstream, one profile run per
process (portal.context is a singleton); the two libraries must write the same form and
the same request RSpec (canonical XML), and the standalone command line must agree too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profile.py"
UPSTREAM = REPO / "vendor" / "geni-lib-upstream"
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
FBSD142 = "urn:publicid:IDN+emulab.net+image+emulab-ops//FBSD142-64-STD"

LIBS = ["pypi-0.9.9.4", "upstream-0.9.9.5"]

# Parameter sets as the portal sends them (values as numbers or strings, as its form does).
GRID = {
    "defaults": {},
    "seed001": {"pairs": 2, "bandwidthMbps": 1000, "rttMs": 40, "queuePackets": 48},
    "three-pairs-codel": {"pairs": 3, "rttMs": "60", "aqm": "codel", "queuePackets": 1000},
    "linkshaping": {"delayMethod": "linkshaping", "rttMs": 0, "bandwidthMbps": "300"},
    "linkshaping-60ms": {"delayMethod": "linkshaping", "rttMs": 60, "bandwidthMbps": 300},
    "two-dumbbells": {
        "dumbbells": 2,
        "pairs": 1,
        "senderImages": f"{FBSD142},{UBUNTU24}",
        "reverseShaping": "yes",
        "interSwitch": "yes",
        "hwType": "",
        "delayHwType": "d710",
    },
    "linux-hosts-off": {
        "senderImage": UBUNTU24,
        "hostOffloads": "off",
        "containerTooling": "yes",
        "txRing": 0,
        "linkSpeedMbps": 10000,
        "bandwidthMbps": 5000,
    },
}


def env_for(lib, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GENILIB_") and k not in ("CCBENCH_PROFILE_IMPORT", "PYTHONPATH")
    }
    if lib.startswith("upstream"):
        env["PYTHONPATH"] = str(UPSTREAM)
    env.update(extra)
    return env


def run(lib, *args, cwd, **extra):
    res = subprocess.run(
        [sys.executable, str(PROFILE), *args],
        capture_output=True,
        text=True,
        env=env_for(lib, **extra),
        cwd=cwd,
        timeout=60,
    )
    return res


def which_geni(lib, tmp_path):
    """The geni package a profile run under `lib` imports (so the grid really compares two)."""
    code = "import geni.portal as p, sys; sys.stdout.write(p.__file__)"
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env_for(lib),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def canonical(xml: bytes) -> bytes:
    parser = etree.XMLParser(remove_blank_text=True)
    root = etree.fromstring(xml, parser)
    for el in root.iter():
        if el.text is not None and not el.text.strip():
            el.text = None
        if el.tail is not None and not el.tail.strip():
            el.tail = None
    return etree.tostring(root, method="c14n")


def portal_request_pass(lib, bindings, tmp_path, name, **extra):
    params = tmp_path / f"{name}.json"
    params.write_text(json.dumps({"bindings": bindings}))
    request = tmp_path / f"{name}-request.xml"
    res = run(
        lib,
        cwd=tmp_path,
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_PARAMS_PATH=str(params),
        GENILIB_PORTAL_REQUEST_PATH=str(request),
        **extra,
    )
    return res, request


def portal_passes(lib, values, tmp_path):
    """(parameter form JSON, request RSpec bytes, the parameter pass's default request
    RSpec bytes) of the two portal passes."""
    work = tmp_path / lib
    work.mkdir()
    form = work / "paramdefs.json"
    first = run(
        lib,
        cwd=work,
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_DUMPPARAMS_PATH=str(form),
        GENILIB_PORTAL_REQUEST_PATH=str(work / "default-request.xml"),
    )
    assert first.returncode == 0, f"{lib} parameter pass: {first.stderr}"
    bindings = {k: {"value": v} for k, v in values.items()}
    second, request = portal_request_pass(lib, bindings, work, "params")
    assert second.returncode == 0, f"{lib} request pass: {second.stderr}"
    default = (work / "default-request.xml").read_bytes()
    return json.loads(form.read_text()), request.read_bytes(), default


@pytest.fixture(scope="module")
def passes(tmp_path_factory):
    """portal_passes(lib, GRID[case]), each made once a module: profile.py's output is a
    function of its library and parameters only (no clock, no randomness), and the tests
    below check different things of the same two passes (36 pairs of profile runs were
    14 distinct ones)."""
    made = {}

    def get(lib, case):
        if (lib, case) not in made:
            made[lib, case] = portal_passes(lib, GRID[case], tmp_path_factory.mktemp(case))
        return made[lib, case]

    return get


def test_the_two_libraries_really_differ(tmp_path):
    pypi, upstream = (which_geni(lib, tmp_path) for lib in LIBS)
    assert str(UPSTREAM) in upstream and str(UPSTREAM) not in pypi


@pytest.mark.parametrize("case", sorted(GRID))
def test_portal_passes_give_the_same_request_under_both_libraries(case, passes, tmp_path):
    values = GRID[case]
    (form_a, req_a, _), (form_b, req_b, _) = (passes(lib, case) for lib in LIBS)
    assert form_a == form_b  # the parameter form the user fills in
    assert list(form_a)[:2] == ["pairs", "senderImage"]
    assert form_a["txRing"]["groupId"] == "advanced" and form_a["pairs"]["defaultValue"] == 2
    assert canonical(req_a) == canonical(req_b)
    # the values the portal sent are the ones bound
    root = etree.fromstring(req_a)
    data = {
        d.get("name").rsplit(".", 1)[1]: d.text
        for d in root.iter(
            "{http://www.protogeni.net/resources/rspec/ext/profile-parameters/1}data_item"
        )
    }
    for name, value in values.items():
        assert (data[name] or "") == str(value), name
    # and the standalone command line gives the same document
    args = [w for k, v in values.items() for w in (f"--{k}", str(v))]
    for lib in LIBS:
        res = run(lib, *args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert canonical(res.stdout.encode()) == canonical(req_a), lib


@pytest.mark.parametrize("lib", LIBS)
def test_parameter_pass_binds_the_defaults(lib, passes):
    form, request, default = passes(lib, "defaults")
    assert canonical(default) == canonical(request)
    assert form["hostOffloads"]["legalValues"][0] == ["default", "OS defaults (as the seed)"]


@pytest.mark.parametrize("lib", LIBS)
def test_bad_values_from_the_portal_are_parameter_errors(lib, tmp_path):
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"bindings": {"pairs": {"value": 7}, "rttMs": {"value": 41}}}))
    res = run(
        lib,
        cwd=tmp_path,
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_PARAMS_PATH=str(params),
        GENILIB_PORTAL_REQUEST_PATH=str(tmp_path / "request.xml"),
    )
    assert res.returncode == 102, res.stderr
    assert not (tmp_path / "request.xml").exists()
    assert "Sender/receiver pairs must be 1 to 4" in res.stderr and "RTT must be even" in res.stderr


@pytest.mark.parametrize("lib", LIBS)
def test_four_pairs_on_1g_d430s_is_a_parameter_error_in_the_portal(lib, passes, tmp_path):
    """The portal binds every parameter of the form (its defaults, then the user's
    values): 4 pairs need 5 router ports, and a d430 has four 1 GbE ports."""
    form, _, _ = passes(lib, "defaults")
    bindings = {name: {"value": p["defaultValue"]} for name, p in form.items()}
    bindings["pairs"] = {"value": 4}
    params = tmp_path / "four.json"
    params.write_text(json.dumps({"bindings": bindings}))
    res = run(
        lib,
        cwd=tmp_path,
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_PARAMS_PATH=str(params),
        GENILIB_PORTAL_REQUEST_PATH=str(tmp_path / "request.xml"),
    )
    assert res.returncode == 101, res.stderr
    assert not (tmp_path / "request.xml").exists()
    assert "at most 3 pairs at 1000 Mbit/s links" in res.stderr
    assert "Double fault" not in res.stderr  # both parameters it names were bound


EMULAB = "{http://www.protogeni.net/resources/rspec/ext/emulab/1}"
GENI = "{http://www.geni.net/resources/rspec/3}"
DELAY = "{http://www.protogeni.net/resources/rspec/ext/delay/1}"


@pytest.mark.parametrize("lib", LIBS)
def test_link_shaping_asks_for_a_delay_node_emulab_inserts(lib, passes):
    """Link shaping is a delayed link rt1 - rt2 with "no bandwidth shaping": Emulab puts a
    delay node of its own into it. Never emulab:force_shaping, which is end-node shaping
    (netem on rt1 and rt2, libvtop virtlan_use_linkdelay) that setup-router.sh deletes."""
    _, request, _ = passes(lib, "linkshaping-60ms")
    root = etree.fromstring(request)
    assert list(root.iter(EMULAB + "force_shaping")) == []
    nodes = {n.get("client_id") for n in root.iter(GENI + "node")}
    assert nodes == {"s1", "s2", "rt1", "rt2", "r1", "r2"}  # no dl: Emulab adds its own
    assert list(root.iter(DELAY + "pipe")) == []
    (core,) = (lk for lk in root.iter(GENI + "link") if lk.get("client_id") == "core")
    props = sorted(
        (p.get("source_id"), p.get("dest_id"), p.get("latency"), p.get("capacity"))
        for p in core.iter(GENI + "property")
    )
    assert props == [  # 30 ms each way, at the link speed (the ports), no rate limit
        ("rt1:core", "rt2:core", "30", "1000000"),
        ("rt2:core", "rt1:core", "30", "1000000"),
    ]
    assert core.find(EMULAB + "force_nobwshaping").get("enabled") == "true"


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", sorted(GRID))
def test_no_loss_is_asked_of_emulab(case, lib, passes):
    """Loss belongs at the receivers (ccbench's topology.loss): the profile never asks
    Emulab for any. No link carries a packet_loss (what Emulab's GeniCM reads); geni-lib's
    Bridge writes every delay pipe's lossrate, always its default 0.0, which the profile
    never sets (Emulab reads a link's loss as packet_loss, not lossrate)."""
    form, request, _ = passes(lib, case)
    assert not any("loss" in name.lower() for name in form)  # nothing to ask for it with
    root = etree.fromstring(request)
    assert [el.tag for el in root.iter() if "packet_loss" in el.attrib] == []
    assert {el.tag for el in root.iter() if "lossrate" in el.attrib} <= {DELAY + "pipe"}
    pipes = list(root.iter(DELAY + "pipe"))
    assert [p.get("lossrate") for p in pipes] == ["0.0"] * len(pipes)


def reported(stderr):
    """[(kind, sorted parameter names, message)] of what a portal run reported, from
    either library's JSON: PyPI 0.9.9.4 writes a list of {errorType, params, message};
    upstream writes {"bindings": {name: {"errors"|"warnings": [ids]}}, "errors"|"warnings":
    {id: {"message"}}}."""
    data = json.loads(stderr)
    if isinstance(data, list):
        return sorted(
            (e["errorType"].replace("Parameter", "").lower(), sorted(e["params"]), e["message"])
            for e in data
        )
    out = []
    for kind in ("errors", "warnings"):
        for ident, body in (data.get(kind) or {}).items():
            names = sorted(n for n, b in data["bindings"].items() if ident in b.get(kind, []))
            out.append((kind[:-1], names, body["message"]))
    return sorted(out)


@pytest.mark.parametrize("lib", LIBS)
def test_port_checks_in_the_portal(lib, passes, tmp_path):
    """The port checks as the portal runs them, under both geni-libs: a router needs
    pairs + 1 ports at the link speed (d430: four at 1 Gb/s on 96 machines, four at
    10 Gb/s on 64), and with the hardware type left empty nothing can be checked, so the
    user is warned (fatal on the portal's first submit) and the request is still made."""
    form, _, _ = passes(lib, "defaults")
    every = {name: {"value": p["defaultValue"]} for name, p in form.items()}

    ten_g = dict(every, pairs={"value": 4}, linkSpeedMbps={"value": 10000})
    res, request = portal_request_pass(lib, ten_g, tmp_path, "ten-g")
    assert res.returncode == 101, res.stderr
    assert not request.exists()
    ((kind, names, message),) = reported(res.stderr)
    assert (kind, names) == ("error", ["hwType", "linkSpeedMbps", "pairs"])
    assert "at most 3 pairs at 10000 Mbit/s links" in message
    assert "64 of Emulab's 160 have 4" in message

    three = dict(ten_g, pairs={"value": 3})
    res, request = portal_request_pass(lib, three, tmp_path, "three")
    assert res.returncode == 0, res.stderr
    assert request.exists()

    anytype = dict(every, hwType={"value": ""}, pairs={"value": 4})
    res, request = portal_request_pass(
        lib, anytype, tmp_path, "any-fatal", GENILIB_PORTAL_WARNINGS_ARE_FATAL="1"
    )
    assert res.returncode == 101, res.stderr
    ((kind, names, message),) = reported(res.stderr)
    assert (kind, names) == ("warning", ["hwType", "pairs"])
    assert "need 5 experimental ports at 1000 Mbit/s" in message
    assert not request.exists()
    res, request = portal_request_pass(lib, anytype, tmp_path, "any")
    assert res.returncode == 0, res.stderr
    root = etree.fromstring(request.read_bytes())
    pipes = list(root.iter("{http://www.protogeni.net/resources/rspec/ext/delay/1}pipe"))
    assert [p.get("capacity") for p in pipes] == ["0", "0"]  # dl's pipes: unlimited
