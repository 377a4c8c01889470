"""Tables + figures -> one self-contained HTML and the PDF of the same HTML.

One Jinja2 template renders everything; the HTML embeds its figures as data URIs so it
can be mailed, and WeasyPrint prints that very string with each figure named by its file
instead (printable), so both carry the same content.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from ccbench import instruments, spec
from ccbench import verdicts as verdicts_mod
from ccbench.metrics import JAIN_CONVERGED, JAIN_WINDOW_S
from ccbench.model import Matrix
from ccbench.report import causes, checks, cpu, data, invalid_runs, provenance, style, tables
from ccbench.report.fmt import fmt


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "n/a"


def _anchor(s: str) -> str:
    return "s-" + re.sub(r"[^A-Za-z0-9_-]+", "-", s)


def _figures(figures_dir: Path) -> list[dict[str, Any]]:
    manifest = json.loads((figures_dir / "figures.json").read_text())
    return [{**e, "src": _data_uri(figures_dir / e["file"])} for e in manifest]


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


@dataclass(frozen=True)
class Waits:
    """How many of a scenario's runs wait for their variant's kernel, and how many only
    for their boot tunables (data.waits_for_kernel)."""

    kernel: int = 0
    boot: int = 0

    @property
    def n(self) -> int:
        return self.kernel + self.boot

    def kinds(self) -> list[tuple[int, str]]:
        """(how many, what they wait for), for each kind some wait for."""
        return [(n, w) for n, w in ((self.kernel, "their kernel"),
                                    (self.boot, "their boot tunables")) if n]  # fmt: skip

    def what(self) -> str:
        """What they wait for."""
        return " or ".join(w for _, w in self.kinds())


def _waits(runs: pd.DataFrame) -> Waits:
    kernel = data.waits_for_kernel(runs)
    return Waits(kernel=int(kernel.sum()), boot=int((~kernel).sum()))


def _not_run(n_skip: int, waits: Waits) -> str:
    """Runs that did not run, apart: those waiting for their variant's kernel or boot
    tunables run once the senders boot with them, the others could not run here."""
    parts = [f"{n_skip - waits.n} not run"] if n_skip > waits.n else []
    return ", ".join(parts + [f"{n} waiting for {w}" for n, w in waits.kinds()])


def _runs_text(n_valid: int, n_ran: int, n_skip: int, waits: Waits = Waits()) -> str:
    if n_skip and not n_ran:
        return f"waiting for {waits.what()}" if waits.n == n_skip else "not run"
    return f"{n_valid}/{n_ran}" + (f" ({_not_run(n_skip, waits)})" if n_skip else "")


def _load_figs_title(figs: list[dict[str, Any]]) -> str:
    kinds = {f["kind"] for f in figs}
    parts = [("probe", "RTT under load"), ("jain_time", "fairness over time")]
    title = " and ".join(text for kind, text in parts if kind in kinds)
    return title[:1].upper() + title[1:]


def _runs_sentence(n_valid: int, n_ran: int, n_skip: int, waits: Waits = Waits()) -> str:
    if n_skip and not n_ran:
        return "no run ran" + (f" (all wait for {waits.what()})" if waits.n == n_skip else "")
    s = f"{n_valid}/{n_ran} runs valid"
    return s + (f", {_not_run(n_skip, waits)}" if n_skip else "")


def _conditions_row(c: data.Conditions, runs_text: str, bottleneck: str) -> dict[str, str]:
    return {
        "scenario": c.scenario,
        "anchor": _anchor(c.scenario),
        "description": c.description,
        "flows": c.flows_text(),
        "rate": fmt(c.topology.rate_mbit),
        "rtt": fmt(c.topology.rtt_ms),
        "queue": c.queue_text(),
        "bottleneck": bottleneck,
        "loss": c.loss_text(),
        "testbed": c.testbed_id,
        "runs": runs_text,
    }


def _scenario_figs(figs: list[dict[str, Any]], scen: str) -> dict[str, Any]:
    """One scenario's figures, grouped by the place the template shows them."""
    sf = [f for f in figs if f["scenario"] == scen]
    return {
        "pair_figs": [f for f in sf if f["kind"] in ("bars", "scatter")],
        "metric_figs": [f for f in sf if f["kind"] == "metrics"],
        "load_figs": [f for f in sf if f["kind"] in ("probe", "jain_time")],
        "queue_figs": [f for f in sf if f["kind"] == "queue_cdf"],
        "cpu_figs": [f for f in sf if f["kind"] == "cpu"],
        "load_figs_title": _load_figs_title(sf),
        "ts_figs": [f for f in sf if f["kind"] == "timeseries"],
        "zoom_figs": [f for f in sf if f["kind"] == "zoom"],
    }


def _scenario(
    t: data.Tables,
    matrix: Matrix,
    runs_dir: Path,
    colours: dict[str, str],
    figs: list[dict[str, Any]],
    scen: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(row of the conditions overview, section) of one scenario."""
    runs = data.group(t.runs, scen)
    cond = data.conditions(matrix, scen)
    counts = tables.scenario_counts(t.runs, scen)
    waits = _waits(runs)
    bottleneck = (
        data.bottleneck_text(runs_dir, list(map(str, runs["run_id"])), cond) if cond else ""
    )
    row = (
        _conditions_row(cond, _runs_text(*counts, waits), bottleneck)
        if cond
        else {"scenario": scen}
    )
    summ = data.group(t.summary, scen)
    skipped_all = bool(len(runs)) and bool(runs["skipped"].all())
    load = (
        tables.load_table(summ, runs, cond, colours, t.absent) if cond and not skipped_all else None
    )
    section = {
        **row,
        "skipped_all": skipped_all,
        "runs_sentence": _runs_sentence(*counts, waits),
        "not_checkable": data.not_checkable(runs_dir, list(map(str, runs["run_id"]))),
        "skip_reasons": data.skip_reasons(runs),
        "n_skipped": counts[2],
        "skipped": tables.skipped_rows(runs),
        "results": tables.results_table(summ, matrix, colours, runs),
        "deltas": tables.delta_table(summ, colours, matrix),
        "sentence": tables.largest_delta_sentence(summ, matrix.baseline) if len(summ) > 1 else "",
        "load": load,
        "cpu": cpu.cpu_table(summ, runs, colours),
        "probe_what": (
            data.probe_what(data.probe_tools(runs_dir, list(map(str, runs["run_id"]))), cond)
            if cond
            else ""
        ),
        "invalid": invalid_runs.rows(runs),
        "n_invalid": int(data.is_invalid(runs).sum()),
        "host_stalled": invalid_runs.host_stalled_sentence(runs),
        "codes_absent": "reason_codes" in t.absent,
        "unpaired": any(
            data.delta_unpaired(x)
            for c in summ.columns
            if c.endswith("_delta_paired")
            for x in summ[c]
        ),
        **_scenario_figs(figs, scen),
        "per_run": tables.per_run_table(data.group(t.all_runs, scen), t.flows, colours),
        "observer": tables.observer_table(t.observer, scen, colours),
        "per_run_load": (
            tables.per_run_load_table(runs, cond, colours, t.absent) if load and cond else None
        ),
        "per_run_causes": causes.causes_table(data.group(t.all_runs, scen), runs_dir, colours),
    }
    return row, section


def _loss_sections(
    t: data.Tables, matrix: Matrix, colours: dict[str, str], figs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One section per group of scenarios that differ only in their loss; its
    figures are numbered like the groups (figures.make_all writes loss-resilience-<i>.png)."""
    return [
        {
            "scenarios": ", ".join(c.scenario for c in group),
            "table": tables.loss_table(group, t.summary, t.runs, matrix, colours),
            "figs": [f for f in figs if f["kind"] == "loss" and f["file"].endswith(f"-{i}.png")],
        }
        for i, group in enumerate(data.loss_groups(matrix, t.runs), 1)
    ]


def _counts(t: data.Tables, matrix: Matrix, order: list[dict[str, str]]) -> dict[str, int]:
    """The title page's run counts."""
    return {
        "planned": len(matrix.order),
        "executed": int((~t.runs["skipped"]).sum()),
        "valid": int(t.runs["valid"].sum()),
        "invalid": int(data.is_invalid(t.runs).sum()),
        "skipped": int(t.runs["skipped"].sum()),
        "waiting": int((t.runs["status"] == "waiting").sum()),
        "missing": sum(r["status"] == "missing" for r in order),
    }


def _variants(t: data.Tables, matrix: Matrix, colours: dict[str, str]) -> list[dict[str, Any]]:
    """The title page's variant table."""
    return [
        {
            "label": v.label,
            "os": v.os,
            "stack": v.stack,
            "cc": v.cc,
            "kernel": v.kernel,
            "kernel_match": v.kernel_match,
            "colour": colours.get(v.label, "#999999"),
            "is_baseline": v.label == matrix.baseline,
            **tables.variant_kernels(t.runs, v),
        }
        for v in matrix.variants
    ]


def _host_settings(matrix: Matrix) -> dict[str, Any]:
    """ccbench's baseline on the endpoints of the variants' OSes, and what each variant
    asks beyond it (its runs' settings and path MTU): read back on every run."""
    from ccbench.hosts.settings import for_os
    from ccbench.testbed.kinds import kind

    tb = next(iter(matrix.testbeds.values()), None)
    local = kind(tb.testbed.kind).caps.senders_here if tb else True
    baseline = []
    for os_name in dict.fromkeys(v.os for v in matrix.variants):
        b = for_os(os_name).baseline(netns_local=local)
        off = ", ".join(k for k, on in b.offloads if not on)
        sysctl = ", ".join(f"{k} = {v}" for k, v in b.sysctl)
        baseline.append(f"{spec.OS_TITLES.get(os_name, os_name)}: {sysctl}; offloads {off} off")
    variants = []
    for v in matrix.variants:
        seen = {f"{r.spec.host.describe()}, MTU {r.spec.topology.mtu}"
                for r in matrix.runs.values() if r.spec.variant == v.label}  # fmt: skip
        variants.append({"label": v.label, "text": " | ".join(sorted(seen))})
    return {"baseline": baseline, "variants": variants}


def _appendix(
    t: data.Tables, matrix: Matrix, runs_dir: Path, order: list[dict[str, str]]
) -> dict[str, Any]:
    """Appendices B and C: testbed, hosts and tools; the run order."""
    return {
        "tools": provenance.tool_versions(t.runs, runs_dir),
        "report_tools": [
            ("ccbench", _version("ccbench")),
            ("matplotlib", _version("matplotlib")),
            ("weasyprint", _version("weasyprint")),
        ],
        "testbeds": provenance.testbeds(matrix, t.all_runs, runs_dir),
        "facts": provenance.facts(t.all_runs, runs_dir),
        "run_order": order,
        "order_same": [r["run_id"] for r in order if r["executed"] != "-"]
        == list(t.all_runs[~t.all_runs["skipped"]].sort_values("order")["run_id"]),
    }


def context(tables_dir: Path, figures_dir: Path, matrix: Matrix, runs_dir: Path) -> dict[str, Any]:
    t = data.load_tables(tables_dir)
    colours = style.variant_colours(matrix)
    figs = _figures(figures_dir)
    overview, scenarios = [], []
    for scen in data.scenario_names(matrix, t.runs):
        row, section = _scenario(t, matrix, runs_dir, colours, figs, scen)
        overview.append(row)
        scenarios.append(section)
    order = provenance.run_order(matrix, t.all_runs, runs_dir)
    started = t.runs["started_unix"].dropna()
    return {
        "title": matrix.title,
        "question": matrix.question,
        "baseline": matrix.baseline,
        # what a traced run records that an untraced one does not (`tracing: separate`)
        "per_packet": ", ".join(
            n for n, c in instruments.REGISTRY.items() if c.cost is instruments.Cost.PER_PACKET
        ),  # fmt: skip
        "repetitions": matrix.repetitions,
        "seed": matrix.seed,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs_from": provenance.utc(started.min()) if len(started) else "n/a",
        "runs_to": provenance.utc(started.max()) if len(started) else "n/a",
        "sha256": provenance.matrix_sha256(matrix),
        "counts": _counts(t, matrix, order),
        "verdicts": checks.verdict_rows(t.verdicts, matrix),
        "verdict_summary": checks.verdict_summary(t.verdicts),
        "verdict_failed_gates": len(verdicts_mod.failed_gates(t.verdicts)),
        "references": checks.reference_rows(t.summary, matrix),
        "loss": _loss_sections(t, matrix, colours, figs),
        "jain_converged": fmt(JAIN_CONVERGED, None),
        "jain_window": fmt(JAIN_WINDOW_S, None),
        "srtt_tools": data.SRTT_TOOLS,
        "variants": _variants(t, matrix, colours),
        "host_settings": _host_settings(matrix),
        "resolve_target": fmt(float(matrix.resolve_target_pct), None),
        "overview": overview,
        "scenarios": scenarios,
        **_appendix(t, matrix, runs_dir, order),
    }


def _env() -> jinja2.Environment:
    loader = jinja2.FileSystemLoader(str(resources.files("ccbench") / "templates"))
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["anchor"] = _anchor
    return env


def render_html(tables_dir: Path, figures_dir: Path, matrix: Matrix, runs_dir: Path) -> str:
    env = _env()
    css = (resources.files("ccbench") / "templates" / "report.css").read_text()
    ctx = context(tables_dir, figures_dir, matrix, runs_dir)
    return env.get_template("report.html.j2").render(css=css, **ctx)


def printable(html: str, figures_dir: Path) -> str:
    """The report's HTML with each figure's data URI replaced by its file name (in
    figures_dir, WeasyPrint's base URL): the same PNG bytes, without WeasyPrint parsing
    and decoding the base64 text (~1.3 MB per MB of figures). The PDFs differ only in the
    names WeasyPrint gives the images inside (a hash of their URL)."""
    for f in _figures(figures_dir):
        html = html.replace(f'src="{f["src"]}"', f'src="{f["file"]}"')
    return html


def write_pdf(html: str, figures_dir: Path, pdf_path: Path) -> None:
    """Print the report's HTML (as render_html returns it) to pdf_path."""
    import weasyprint  # slow to import: only here

    page = printable(html, figures_dir)
    weasyprint.HTML(string=page, base_url=str(figures_dir)).write_pdf(pdf_path)


def build(
    tables_dir: Path,
    figures_dir: Path,
    matrix: Matrix,
    runs_dir: Path,
    pdf_path: Path,
    html_path: Path,
) -> None:
    """Render the report once; write it as HTML and print the same HTML to PDF."""
    html = render_html(tables_dir, figures_dir, matrix, runs_dir)
    for p in (pdf_path, html_path):
        p.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(html, encoding="utf-8")
    write_pdf(html, figures_dir, pdf_path)
