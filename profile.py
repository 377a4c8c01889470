"""ccbench: TCP congestion-control comparisons on a bare-metal dumbbell.

Each dumbbell *d* (1 to 4) has N sender/receiver pairs (1 to 4), each host on a
physical link of its own (seed 001's topology):

    s_i --[10.d.1.0/24, a /30 each]-- rt1 ==[10.d.2.0/24 via dl]== rt2 --[10.d.3.0/24, a /30 each]-- r_i

Every link runs at the link speed (1 Gb/s by default), unshaped by Emulab and, by
default, never across an inter-switch trunk: senders first meet in rt1's queue.
Router rt1 holds the bottleneck: on its interface toward rt2 a tbf shaper at the
bottleneck rate with a `pfifo limit <queue packets>` child (or the chosen AQM),
NIC offloads off and a small TX ring (what the driver set is recorded in
`/var/tmp/ccbench/nic-<interface>.json`). rt2 gets the same qdisc only if "shape
the reverse path" is on. The delay node `dl` (a transparent dummynet bridge; with
delay method "linkshaping", the one Emulab inserts) adds RTT/2 in each direction
and only delays: its links are marked "no bandwidth shaping" and its pipes ask for no
rate (bandwidth 0, dummynet's "unlimited"), so it holds no queue. Senders and
receivers keep their OS's offload defaults.

Node names: dumbbell 1 uses the plain names `s1..sN`, `rt1`, `dl`, `rt2`, `r1..rN`;
dumbbell d >= 2 appends `-d<d>` (`s1-d2`, `rt1-d2`, `dl-d2`, ...), and so do the link
names (`s1-rt1`, `r1-rt2`; `core-a`/`core-b` on each side of `dl`, or `core`).
Addresses: s_i = 10.d.1.(4i-2) behind rt1's 10.d.1.(4i-3); r_i = 10.d.3.(4i-2)
behind rt2's 10.d.3.(4i-3) (a /30 per link); rt1 = 10.d.2.1 and rt2 = 10.d.2.2 on
the bottleneck (/24).

Instructions:

How long to book: before instantiating, `ccbench matrix --config YOUR_CONFIG.yaml` on
your control machine prints, per dumbbell, the traffic and an estimated wall time, then
how long to book the experiment: for config/examples/emulab-seed001.yaml (3 dumbbells
side by side) about 2 h 35 min, for emulab-seed001-reboot.yaml (one dumbbell, a reboot
into the patched kernel) about 4 h 27 min. Both include 30 min for swap-in and the
start-up scripts, and 30 min a reboot: allowances, not measurements (`--setup-min`,
`--reboot-min` replace them; docs/emulab.md, "How long to book"). Extend the
experiment if runs must be retried.

Wait until every node's startup service shows "Finished" (each node logs to
`/local/logs/ccbench-setup-*.log` and writes `/var/tmp/ccbench-setup.done`).
Then, on your control machine (where ccbench is installed):

1. Save the experiment's manifest (the "Manifest" tab) as `manifest.xml`, or fetch it
   from any node of the experiment: `ssh NODE geni-get manifest > manifest.xml`.
2. `ccbench testbed inventory --manifest manifest.xml --user YOUR_EMULAB_NAME --out hosts.yaml`
3. `snakemake --cores 4 all --configfile config/examples/emulab-seed001.yaml`
   (a config names its inventory: `testbed.inventory: hosts.yaml`). The config must
   fit this experiment: emulab-seed001.yaml needs 3 dumbbells of 2 pairs with one
   sender image per dumbbell (its header names them); for one dumbbell of 2 FreeBSD
   pairs use emulab-seed001-reboot.yaml. A dumbbell the inventory lacks is refused.

The report lands in `reports/`. The setup scripts are in `emulab/` of this
repository (cloned to `/local/repository` on every node); rerunning one by hand
(`sudo sh /local/repository/emulab/setup-router.sh ...`, same arguments as in the
startup service) is safe.

The delay node: `ccbench testbed up` logs in to `dl` and reads `sysctl -n kern.hz` and
`sudo ipfw pipe show`; it refuses a dl whose pipes do not delay RTT/2, are not unlimited,
or are rate-limited with a queue too small for a clock tick of frames. This profile
cannot ask for a pipe queue size (geni-lib's delay pipe has only bandwidth, latency and
loss rate), so it asks for unlimited pipes: dummynet then passes every packet straight
to its delay line, and its queue (50 slots by default) never fills.

If Emulab cannot map the experiment: rt1 and rt2 each need pairs + 1 experimental ports
at the link speed. Only 96 of Emulab's 160 d430s have four 1 GbE ports (at most 3 pairs
at 1 Gb/s); the other 64 have two 1 GbE ports and four 10 GbE ports (Intel X710, which
run only at 10 Gb/s), so at 10 Gb/s every machine must be one of those 64. The 1 GbE
ports hang on 48-port switches, three per rack: with inter-switch links off, every
machine of a dumbbell must sit behind one switch. Try fewer pairs or dumbbells, another
time, or allow inter-switch links (advanced; other experiments' traffic may then share
a trunk with yours).
"""

import json
import os
import re
from collections import OrderedDict

# ---------------------------------------------------------------------------
# Addressing and naming plan: the single source of truth for this profile.
# tests/unit/test_profile.py compares it with the local model (ccbench.topology).
# ---------------------------------------------------------------------------
# Every sender and every receiver has a point-to-point link of its own to its router
# (seed 001: rt1 had one interface per sender plus the bottleneck), so senders first
# meet in rt1's bottleneck queue, never in a switch buffer. Access link i is the /30
# at 4(i-1) inside its side's /24: router .4i-3, host .4i-2 (the local model's layout).
SUBNETS = {"senders": "10.{d}.1", "core": "10.{d}.2", "receivers": "10.{d}.3"}
NETMASKS = {24: "255.255.255.0", 30: "255.255.255.252"}
CORE_OCTETS = {"rt1": 1, "rt2": 2}  # on 10.d.2.0/24 (bridged through dl: one segment)
SIDES = {"sender": ("s", "rt1", "senders"), "receiver": ("r", "rt2", "receivers")}
DELAY_NODE = "dl"
SUFFIX = "-d{d}"  # dumbbell 1: no suffix (seed names); dumbbell d >= 2: "s1-d2"
REPO = "/local/repository"  # where the portal clones this repository on every node

# Emulab images (URNs as used by public profiles).
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
FBSD142 = "urn:publicid:IDN+emulab.net+image+emulab-ops//FBSD142-64-STD"

# Limits that decide what is a bad parameter combination.
MAX_PAIRS = 4
MAX_DUMBBELLS = 4
MAX_MACHINES = 24  # bigger requests rarely map onto one hardware type at once
MAX_RATE_MBPS = 10000
MAX_RTT_MS = 1000
# Emulab inserts a delay node into a link only from this one-way latency up (libvtop_stable,
# GenVirtLans: `$delay >= $DELAYTHRESH`, 2 ms by default in configure.ac); below it a
# link marked "no bandwidth shaping" is a plain wire.
EMULAB_DELAY_THRESHOLD_MS = 2
MAX_QUEUE = 100000
MAX_TX_RING = 8192
MIN_RED_QUEUE = 12  # RED's min threshold (limit/12) must hold a full frame
AQM_TARGET_MS = {"codel": 5.0, "fq_codel": 5.0, "pie": 15.0}  # their default targets
FRAME_BYTES = 1514  # a full frame as tbf counts it
WIRE_FRAME_BYTES = 1538  # and on the wire: + preamble, frame check sequence, inter-frame gap
# igb's smallest TX/RX ring on Linux since "igb: Change IGB_MIN to allow set rx/tx value
# between 64 and 80" (2023, in Ubuntu 24.04's 6.8); 80 before it and in FreeBSD's igb.
IGB_MIN_TX_RING = 64


def node_name(base, d):
    """Name of node `base` ("s1", "rt1", "dl", ...) in dumbbell `d` (1-based)."""
    return base if d == 1 else base + SUFFIX.format(d=d)


def _ip(segment, d, octet):
    return "%s.%d" % (SUBNETS[segment].format(d=d), octet)


def _net(segment, d):
    return "%s.0/24" % SUBNETS[segment].format(d=d)


def dumbbell_plan(pairs, dumbbells=1, delay_node=True):
    """node name -> {role, dumbbell, base, addresses {key: ip}, prefixes {key: bits},
    interfaces {key: interface id}, links {key: link name}, routes {net: gateway}, ...}
    for `dumbbells` dumbbells of `pairs` pairs. A key names what the interface faces:
    the peer's base name ("rt1", "s2") or "core" for the routers' bottleneck side.
    Plain dicts, no geni-lib: importable with CCBENCH_PROFILE_IMPORT=1. `delay_node`
    adds the explicit delay node, a transparent bridge without addresses."""
    plan = {}
    for d in range(1, dumbbells + 1):
        routers = {
            "rt1": {"far": "receivers", "other": "rt2"},
            "rt2": {"far": "senders", "other": "rt1"},
        }
        for base, info in routers.items():
            name = node_name(base, d)
            plan[name] = {
                "role": "router",
                "dumbbell": d,
                "base": base,
                "addresses": {},
                "prefixes": {},
                "interfaces": {},
                "links": {},
                "routes": {_net(info["far"], d): _ip("core", d, CORE_OCTETS[info["other"]])},
                "bottleneck": "core",  # the key whose egress holds the qdisc
            }
        # hosts: one /30 link each to their router
        for i in range(1, pairs + 1):
            for role, (prefix, router, side) in sorted(SIDES.items(), reverse=True):
                base = "%s%d" % (prefix, i)
                name, rname = node_name(base, d), node_name(router, d)
                host_ip, router_ip = _ip(side, d, 4 * i - 2), _ip(side, d, 4 * i - 3)
                link = node_name("%s-%s" % (base, router), d)
                far = "receivers" if role == "sender" else "senders"
                plan[name] = {
                    "role": role,
                    "dumbbell": d,
                    "pair": i,
                    "base": base,
                    "peer": node_name("%s%d" % ("r" if prefix == "s" else "s", i), d),
                    "addresses": {router: host_ip},
                    "prefixes": {router: 30},
                    "interfaces": {router: "%s:%s" % (name, router)},
                    "links": {router: link},
                    "routes": {_net(far, d): router_ip},
                }
                rt = plan[rname]
                rt["addresses"][base] = router_ip
                rt["prefixes"][base] = 30
                rt["interfaces"][base] = "%s:%s" % (rname, base)
                rt["links"][base] = link
        for base in routers:
            name = node_name(base, d)
            plan[name]["addresses"]["core"] = _ip("core", d, CORE_OCTETS[base])
            plan[name]["prefixes"]["core"] = 24
            plan[name]["interfaces"]["core"] = "%s:core" % name
            plan[name]["links"]["core"] = node_name(
                ("core-a" if base == "rt1" else "core-b") if delay_node else "core", d)
        if delay_node:
            name = node_name(DELAY_NODE, d)
            plan[name] = {
                "role": "delay",
                "dumbbell": d,
                "base": DELAY_NODE,
                "addresses": {},
                "prefixes": {},
                "interfaces": {"rt1": name + ":if0", "rt2": name + ":if1"},  # toward
                "links": {"rt1": node_name("core-a", d), "rt2": node_name("core-b", d)},
                "routes": {},
            }
    return plan


def plan_links(plan):
    """link name -> sorted [interface id] of its two ends, from a dumbbell_plan()."""
    links = {}
    for info in plan.values():
        for key, link in info["links"].items():
            links.setdefault(link, []).append(info["interfaces"][key])
    return dict((link, sorted(ends)) for link, ends in links.items())


def machines_needed(pairs, dumbbells):
    """Physical machines: hosts, two routers and one delay node per dumbbell
    (Emulab also takes a machine for the delay node it inserts on a shaped link)."""
    return dumbbells * (2 * pairs + 3)


def sender_os(image, declared):
    """"freebsd"/"linux" from the declared OS or, for "auto", from the image URN."""
    if declared in ("freebsd", "linux"):
        return declared
    name = image.rsplit("/", 1)[-1].upper()
    if "FBSD" in name or "FREEBSD" in name:
        return "freebsd"
    if any(k in name for k in ("UBUNTU", "DEBIAN", "CENTOS", "ROCKY", "FEDORA", "LINUX")):
        return "linux"
    return None


def sender_images(p):
    """The sender image of each dumbbell: the per-dumbbell list when given, else the
    one sender image for all. p: dict-like parameters."""
    listed = [w.strip() for w in p.get("senderImages", "").split(",") if w.strip()]
    if listed:
        return listed
    return [p["senderImageCustom"] or p["senderImage"]] * max(1, p["dumbbells"])


IMAGE_RE = re.compile(r"^urn:publicid:IDN\+[A-Za-z0-9.:-]+\+image\+[A-Za-z0-9._:/+-]+$")
HWTYPE_RE = re.compile(r"^[A-Za-z0-9._-]*$")
# Experimental ports of a known hardware type at each link speed: [(ports, machines with
# that many)]. Emulab's d430 documentation: of 160 d430s, 96 have four Intel I350 1 GbE
# ports and 64 have two 1 GbE ports plus four 10 GbE ports (Intel X710, 10 Gb/s only).
# rt1 and rt2 need one port per pair plus the bottleneck: a d430 dumbbell holds 3 pairs.
PORTS = {"d430": {1000: [(4, 96), (2, 64)], 10000: [(4, 64)]}}
HW_MACHINES = {"d430": 160}


def validate(p):
    """Bad parameter combinations as [(message, [parameter names])]; p: dict-like."""
    errors = []

    def bad(msg, *names):
        errors.append((msg, list(names)))

    if not 1 <= p["pairs"] <= MAX_PAIRS:
        bad("Sender/receiver pairs must be 1 to %d." % MAX_PAIRS, "pairs")
    if not 1 <= p["dumbbells"] <= MAX_DUMBBELLS:
        bad("Dumbbells must be 1 to %d." % MAX_DUMBBELLS, "dumbbells")
    elif 1 <= p["pairs"] <= MAX_PAIRS and machines_needed(p["pairs"], p["dumbbells"]) > MAX_MACHINES:
        bad(
            "%d dumbbell(s) of %d pair(s) need %d machines (2 per pair + rt1, rt2 and a delay "
            "node each); at most %d can be requested at once: fewer pairs or dumbbells."
            % (p["dumbbells"], p["pairs"], machines_needed(p["pairs"], p["dumbbells"]), MAX_MACHINES),
            "pairs",
            "dumbbells",
        )
    if not 1 <= p["bandwidthMbps"] <= MAX_RATE_MBPS:
        bad("Bottleneck rate must be 1 to %d Mbit/s." % MAX_RATE_MBPS, "bandwidthMbps")
    elif p["bandwidthMbps"] > p["linkSpeedMbps"]:
        bad("Bottleneck rate %d Mbit/s is above the link speed (%d Mbit/s): rt1's shaper must be "
            "the slowest point." % (p["bandwidthMbps"], p["linkSpeedMbps"]),
            "bandwidthMbps", "linkSpeedMbps")
    if not 0 <= p["rttMs"] <= MAX_RTT_MS:
        bad("RTT must be 0 to %d ms." % MAX_RTT_MS, "rttMs")
    elif p["rttMs"] % 2:
        bad("RTT must be even: each direction gets RTT/2 whole milliseconds.", "rttMs")
    elif p.get("delayMethod") == "linkshaping" and 0 < p["rttMs"] // 2 < EMULAB_DELAY_THRESHOLD_MS:
        bad("Link shaping: Emulab inserts its delay node only for a one-way latency of at least "
            "%d ms, so an RTT of %d ms would not be delayed at all: use RTT 0 or at least %d ms, "
            "or the explicit delay node (delaynode)."
            % (EMULAB_DELAY_THRESHOLD_MS, p["rttMs"], 2 * EMULAB_DELAY_THRESHOLD_MS),
            "delayMethod", "rttMs")
    if not 2 <= p["queuePackets"] <= MAX_QUEUE:
        bad("Bottleneck queue must be 2 to %d packets." % MAX_QUEUE, "queuePackets")
    elif p["aqm"] == "red" and p["queuePackets"] < MIN_RED_QUEUE:
        bad(
            "RED needs a queue of at least %d packets for its thresholds." % MIN_RED_QUEUE,
            "aqm",
            "queuePackets",
        )
    if not 0 <= p["txRing"] <= MAX_TX_RING:
        bad("TX ring must be 0 (driver default) to %d descriptors." % MAX_TX_RING, "txRing")
    for name in ("hwType", "delayHwType"):
        if not HWTYPE_RE.match(p[name]):
            bad("Hardware type must be a type name such as d430 (or empty for any).", name)
    ports = router_ports(p["hwType"], p["linkSpeedMbps"])
    if ports is not None and 1 <= p["pairs"] <= MAX_PAIRS and p["pairs"] + 1 > ports:
        bad("A %s has at most %d experimental ports at %d Mbit/s (%s); each router needs one "
            "per pair plus the bottleneck, so at most %d pairs at %d Mbit/s links."
            % (p["hwType"], ports, p["linkSpeedMbps"], port_note(p["hwType"], p["linkSpeedMbps"]),
               ports - 1, p["linkSpeedMbps"]), "pairs", "hwType", "linkSpeedMbps")

    per_dumbbell = sender_images(p)
    if p.get("senderImages", "") and 1 <= p["dumbbells"] <= MAX_DUMBBELLS \
            and len(per_dumbbell) != p["dumbbells"]:
        bad("Sender images per dumbbell: %d image(s) for %d dumbbell(s); give one per dumbbell, "
            "comma-separated." % (len(per_dumbbell), p["dumbbells"]), "senderImages", "dumbbells")
    if p.get("senderImages", ""):
        images, image_param = sorted(set(per_dumbbell)), "senderImages"
    else:
        images = [p["senderImageCustom"] or p["senderImage"]]
        image_param = "senderImageCustom" if p["senderImageCustom"] else "senderImage"
    for image in images:
        if not IMAGE_RE.match(image):
            bad("Sender image must be an image URN (urn:publicid:IDN+...+image+...)%s."
                % ("" if image_param != "senderImages" else ", not %r" % image), image_param)
            continue
        guessed = sender_os(image, "auto")
        if p["senderOs"] == "auto" and guessed is None:
            bad("Cannot tell the sender image's OS from its name: set the sender OS.",
                image_param, "senderOs")
        elif p["senderOs"] != "auto" and guessed is not None and guessed != p["senderOs"]:
            bad("Sender OS %s does not match the %s image." % (p["senderOs"], guessed),
                image_param, "senderOs")
    if not IMAGE_RE.match(p["nodeImage"]):
        bad("Router/receiver image must be an image URN.", "nodeImage")
    elif sender_os(p["nodeImage"], "auto") == "freebsd":
        bad("Routers and receivers run Linux (tc qdiscs): choose a Linux image.", "nodeImage")
    return errors


def router_ports(hw_type, speed):
    """The most experimental ports at `speed` Mbit/s a machine of `hw_type` has (0: none
    at that speed), or None for a type this profile does not know (or any type: "")."""
    if hw_type not in PORTS:
        return None
    return max([n for n, _ in PORTS[hw_type].get(speed, [])] or [0])


def port_note(hw_type, speed):
    """Which machines of `hw_type` have how many ports at `speed`, for the messages."""
    kinds = PORTS[hw_type].get(speed, [])
    if not kinds:
        return "none of its ports runs at that speed"
    return ", ".join("%d of Emulab's %d have %d" % (m, HW_MACHINES[hw_type], n) for n, m in kinds)


def port_warnings(p):
    """Legal but unchecked: a hardware type whose ports this profile does not know (or
    any type), where only Emulab's mapper can tell whether the routers fit."""
    if p["hwType"] in PORTS or not HWTYPE_RE.match(p["hwType"]) or not 1 <= p["pairs"] <= MAX_PAIRS:
        return []
    which = "Any hardware type" if not p["hwType"] else "Hardware type %s" % p["hwType"]
    return [(
        "%s: ccbench cannot check the ports. rt1 and rt2 each need %d experimental ports at "
        "%d Mbit/s (one per pair plus the bottleneck)%s. If Emulab cannot map the experiment, "
        "choose a type with that many (a d430 has four 1 GbE ports, or four 10 GbE ports on "
        "64 of them: at most 3 pairs)."
        % (which, p["pairs"] + 1, p["linkSpeedMbps"],
           "" if p["interSwitch"] == "yes" else ", and every machine of a dumbbell must sit "
           "behind one switch (inter-switch links are off)"),
        ["hwType", "pairs"],
    )]


def aqm_warnings(p):
    """Combinations that are legal but make the AQM irrelevant: the hard packet limit
    drains faster than the AQM's target delay, so plain tail drop decides."""
    target = AQM_TARGET_MS.get(p["aqm"])
    if target is None or not p["bandwidthMbps"] > 0:
        return []
    drain_ms = p["queuePackets"] * FRAME_BYTES * 8 / (p["bandwidthMbps"] * 1000.0)
    if drain_ms >= target:
        return []
    return [(
        "A %d-packet limit drains in %.2f ms at %d Mbit/s, below %s's %.0f ms target: "
        "the AQM will never act (tail drop decides). Raise the queue to at least %d packets."
        % (p["queuePackets"], drain_ms, p["bandwidthMbps"], p["aqm"], target,
           int(target * p["bandwidthMbps"] * 1000.0 / (FRAME_BYTES * 8)) + 1),
        ["aqm", "queuePackets"],
    )]


def _quote(arg):
    """Single-quote one shell word (values are validated already; this is belt and braces)."""
    return "'" + str(arg).replace("'", "'\\''") + "'"


def setup_command(script, args):
    """The startup command: run a repository script as root with key=value arguments."""
    words = ["%s=%s" % (k, v) for k, v in args]
    return "sudo /bin/sh %s/emulab/%s %s" % (REPO, script, " ".join(_quote(w) for w in words))


LINK_SPEEDS = [(1000, "1 Gb/s (d430: Intel I350)"), (10000, "10 Gb/s")]
YES_NO = ["no", "yes"]  # not BOOLEAN: geni-lib 0.9.9.4's command line reads bool("False") as True


def parameter_definitions(T):
    """The profile's parameters in form order: [(name, description, type, default,
    {defineParameter keyword arguments})]. T: portal.ParameterType."""
    return [
        ("pairs", "Sender/receiver pairs per dumbbell", T.INTEGER, 2, dict(
            longDescription="Number of sender/receiver pairs (1-%d); sender s_i sends to receiver r_i. "
                            "Each host has a link of its own to its router, so a router needs "
                            "pairs + 1 ports at the link speed: at most 3 pairs on d430s (four "
                            "1 GbE ports on 96 of Emulab's 160 d430s; four 10 GbE ports on the "
                            "other 64)." % MAX_PAIRS)),
        ("senderImage", "Sender OS image", T.IMAGE, FBSD142, dict(
            legalValues=[(FBSD142, "FreeBSD 14.2"), (UBUNTU24, "Ubuntu 24.04")],
            longDescription="OS of the senders s1..sN (the OS under test). Routers and receivers use the "
                            "router/receiver image.")),
        ("nodeImage", "Router/receiver image", T.IMAGE, UBUNTU24, dict(
            longDescription="Linux image for rt1, rt2 and the receivers (their setup uses tc and ethtool).")),
        ("hwType", "Hardware type", T.NODETYPE, "d430", dict(
            longDescription="Emulab hardware type for all hosts and routers, e.g. d430; empty = any type "
                            "(then nothing checks that rt1 and rt2 get pairs + 1 ports at the link "
                            "speed: Emulab's mapper decides). Of Emulab's 160 d430s, 96 have four "
                            "1 GbE ports and 64 have two 1 GbE plus four 10 GbE ports (X710, 10 Gb/s "
                            "only).")),
        ("bandwidthMbps", "Bottleneck rate (Mbit/s)", T.INTEGER, 1000, dict(
            longDescription="Rate of rt1's tbf shaper on its interface toward rt2, 1-%d Mbit/s and at most "
                            "the link speed. Only rt1 shapes: the links run at the link speed and the delay "
                            "node only delays. tbf counts %d-byte frames, the wire %d: at 1000 Mbit/s on "
                            "1 GbE the NIC sets the pace and rt1's TX ring joins the queue (as in the "
                            "seed); at most %d Mbit/s keeps the qdisc the only bottleneck."
                            % (MAX_RATE_MBPS, FRAME_BYTES, WIRE_FRAME_BYTES,
                               1000 * FRAME_BYTES // WIRE_FRAME_BYTES))),
        ("rttMs", "Round-trip time (ms)", T.INTEGER, 40, dict(
            longDescription="Base RTT added by the delay node, 0-%d ms, even; each direction gets RTT/2 "
                            "(the link latency is one-way)." % MAX_RTT_MS)),
        ("queuePackets", "Bottleneck queue (packets)", T.INTEGER, 48, dict(
            longDescription="Packet limit of the queue on rt1's bottleneck interface (pfifo limit, or the AQM's "
                            "hard limit), 2-%d. The seed testbed used 48." % MAX_QUEUE)),
        ("aqm", "Bottleneck AQM", T.STRING, "none", dict(
            legalValues=[("none", "none (pfifo tail drop)"), "fq_codel", "codel", "pie", "red"],
            longDescription="Queue discipline under rt1's tbf shaper. With an AQM the queue size is its hard "
                            "limit; RED needs at least %d packets." % MIN_RED_QUEUE)),
        ("delayMethod", "Delay method", T.STRING, "delaynode", dict(
            legalValues=[("delaynode", "explicit delay node dl (bridge)"),
                         ("linkshaping", "shaped link (Emulab inserts the delay node)")],
            longDescription="delaynode: the bottleneck runs through an explicit delay node named dl, a "
                            "transparent bridge with one dummynet pipe per direction, which ccbench "
                            "logs in to and checks (delay, no rate limit, clock). linkshaping: a "
                            "delayed link rt1 - rt2; Emulab inserts its own (unnamed) delay node, "
                            "whose configuration ccbench cannot read, and only for a one-way latency "
                            "of at least %d ms (RTT 0 or >= %d). Either way the delay node's pipes "
                            "ask for no rate (unlimited): they delay, rt1 shapes."
                            % (EMULAB_DELAY_THRESHOLD_MS, 2 * EMULAB_DELAY_THRESHOLD_MS))),
        ("dumbbells", "Independent dumbbells", T.INTEGER, 1, dict(
            longDescription="Number of independent dumbbells (1-%d) for parallel runs. Dumbbell d uses "
                            "10.d.x.0/24 and node names with suffix -d<d> for d >= 2 (s1-d2, rt1-d2, ...)."
                            % MAX_DUMBBELLS)),
        ("reverseShaping", "Shape the reverse path", T.STRING, "no", dict(
            legalValues=[("no", "no (rt1 only)"), ("yes", "yes (rt1 and rt2)")],
            longDescription="Also put the shaper and queue on rt2's interface toward rt1 (symmetric runs).")),
        ("linkSpeedMbps", "Link speed (Mbit/s)", T.INTEGER, 1000, dict(
            legalValues=LINK_SPEEDS, advanced=True,
            longDescription="Physical speed requested for every link (access links, both halves of the "
                            "bottleneck). Never shaped by Emulab (the delay node's pipes are unlimited): "
                            "the only shaper is rt1's. The bottleneck rate cannot exceed it. rt1 and rt2 "
                            "need pairs + 1 ports at this speed; on d430s 10 Gb/s means the 64 machines "
                            "with X710 ports.")),
        ("delayHwType", "Delay node hardware type", T.NODETYPE, "", dict(
            advanced=True,
            longDescription="Emulab hardware type of the delay node dl (delay method delaynode); empty = "
                            "any type Emulab offers as a delay node. A type here is a request for "
                            "Emulab's delay-<type> node type (e.g. delay-d430), which a cluster may not "
                            "offer: leave it empty unless you know it does.")),
        ("interSwitch", "Allow inter-switch links", T.STRING, "no", dict(
            legalValues=[("no", "no (all links on one switch)"), ("yes", "yes (easier to map)")],
            advanced=True,
            longDescription="no: Emulab must not map any link onto an inter-switch trunk, where other "
                            "experiments' traffic could queue or drop ours; every machine of a dumbbell "
                            "must then sit behind one switch (d430 1 GbE ports: 48-port switches, three "
                            "per rack). yes: a mapping that fails for lack of free nodes on one switch "
                            "may succeed, at that risk.")),
        ("senderImageCustom", "Custom sender image URN", T.STRING, "", dict(
            advanced=True,
            longDescription="Overrides the sender OS image, e.g. your own image with a patched kernel. "
                            "Set the sender OS if its name does not say FBSD or UBUNTU.")),
        ("senderImages", "Sender images per dumbbell", T.STRING, "", dict(
            advanced=True,
            longDescription="Comma-separated image URNs, one per dumbbell (dumbbell 1 first), overriding "
                            "the sender image: e.g. FreeBSD senders on dumbbell 1 and Ubuntu on dumbbell 2, "
                            "so one experiment compares stacks across OSes (pin each variant to its dumbbell "
                            "with `dumbbell:` in the ccbench config).")),
        ("senderOs", "Sender OS", T.STRING, "auto", dict(
            legalValues=["auto", "freebsd", "linux"], advanced=True,
            longDescription="Which setup script the senders run; auto = from the image name.")),
        ("txRing", "Router TX ring (descriptors)", T.INTEGER, 48, dict(
            advanced=True,
            longDescription="TX ring size asked for on the shaped router interface, which is first set to "
                            "one transmit queue (ethtool -L combined 1): the L2 buffer under the qdisc is "
                            "then one FIFO ring shared by all flows, at most this many frames and at most "
                            "BQL's byte limit (with igb's 8 queues each flow would get a ring of its own, "
                            "not the seed's shared 48 + 48). It matters only where the NIC is slower than "
                            "tbf (a rate above 984 Mbit/s on 1 GbE). 0 keeps the driver default. Drivers "
                            "clamp it without an error (igb, the d430's 1 GbE, on Ubuntu 24.04: at least "
                            "%d; older kernels and FreeBSD: 80): what was set, the TX queues and their BQL "
                            "state are recorded in /var/tmp/ccbench/nic-<interface>.json on the router."
                            % IGB_MIN_TX_RING)),
        ("hostOffloads", "Sender/receiver NIC offloads", T.STRING, "default", dict(
            legalValues=[("default", "OS defaults (as the seed)"), ("off", "TSO/GSO/GRO/LRO off")],
            advanced=True,
            longDescription="default: senders and receivers keep their OS's offload settings, as in the "
                            "seed (routers always run with offloads off). off: switch them off on the "
                            "hosts' experiment interfaces too.")),
        ("containerTooling", "Linux tooling container", T.STRING, "no", dict(
            legalValues=YES_NO, advanced=True,
            longDescription="yes: Linux nodes also install podman and build the ccbench tooling container "
                            "from containers/linux-node.")),
    ]


def define_parameters(portal):
    """Define the parameters on portal.context; returns parameter_definitions()."""
    defs = parameter_definitions(portal.ParameterType)
    for name, description, typ, default, options in defs:
        portal.context.defineParameter(name, description, typ, default, **options)
    return defs


def _paramdef_json(defs):
    """The parameter form as upstream geni-lib's portal dumps it (its Parameter.toParamdef()
    plus groupName, in definition order); written by this profile under geni-lib 0.9.9.4,
    whose own dump cannot serialise its Parameter objects."""
    out = []
    for name, description, typ, default, options in defs:
        group = "advanced" if options.get("advanced") else None
        entry = [
            ("name", name), ("description", description),
            ("longDescription", options.get("longDescription")), ("inputFieldHint", None),
            ("type", typ), ("legalValues", options.get("legalValues")), ("defaultValue", default),
            ("groupId", group), ("hide", False), ("inputConstraints", None),
        ]
        if group:
            entry.append(("groupName", "Advanced"))
        out.append(json.dumps(name) + ": " + json.dumps(OrderedDict(entry)))
    return "{" + ", ".join(out) + "}"


def _portal_value(v):
    """A value as the portal sends it ({"value": v}) or as given."""
    return v["value"] if isinstance(v, dict) and "value" in v else v


def bind_parameters(portal, defs):
    """Bind the parameters as a plain dict, under either geni-lib.

    Upstream geni-lib (the portal's; 0.9.9.5) returns a DictNamespace, a dict whose
    attributes are items, so vars() of it is {}: read each with getattr(). geni-lib
    0.9.9.4 (PyPI) binds the command line the same way, but in portal mode its dump of
    the parameter form raises TypeError and it reads GENILIB_PORTAL_PARAMS_PATH as a flat
    {name: value}, not the portal's {"bindings": {name: {"value": v}}}: there this
    profile writes the form itself and binds the values it read."""
    ctx = portal.context
    if hasattr(portal, "DictNamespace") or "GENILIB_PORTAL_MODE" not in os.environ:
        bound = ctx.bindParameters()
    else:
        dump = os.environ.get("GENILIB_PORTAL_DUMPPARAMS_PATH")
        if dump:
            with open(dump, "w") as f:
                f.write(_paramdef_json(defs))
        given = {}
        path = os.environ.get("GENILIB_PORTAL_PARAMS_PATH")
        if path:
            with open(path) as f:
                given = json.load(f)
            if "bindings" in given:
                given = given["bindings"] or {}
        values = OrderedDict((name, _portal_value(given.get(name, default)))
                             for name, _, _, default, _ in defs)
        bound = ctx.bindParameters(altParamSrc=values)
        for name in values:
            if not hasattr(bound, name):  # 0.9.9.4 only prints these
                ctx.reportError(portal.ParameterError(
                    "Illegal value %r for parameter %s" % (values[name], name), [name]))
        ctx.verifyParameters()
    return OrderedDict((name, getattr(bound, name)) for name, _, _, _, _ in defs)


def build_request(portal, pg, igext, p):
    """Build the request RSpec for validated parameters `p` (a dict)."""
    request = portal.context.makeRequestRSpec()
    images = sender_images(p)
    delay_node = p["delayMethod"] == "delaynode"
    plan = dumbbell_plan(p["pairs"], p["dumbbells"], delay_node)
    one_way_ms = p["rttMs"] // 2
    link_kbps = p["linkSpeedMbps"] * 1000  # geni-lib capacities are kbps
    container = p["containerTooling"]
    ifaces = {}  # interface id -> geni-lib interface

    def add_node(name, image):
        node = request.RawPC(name)
        node.disk_image = image
        if p["hwType"]:
            node.hardware_type = p["hwType"]
        info = plan[name]
        for key in sorted(info["interfaces"], key=lambda k: (k == "core", k)):
            iface = node.addInterface(key)
            iface.addAddress(pg.IPv4Address(info["addresses"][key], NETMASKS[info["prefixes"][key]]))
            ifaces[info["interfaces"][key]] = iface
        return node

    def add_link(name):
        # Every link runs at the pinned physical speed (the bandwidth picks the ports),
        # never rate-limited by Emulab ("no bandwidth shaping": a delay node on it, if
        # any, gets an unlimited pipe), and, unless allowed, never across an inter-switch
        # trunk.
        link = request.Link(name)
        for end in links[name]:
            link.addInterface(ifaces[end])
        link.bandwidth = link_kbps
        link.setNoBandwidthShaping()
        if p["interSwitch"] != "yes":
            link.setNoInterSwitchLinks()
        return link

    def only(routes):
        return list(routes.items())[0]

    for d in range(1, p["dumbbells"] + 1):
        sender_image = images[d - 1]
        sender_is_freebsd = sender_os(sender_image, p["senderOs"]) == "freebsd"
        sender_setup = "setup-freebsd-sender.sh" if sender_is_freebsd else "setup-linux-host.sh"
        dumbbell = dict((name, info) for name, info in plan.items() if info["dumbbell"] == d)
        links = plan_links(dumbbell)

        for base in ("rt1", "rt2"):
            name = node_name(base, d)
            node = add_node(name, p["nodeImage"])
            info = plan[name]
            net, via = only(info["routes"])
            shaped = "yes" if base == "rt1" or p["reverseShaping"] == "yes" else "no"
            node.addService(pg.Execute(shell="sh", command=setup_command("setup-router.sh", [
                ("role", base),
                ("core_addr", info["addresses"]["core"]),
                ("if_addrs", ",".join(sorted(info["addresses"].values()))),
                ("route", net), ("via", via),
                ("rate_mbit", p["bandwidthMbps"]), ("queue", p["queuePackets"]),
                ("aqm", p["aqm"]), ("shape", shaped), ("tx_ring", p["txRing"]),
            ])))

        for i in range(1, p["pairs"] + 1):
            for base, role in (("s%d" % i, "sender"), ("r%d" % i, "receiver")):
                name = node_name(base, d)
                sender = role == "sender"
                node = add_node(name, sender_image if sender else p["nodeImage"])
                info = plan[name]
                net, via = only(info["routes"])
                args = [("role", role), ("addr", list(info["addresses"].values())[0]),
                        ("route", net), ("via", via), ("offloads", p["hostOffloads"])]
                script = sender_setup if sender else "setup-linux-host.sh"
                if script == "setup-linux-host.sh":
                    args.append(("container", container))
                node.addService(pg.Execute(shell="sh", command=setup_command(script, args)))

        for i in range(1, p["pairs"] + 1):  # the access links, one per host
            for base in ("s%d" % i, "r%d" % i):
                add_link(list(plan[node_name(base, d)]["links"].values())[0])

        if delay_node:
            # What request.BridgedLink(name) expands to (a "delay" bridge node plus a
            # link on each side), spelled out so the delay node is named "dl": BridgedLink
            # would call it "<name>_bridge", and underscores are not valid host names.
            request.addNamespace(pg.Namespaces.DELAY)  # declare "delay:" once, at the root
            name = node_name(DELAY_NODE, d)
            bridge = request.Bridge(name)
            # A type here makes Emulab ask for node type delay-<type> (libvtop_stable,
            # GenVirtNodes); empty lets it pick any delay-capable machine.
            if p["delayHwType"]:
                bridge.hardware_type = p["delayHwType"]
            ifaces[plan[name]["interfaces"]["rt1"]] = bridge.iface0
            ifaces[plan[name]["interfaces"]["rt2"]] = bridge.iface1
            for pipe in (bridge.pipe0, bridge.pipe1):  # pipe0: rt1 -> rt2, pipe1: rt2 -> rt1
                # Delay only, one choice throughout: an unlimited pipe (bandwidth 0, what
                # "no bandwidth shaping" on core-a/core-b also gives). dummynet moves each
                # packet of an unlimited pipe into its delay line at once, so its queue
                # (no size can be asked for here) never fills; a pipe limited to the link
                # speed would release packets once per clock tick and need a tick's frames
                # of queue (~82 at 1 Gb/s and kern.hz 1000), and dummynet cannot hold 10 Gb/s
                # (its rate is 32-bit bit/s). ccbench.delaynode checks what dl really has.
                pipe.bandwidth = 0
                pipe.latency = one_way_ms
            add_link(node_name("core-a", d))
            add_link(node_name("core-b", d))
        else:
            # A delayed link: Emulab inserts a delay node of its own (libvtop_stable,
            # GenVirtLans), whose pipes, with "no bandwidth shaping", only delay as dl's do.
            # Never setForceShaping(): emulab:force_shaping is end-node shaping (netem on
            # rt1 and rt2 themselves, libvtop virtlan_use_linkdelay), and setup-router.sh
            # deletes the root qdisc of both routers' core interface: the RTT would be lost.
            core = add_link(node_name("core", d))
            core.latency = one_way_ms  # one-way: the RTT is twice this

    doc = (__doc__ or "").strip()
    parts = re.split(r"\n\s*Instructions:\s*\n", doc, maxsplit=1)
    tour = igext.Tour()
    tour.Description(igext.Tour.MARKDOWN, parts[0])
    if len(parts) == 2:
        tour.Instructions(igext.Tour.MARKDOWN, parts[1])
    request.addTour(tour)
    return request


def main():
    import geni.portal as portal
    import geni.rspec.pg as pg
    import geni.rspec.igext as igext
    import geni.rspec.emulab  # noqa: F401  (registers the Emulab link/node extensions)

    defs = define_parameters(portal)
    p = bind_parameters(portal, defs)
    for msg, names in validate(p):
        portal.context.reportError(portal.ParameterError(msg, names))
    for msg, names in aqm_warnings(p) + port_warnings(p):
        portal.context.reportWarning(portal.ParameterWarning(msg, names))
    portal.context.verifyParameters()  # exits 100 + number of errors if any
    build_request(portal, pg, igext, p)
    portal.context.printRequestRSpec()


# The portal runs this file as a script; tests import it for dumbbell_plan() with
# CCBENCH_PROFILE_IMPORT=1 so that nothing is defined, bound or printed.
if os.environ.get("CCBENCH_PROFILE_IMPORT") != "1":
    main()
