"""ccbench: TCP congestion-control comparisons on a bare-metal dumbbell.

Each dumbbell *d* (1 to 4) has N sender/receiver pairs (1 to 4):

    s1..sN --[left LAN 10.d.1.0/24]-- rt1 ==[bottleneck 10.d.2.0/24]== rt2 --[right LAN 10.d.3.0/24]-- r1..rN

The bottleneck link has the chosen rate and RTT/2 one-way latency in each
direction. It goes through an explicit Emulab delay node `dl` (a transparent
dummynet bridge), or, with delay method "linkshaping", through the delay node that
Emulab inserts for a shaped link. Router rt1 holds the bottleneck queue: on its
interface toward rt2 it runs a tbf shaper at the bottleneck rate with a
`pfifo limit <queue packets>` child (or the chosen AQM), with NIC offloads off and a
small TX ring. rt2 gets the same qdisc only if "shape the reverse path" is on.

Node names: dumbbell 1 uses the plain names `s1..sN`, `rt1`, `dl`, `rt2`, `r1..rN`;
dumbbell d >= 2 appends `-d<d>` (`s1-d2`, `rt1-d2`, `dl-d2`, ...), and so do the link
names (`left`, `core`, `right`; `core-a`/`core-b` on each side of `dl`).
Addresses: s_i = 10.d.1.(10+i), rt1 = 10.d.1.1 and 10.d.2.1, rt2 = 10.d.2.2 and
10.d.3.1, r_i = 10.d.3.(10+i), all /24.

Instructions:

Wait until every node's startup service shows "Finished" (each node logs to
`/local/logs/ccbench-setup-*.log` and writes `/var/tmp/ccbench-setup.done`).
Then, on your control machine (where ccbench is installed):

1. Save the experiment's manifest (the "Manifest" tab) as `manifest.xml`.
2. `ccbench testbed inventory --manifest manifest.xml > hosts.yaml`
3. `snakemake --cores 4 all --configfile config/examples/emulab-seed001.yaml`

The report lands in `reports/`. The setup scripts are in `emulab/` of this
repository (cloned to `/local/repository` on every node); rerunning one by hand
(`sudo sh /local/repository/emulab/setup-router.sh ...`, same arguments as in the
startup service) is safe.
"""

import os
import re

# ---------------------------------------------------------------------------
# Addressing and naming plan: the single source of truth for this profile.
# tests/unit/test_profile.py compares it with the local model (ccbench.topology).
# ---------------------------------------------------------------------------
NETMASK = "255.255.255.0"  # every segment is a /24
SUBNETS = {"left": "10.{d}.1", "core": "10.{d}.2", "right": "10.{d}.3"}
ROUTER_OCTETS = {"rt1": {"left": 1, "core": 1}, "rt2": {"core": 2, "right": 1}}
HOST_OCTET_BASE = 10  # s_i and r_i get host octet 10 + i
HOST_SEGMENT = {"sender": "left", "receiver": "right"}
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
MAX_QUEUE = 100000
MAX_TX_RING = 8192
MIN_RED_QUEUE = 12  # RED's min threshold (limit/12) must hold a full frame
AQM_TARGET_MS = {"codel": 5.0, "fq_codel": 5.0, "pie": 15.0}  # their default targets
FRAME_BYTES = 1514


def node_name(base, d):
    """Name of node `base` ("s1", "rt1", "dl", ...) in dumbbell `d` (1-based)."""
    return base if d == 1 else base + SUFFIX.format(d=d)


def _ip(segment, d, octet):
    return "%s.%d" % (SUBNETS[segment].format(d=d), octet)


def _net(segment, d):
    return "%s.0/24" % SUBNETS[segment].format(d=d)


def dumbbell_plan(pairs, dumbbells=1, delay_node=True):
    """node name -> {role, dumbbell, base, addresses {segment: ip}, interfaces
    {segment: interface id}, routes {net: gateway}, ...} for `dumbbells` dumbbells
    of `pairs` pairs. Plain dicts, no geni-lib: importable with
    CCBENCH_PROFILE_IMPORT=1. `delay_node` adds the explicit delay node, a
    transparent bridge without addresses."""
    plan = {}
    for d in range(1, dumbbells + 1):
        # hosts: s_i on the left LAN behind rt1, r_i on the right LAN behind rt2
        for i in range(1, pairs + 1):
            for role, prefix, peer, router, far in (("sender", "s", "r", "rt1", "right"),
                                                    ("receiver", "r", "s", "rt2", "left")):
                base = "%s%d" % (prefix, i)
                name = node_name(base, d)
                seg = HOST_SEGMENT[role]
                plan[name] = {
                    "role": role,
                    "dumbbell": d,
                    "pair": i,
                    "base": base,
                    "peer": node_name("%s%d" % (peer, i), d),
                    "addresses": {seg: _ip(seg, d, HOST_OCTET_BASE + i)},
                    "interfaces": {seg: "%s:%s" % (name, seg)},
                    "routes": {_net(far, d): _ip(seg, d, ROUTER_OCTETS[router][seg])},
                }
        # routers: each reaches the far LAN through the other router's core address
        for base, other, far in (("rt1", "rt2", "right"), ("rt2", "rt1", "left")):
            name = node_name(base, d)
            octets = ROUTER_OCTETS[base]
            plan[name] = {
                "role": "router",
                "dumbbell": d,
                "base": base,
                "addresses": dict((seg, _ip(seg, d, o)) for seg, o in octets.items()),
                "interfaces": dict((seg, "%s:%s" % (name, seg)) for seg in octets),
                "routes": {_net(far, d): _ip("core", d, ROUTER_OCTETS[other]["core"])},
                "bottleneck": "core",  # the segment whose egress holds the qdisc
            }
        if delay_node:
            name = node_name(DELAY_NODE, d)
            plan[name] = {
                "role": "delay",
                "dumbbell": d,
                "base": DELAY_NODE,
                "addresses": {},
                "interfaces": {"rt1": name + ":if0", "rt2": name + ":if1"},  # toward
                "routes": {},
            }
    return plan


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
    if not 0 <= p["rttMs"] <= MAX_RTT_MS:
        bad("RTT must be 0 to %d ms." % MAX_RTT_MS, "rttMs")
    elif p["rttMs"] % 2:
        bad("RTT must be even: each direction gets RTT/2 whole milliseconds.", "rttMs")
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
    if not HWTYPE_RE.match(p["hwType"]):
        bad("Hardware type must be a type name such as d430 (or empty for any).", "hwType")

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


def define_parameters(portal):
    pc = portal.context
    T = portal.ParameterType
    pc.defineParameter(
        "pairs", "Sender/receiver pairs per dumbbell", T.INTEGER, 2,
        longDescription="Number of sender/receiver pairs (1-%d); sender s_i sends to receiver r_i."
                        % MAX_PAIRS)
    pc.defineParameter(
        "senderImage", "Sender OS image", T.IMAGE, FBSD142,
        legalValues=[(FBSD142, "FreeBSD 14.2"), (UBUNTU24, "Ubuntu 24.04")],
        longDescription="OS of the senders s1..sN (the OS under test). Routers and receivers use the "
                        "router/receiver image.")
    pc.defineParameter(
        "nodeImage", "Router/receiver image", T.IMAGE, UBUNTU24,
        longDescription="Linux image for rt1, rt2 and the receivers (their setup uses tc and ethtool).")
    pc.defineParameter(
        "hwType", "Hardware type", T.NODETYPE, "d430",
        longDescription="Emulab hardware type for all hosts and routers, e.g. d430; empty = any type.")
    pc.defineParameter(
        "bandwidthMbps", "Bottleneck rate (Mbit/s)", T.INTEGER, 1000,
        longDescription="Rate of the rt1-rt2 bottleneck, 1-%d Mbit/s: set on the Emulab link/delay node "
                        "and as rt1's tbf shaper rate." % MAX_RATE_MBPS)
    pc.defineParameter(
        "rttMs", "Round-trip time (ms)", T.INTEGER, 40,
        longDescription="Base RTT added by the delay node, 0-%d ms, even; each direction gets RTT/2 "
                        "(the link latency is one-way)." % MAX_RTT_MS)
    pc.defineParameter(
        "queuePackets", "Bottleneck queue (packets)", T.INTEGER, 48,
        longDescription="Packet limit of the queue on rt1's bottleneck interface (pfifo limit, or the AQM's "
                        "hard limit), 2-%d. The seed testbed used 48." % MAX_QUEUE)
    pc.defineParameter(
        "aqm", "Bottleneck AQM", T.STRING, "none",
        legalValues=[("none", "none (pfifo tail drop)"), "fq_codel", "codel", "pie", "red"],
        longDescription="Queue discipline under rt1's tbf shaper. With an AQM the queue size is its hard "
                        "limit; RED needs at least %d packets." % MIN_RED_QUEUE)
    pc.defineParameter(
        "delayMethod", "Delay method", T.STRING, "delaynode",
        legalValues=[("delaynode", "explicit delay node dl (bridge)"),
                     ("linkshaping", "shaped link (Emulab inserts the delay node)")],
        longDescription="delaynode: the bottleneck runs through an explicit delay node named dl, a "
                        "transparent bridge with one dummynet pipe per direction. linkshaping: a plain "
                        "shaped link; Emulab adds its own (unnamed) delay node.")
    pc.defineParameter(
        "dumbbells", "Independent dumbbells", T.INTEGER, 1,
        longDescription="Number of independent dumbbells (1-%d) for parallel runs. Dumbbell d uses "
                        "10.d.x.0/24 and node names with suffix -d<d> for d >= 2 (s1-d2, rt1-d2, ...)."
                        % MAX_DUMBBELLS)
    pc.defineParameter(
        "reverseShaping", "Shape the reverse path", T.STRING, "no",
        legalValues=[("no", "no (rt1 only)"), ("yes", "yes (rt1 and rt2)")],
        longDescription="Also put the shaper and queue on rt2's interface toward rt1 (symmetric runs).")
    pc.defineParameter(
        "senderImageCustom", "Custom sender image URN", T.STRING, "", advanced=True,
        longDescription="Overrides the sender OS image, e.g. your own image with a patched kernel. "
                        "Set the sender OS if its name does not say FBSD or UBUNTU.")
    pc.defineParameter(
        "senderImages", "Sender images per dumbbell", T.STRING, "", advanced=True,
        longDescription="Comma-separated image URNs, one per dumbbell (dumbbell 1 first), overriding "
                        "the sender image: e.g. FreeBSD senders on dumbbell 1 and Ubuntu on dumbbell 2, so "
                        "one experiment compares stacks across OSes (pin each variant to its dumbbell "
                        "with `dumbbell:` in the ccbench config).")
    pc.defineParameter(
        "senderOs", "Sender OS", T.STRING, "auto", advanced=True,
        legalValues=["auto", "freebsd", "linux"],
        longDescription="Which setup script the senders run; auto = from the image name.")
    pc.defineParameter(
        "txRing", "Router TX ring (descriptors)", T.INTEGER, 48, advanced=True,
        longDescription="TX ring size on the shaped router interface (the L2 buffer under the qdisc; the "
                        "seed used 48 + 48). 0 keeps the driver default; drivers that refuse it are logged.")
    pc.defineParameter(
        "containerTooling", "Linux tooling container", T.STRING, "no", advanced=True,
        legalValues=["no", "yes"],
        longDescription="yes: Linux nodes also install podman and build the ccbench tooling container "
                        "from containers/linux-node.")


def build_request(portal, pg, igext, params):
    """Build the request RSpec for validated `params`."""
    request = portal.context.makeRequestRSpec()
    images = sender_images(vars(params))
    delay_node = params.delayMethod == "delaynode"
    plan = dumbbell_plan(params.pairs, params.dumbbells, delay_node)
    one_way_ms = params.rttMs // 2
    kbps = params.bandwidthMbps * 1000
    container = params.containerTooling

    def add_node(name, image):
        node = request.RawPC(name)
        node.disk_image = image
        if params.hwType:
            node.hardware_type = params.hwType
        return node

    def add_iface(node, name, segment):
        iface = node.addInterface(segment)
        iface.addAddress(pg.IPv4Address(plan[name]["addresses"][segment], NETMASK))
        return iface

    def only(routes):
        return list(routes.items())[0]

    for d in range(1, params.dumbbells + 1):
        sender_image = images[d - 1]
        sender_is_freebsd = sender_os(sender_image, params.senderOs) == "freebsd"
        sender_setup = "setup-freebsd-sender.sh" if sender_is_freebsd else "setup-linux-host.sh"
        left = request.LAN(node_name("left", d))
        right = request.LAN(node_name("right", d))
        for lan in (left, right):
            # Access LANs run at NIC speed: never shaped, any link speed will do.
            lan.best_effort = True
            lan.setNoBandwidthShaping()

        routers = {}
        for base, lan_seg, lan in (("rt1", "left", left), ("rt2", "right", right)):
            name = node_name(base, d)
            node = add_node(name, params.nodeImage)
            lan.addInterface(add_iface(node, name, lan_seg))
            routers[base] = add_iface(node, name, "core")
            net, via = only(plan[name]["routes"])
            shaped = "yes" if base == "rt1" or params.reverseShaping == "yes" else "no"
            node.addService(pg.Execute(shell="sh", command=setup_command("setup-router.sh", [
                ("role", base),
                ("core_addr", plan[name]["addresses"]["core"]),
                ("if_addrs", ",".join(sorted(plan[name]["addresses"].values()))),
                ("route", net), ("via", via),
                ("rate_mbit", params.bandwidthMbps), ("queue", params.queuePackets),
                ("aqm", params.aqm), ("shape", shaped), ("tx_ring", params.txRing),
            ])))

        for i in range(1, params.pairs + 1):
            for base, role, lan in (("s%d" % i, "sender", left), ("r%d" % i, "receiver", right)):
                name = node_name(base, d)
                sender = role == "sender"
                node = add_node(name, sender_image if sender else params.nodeImage)
                seg = HOST_SEGMENT[role]
                lan.addInterface(add_iface(node, name, seg))
                net, via = only(plan[name]["routes"])
                args = [("role", role), ("addr", plan[name]["addresses"][seg]), ("route", net), ("via", via)]
                script = sender_setup if sender else "setup-linux-host.sh"
                if script == "setup-linux-host.sh":
                    args.append(("container", container))
                node.addService(pg.Execute(shell="sh", command=setup_command(script, args)))

        if delay_node:
            # What request.BridgedLink(name) expands to (a "delay" bridge node plus a
            # link on each side), spelled out so the delay node is named "dl": BridgedLink
            # would call it "<name>_bridge", and underscores are not valid host names.
            request.addNamespace(pg.Namespaces.DELAY)  # declare "delay:" once, at the root
            bridge = request.Bridge(node_name(DELAY_NODE, d))
            for pipe in (bridge.pipe0, bridge.pipe1):  # pipe0: rt1 -> rt2, pipe1: rt2 -> rt1
                pipe.bandwidth = kbps
                pipe.latency = one_way_ms
            core_a = request.Link(node_name("core-a", d))
            core_a.addInterface(routers["rt1"])
            core_a.addInterface(bridge.iface0)
            core_b = request.Link(node_name("core-b", d))
            core_b.addInterface(bridge.iface1)
            core_b.addInterface(routers["rt2"])
        else:
            core = request.Link(node_name("core", d))
            core.addInterface(routers["rt1"])
            core.addInterface(routers["rt2"])
            core.bandwidth = kbps
            core.latency = one_way_ms  # one-way: the RTT is twice this
            core.setForceShaping()  # keep the delay node even at RTT 0 / NIC rate

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

    define_parameters(portal)
    params = portal.context.bindParameters()
    for msg, names in validate(vars(params)):
        portal.context.reportError(portal.ParameterError(msg, names))
    for msg, names in aqm_warnings(vars(params)):
        portal.context.reportWarning(portal.ParameterWarning(msg, names))
    portal.context.verifyParameters()  # exits 100 + number of errors if any
    build_request(portal, pg, igext, params)
    portal.context.printRequestRSpec()


# The portal runs this file as a script; tests import it for dumbbell_plan() with
# CCBENCH_PROFILE_IMPORT=1 so that nothing is defined, bound or printed.
if os.environ.get("CCBENCH_PROFILE_IMPORT") != "1":
    main()
