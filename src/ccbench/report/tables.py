"""Formatted rows of the report's tables (strings ready for the template).

Every number passes through fmt.fmt with the digits of its Metric, so the PDF, the
HTML and a test that recomputes a value all agree on the exact string.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ccbench import metric_catalog
from ccbench.metric_catalog import Metric
from ccbench.model import RESOLVE_TARGET_PCT, Matrix, Variant
from ccbench.report import data
from ccbench.report.fmt import DIGITS, NA, fmt, fmt_ci, significant

# The metrics and their headers, units and decimals: ccbench.metric_catalog.
METRICS = list(metric_catalog.RESULTS)
LOAD_METRICS = list(metric_catalog.LOAD)
LOAD_METRICS_PER_RUN = list(metric_catalog.PER_RUN_LOAD)
CONVERGENCE = metric_catalog.BY_KEY["convergence_s"]
MATHIS_RATIO = metric_catalog.BY_KEY["mathis_ratio"]
DELTA_METRICS = list(metric_catalog.DELTA)
BY_KEY = metric_catalog.BY_KEY
UNPAIRED = "†"  # marks a delta computed unpaired (see the table notes)


digits_for = metric_catalog.digits


def _delta_text(r: pd.Series, key: str) -> tuple[str, bool]:
    """ "+d ± ci %" of a summary row, with the unpaired mark; and whether CI excludes 0."""
    d, c = r.get(f"{key}_delta_pct"), r.get(f"{key}_delta_ci95_pct")
    text = fmt_ci(d, c, DIGITS["pct"], sign=True)
    if text != NA and data.delta_unpaired(r.get(f"{key}_delta_paired")):
        text += f" {UNPAIRED}"
    return text, significant(d, c)


def _n_text(r: pd.Series, runs: pd.DataFrame | None) -> str:
    """valid/runs that ran, and the skipped ones apart (they never ran)."""
    n_valid, n_invalid = int(r["n_valid"]), int(r["n_invalid"])
    if runs is None:
        return f"{n_valid}/{n_valid + n_invalid}"
    g = runs[(runs["scenario"] == r["scenario"]) & (runs["variant"] == r["variant"])]
    n_skip = int(g["skipped"].sum())
    n_wait = int((g["status"] == "waiting").sum()) if "status" in g else 0
    # Older tables counted runs not run among n_invalid; newer ones apart (n_not_run).
    ran_invalid = n_invalid if "n_not_run" in r.index else n_invalid - n_skip
    text = f"{n_valid}/{n_valid + ran_invalid}"
    apart = [f"{n} {what}" for n, what in ((n_skip - n_wait, "not run"), (n_wait, "waiting")) if n]
    return text + f" ({', '.join(apart)})" if apart else text


def _flow_count(df: pd.DataFrame) -> int:
    ks = [
        int(c[4:].split("_", 1)[0])
        for c in df.columns
        if c.startswith("flow") and c.endswith("_throughput_mbps_mean")
    ]
    return max(ks, default=0)


def variant_detail(v: Variant | None) -> str:
    """ "freebsd · rack stack · cc cubic · after patch"; "" for a variant the matrix
    does not list."""
    if v is None:
        return ""
    parts = [v.os, f"{v.stack} stack" if v.stack else "", f"cc {v.cc}", v.kernel]
    return " · ".join(p for p in parts if p)


def results_table(
    summary: pd.DataFrame,
    matrix: Matrix,
    colours: dict[str, str],
    runs: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Seed-style table of one scenario: rows = variants, each mean as "mean ± ci95".
    With `runs`, the n column counts skipped runs apart from the ones that ran."""
    n_flows = _flow_count(summary)
    heads = [(f"flow {k}", "Mbit/s") for k in range(1, n_flows + 1)]
    heads += [("sum", "Mbit/s"), ("Δ sum", "%")]
    heads += [(m.header, m.unit) for m in METRICS[1:]] + [("n", "valid/runs")]
    rows = []
    for _, r in summary.iterrows():
        cells = [
            fmt_ci(
                r.get(f"flow{k}_throughput_mbps_mean"),
                r.get(f"flow{k}_throughput_mbps_ci95"),
                DIGITS["mbps"],
            )
            for k in range(1, n_flows + 1)
        ]
        m0 = METRICS[0]
        cells.append(fmt_ci(r[f"{m0.key}_mean"], r[f"{m0.key}_ci95"], m0.digits))
        delta, sig = _delta_text(r, m0.key)
        cells.append("baseline" if r["baseline"] else delta)
        cells += [fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits) for m in METRICS[1:]]
        cells.append(_n_text(r, runs))
        label = str(r["variant"])
        sig_at = n_flows + 1  # the delta column
        rows.append(
            {
                "label": label,
                "baseline": bool(r["baseline"]),
                "colour": colours.get(label, "#999999"),
                "detail": variant_detail(matrix.variant(label)),
                "cells": [{"text": c, "sig": sig and i == sig_at} for i, c in enumerate(cells)],
            }
        )
    return {"heads": heads, "rows": rows}


def kernel_text(label: str, short: str) -> str:
    """ "after patch (14.2-RELEASE #1 D49540)": a variant's kernel label with what its
    valid runs' senders ran; either alone when the other is unknown."""
    if label and short:
        return f"{label} ({short})"
    return label or short


def kernels_compared(r: pd.Series, base: pd.Series | None, vmeta: dict[str, Variant]) -> str:
    """ "after patch (…) vs before patch (…)" for a delta row, when the variant or the
    baseline names a kernel or their senders ran different kernels; else "".
    `vmeta`: the matrix's variants by label."""
    if base is None:
        return ""
    sides = []
    for row in (r, base):
        v = vmeta.get(str(row["variant"]))
        label = v.kernel if v else ""
        short = str(row.get("kernel_short") or "")
        sides.append((label, short))
    (vl, vs), (bl, bs) = sides
    if not (vl or bl) and vs == bs:
        return ""
    return f"{kernel_text(vl, vs) or 'kernel unknown'} vs {kernel_text(bl, bs) or 'kernel unknown'}"


def delta_table(
    summary: pd.DataFrame, colours: dict[str, str], matrix: Matrix | None = None
) -> dict[str, Any]:
    """Per non-baseline variant: % delta of every metric vs the baseline ± 95 % CI;
    `sig` marks deltas whose CI excludes 0; `kernels` names the kernels compared.
    `resolution`: per metric the smallest change these repetitions resolve (the
    delta's 95 % CI half-width) and the paired repetitions that would resolve the
    config's resolve_target_pct."""
    vmeta = {v.label: v for v in matrix.variants} if matrix is not None else {}
    target = float(matrix.resolve_target_pct if matrix is not None else RESOLVE_TARGET_PCT)
    bases = summary[summary["baseline"].astype(bool)]
    base = bases.iloc[0] if len(bases) else None
    rows, res_rows = [], []
    for _, r in summary[~summary["baseline"].astype(bool)].iterrows():
        cells, res = [], []
        for m in DELTA_METRICS:
            text, sig = _delta_text(r, m.key)
            cells.append({"text": text, "sig": sig})
            res.append({"text": _resolution_text(r, m.key), "sig": False})
        label = str(r["variant"])
        kern = kernels_compared(r, base, vmeta)
        colour = colours.get(label, "#999999")
        rows.append({"label": label, "colour": colour, "cells": cells, "kernels": kern})
        res_rows.append({"label": label, "colour": colour, "cells": res, "kernels": ""})
    heads = [(m.header, "%") for m in DELTA_METRICS]
    return {"heads": heads, "rows": rows, "resolution": {"heads": heads, "rows": res_rows},
            "target": fmt(target, DIGITS["pct"])}  # fmt: skip


def variant_kernels(runs: pd.DataFrame, v: Variant) -> dict[str, Any]:
    """The variant table's kernel cells: every sender kernel identity its runs read
    (each once, with the runs that saw it), its regex, and the runs that wait for it."""
    g = runs[runs["variant"] == v.label]
    seen: dict[str, int] = {}
    for k in g.loc[~g["skipped"], "kernel"]:
        for part in str(k).split("; "):
            if part:
                seen[part] = seen.get(part, 0) + 1
    n_wait = int((g["status"] == "waiting").sum())
    n_done = int((~g["skipped"]).sum())
    # What the waiting runs wait for, as each recorded it: the kernel, boot tunables.
    why = g.loc[g["status"] == "waiting", "not_run_reason"] if "not_run_reason" in g else []
    waits = [w for w in dict.fromkeys(map(str, why)) if w and w != "nan"]
    # Finished runs judged on a regex other than the config's now (it changed between
    # reboots): say which, so no run is read as checked against a regex it never met.
    judged: dict[str, int] = {}
    if "kernel_match" in g:
        for m in g.loc[~g["skipped"], "kernel_match"].fillna(""):
            if m and m != (v.kernel_match or ""):
                judged[str(m)] = judged.get(str(m), 0) + 1
    return {
        "kernel_judged": [f"/{m}/ ({n} run{'s' if n > 1 else ''})" for m, n in judged.items()],
        "kernel_ids": [f"{k} ({n} run{'s' if n > 1 else ''})" for k, n in seen.items()],
        "kernel_wait": "; ".join(waits) or (f"waiting for kernel '{v.kernel}'" if n_wait else ""),
        "n_wait": n_wait,
        "kernel_done": n_done,
    }


def _resolution_text(r: pd.Series, key: str) -> str:
    """ "±3.1 · 9": the smallest change these repetitions resolve at 95 % and the
    paired repetitions that would resolve the target ("> 1000": hardly ever)."""
    mde = r.get(f"{key}_delta_ci95_pct")  # the smallest change the CI resolves
    if mde is None or pd.isna(mde):
        return NA
    n = r.get(f"{key}_delta_reps_to_resolve")
    paired = not data.delta_unpaired(r.get(f"{key}_delta_paired"))
    reps = str(int(n)) if n is not None and pd.notna(n) else "> 1000" if paired else "n/a"
    return f"±{fmt(mde, DIGITS['pct'])} · {reps}"


def largest_delta_sentence(summary: pd.DataFrame, baseline: str) -> str:
    """The largest |delta| vs the baseline whose 95 % CI excludes 0 -- computed, no verdict."""
    best: tuple[float, str, Metric, float, float] | None = None
    n_sig = n_all = 0
    for _, r in summary[~summary["baseline"].astype(bool)].iterrows():
        for m in DELTA_METRICS:
            d, c = r[f"{m.key}_delta_pct"], r[f"{m.key}_delta_ci95_pct"]
            if pd.notna(d):
                n_all += 1
            if significant(d, c):
                n_sig += 1
                if best is None or abs(d) > best[0]:
                    best = (abs(d), str(r["variant"]), m, float(d), float(c))
    if n_all == 0:
        return f"No delta vs the baseline {baseline} could be computed (too few valid runs)."
    if best is None:
        return (
            f"None of the {n_all} deltas vs the baseline {baseline} has a 95 % CI that excludes 0."
        )
    _, var, m, d, c = best
    return (
        f"Largest delta vs the baseline {baseline} whose 95 % CI excludes 0: {var}, {m.header} "
        f"{fmt(d, DIGITS['pct'], sign=True)} % ± {fmt(c, DIGITS['pct'])} % "
        f"({n_sig} of {n_all} deltas have a CI excluding 0)."
    )


def per_run_table(
    runs: pd.DataFrame, flows: pd.DataFrame, colours: dict[str, str]
) -> dict[str, Any]:
    """One row per run (valid or not) of a scenario, in executed order: the numbers every
    mean above is built from, each traceable to the run's raw directory."""
    n_flows = int(runs["n_flows"].max()) if not runs.empty else 0
    heads = [("#", ""), ("run id", ""), ("variant", ""), ("rep", ""), ("valid", "")]
    heads += [(f"flow {k}", "Mbit/s") for k in range(1, n_flows + 1)]
    heads += [(m.header, m.unit) for m in METRICS]
    heads += [("delay late", "%"), ("CPU steal", "%")]
    rows = []
    for _, r in runs.sort_values("order").iterrows():
        fl = flows[flows["run_id"] == r["run_id"]].set_index("flow")["throughput_mbps"]
        cells = [
            str(r["order"]),
            str(r["run_id"]),
            str(r["variant"]),
            str(r["repetition"]),
            _status(r),
        ]
        cells += [fmt(fl.get(k), DIGITS["mbps"]) for k in range(1, n_flows + 1)]
        cells += [fmt(r[m.key], m.digits) for m in METRICS]
        cells.append(fmt(r.get("delay_late_share", float("nan")) * 100, DIGITS["pct"]))
        cells.append(fmt(r.get("router_steal_pct", float("nan")), DIGITS["pct"]))
        rows.append(
            {
                "cells": cells,
                "valid": bool(r["valid"]),
                "colour": colours.get(str(r["variant"]), "#999999"),
            }
        )
    return {"heads": heads, "rows": rows}


def observer_table(
    observer: pd.DataFrame, scenario: str, colours: dict[str, str]
) -> dict[str, Any] | None:
    """`tracing: separate`: per variant, the traced runs against the untraced ones of the
    same repetitions (aggregate.observer_effect); None: the scenario has none."""
    if observer.empty or "scenario" not in observer:
        return None
    g = observer[observer["scenario"] == scenario]
    if g.empty:
        return None
    heads = [("variant", ""), ("pairs", "")]
    heads += [(f"{label}", "untraced → traced, Δ % ± CI") for label in OBSERVED_LABELS]
    rows = []
    for _, r in g.iterrows():
        cells = [str(r["variant"]), f"{int(r['n_traced'])}/{int(r['n_untraced'])}"]
        for col, digits in OBSERVED_DIGITS.items():
            before, after = r[f"{col}_untraced_mean"], r[f"{col}_traced_mean"]
            delta, ci = r[f"{col}_delta_pct"], r[f"{col}_delta_ci95_pct"]
            cells.append(f"{fmt(before, digits)} → {fmt(after, digits)}, "
                         f"{fmt(delta, 2)} ± {fmt(ci, 2)}")  # fmt: skip
        rows.append({"cells": cells, "colour": colours.get(str(r["variant"]), "#999999")})
    return {"heads": heads, "rows": rows}


OBSERVED_LABELS = ("throughput sum (Mbit/s)", "utilization (%)", "Jain")
OBSERVED_DIGITS = {"throughput_sum_mbps": 2, "utilization_pct": 1, "jain": 3}


def _status(r: pd.Series) -> str:
    if r.get("status") == "waiting":
        return "waiting"
    return "not run" if r["skipped"] else "yes" if r["valid"] else "NO"


def scenario_counts(runs: pd.DataFrame, scenario: str) -> tuple[int, int, int]:
    """(valid, ran, skipped) runs of a scenario."""
    g = data.group(runs, scenario)
    n_skip = int(g["skipped"].sum())
    return int(g["valid"].sum()), len(g) - n_skip, n_skip


def skipped_rows(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Per variant and reason: how many runs were skipped (never ran)."""
    sk = runs[runs["skipped"]]
    out = []
    for (var, _reasons), g in sk.groupby(["variant", "reasons"], sort=False):
        out.append(
            {
                "variant": str(var),
                "n": str(len(g)),
                "reason": data.skip_reasons(g)[0],
                "run_ids": ", ".join(map(str, g["run_id"])),
            }
        )
    return out


def _shown(runs: pd.DataFrame, cond: data.Conditions, absent: frozenset[str]) -> tuple[bool, ...]:
    """(probe, convergence, Mathis): what the second tables of a scenario show; nothing a
    results set predates (its NaNs would read as "never converged")."""
    return (
        bool(runs["probe_rtt_p50_ms"].notna().any()),
        cond.n_flows > 1 and "convergence_s" not in absent,
        cond.has_loss and "mathis_ratio" not in absent,
    )


def load_table(
    summary: pd.DataFrame,
    runs: pd.DataFrame,
    cond: data.Conditions,
    colours: dict[str, str],
    absent: frozenset[str] = frozenset(),
) -> dict[str, Any] | None:
    """Second table of a scenario: RTT under load (the probe) p50/p95 and the p95 delta; for
    several flows the convergence time; with loss the Mathis prediction and the ratio.
    None when the scenario has none of these (an old results set without a probe)."""
    has_probe, multi, loss = _shown(runs, cond, absent)
    if not (has_probe or multi or loss):
        return None
    heads: list[tuple[str, str]] = []
    if has_probe:
        heads += [(m.header, m.unit) for m in LOAD_METRICS]  # their Δ: in the delta table
    if multi:
        heads += [("convergence", "s"), ("converged", "runs")]
    mathis = runs["mathis_mbps_per_flow"].dropna()
    if loss:
        heads += [("loss", "configured"), ("Mathis", "Mbit/s per flow")]
        heads += [("Mathis × n", "Mbit/s")] if multi else []
        heads += [(MATHIS_RATIO.header, "")]
    rows = []
    for _, r in summary.iterrows():
        label = str(r["variant"])
        cells: list[dict[str, Any]] = []
        if has_probe:
            for m in LOAD_METRICS:
                cells.append({"text": fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits)})
        if multi:
            g = data.group(runs, cond.scenario, label)
            g = g[g["valid"]]
            m = CONVERGENCE
            cells.append({"text": fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits)})
            cells.append({"text": f"{int(g[m.key].notna().sum())}/{len(g)}"})
        if loss:
            per_flow = float(mathis.iloc[0]) if len(mathis) else float("nan")
            m = MATHIS_RATIO
            cells += [{"text": cond.loss_text()}, {"text": fmt(per_flow, DIGITS["mbps"])}]
            if multi:
                cells.append({"text": fmt(per_flow * cond.n_flows, DIGITS["mbps"])})
            cells.append({"text": fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits)})
        for c in cells:
            c.setdefault("sig", False)
        rows.append(
            {
                "label": label,
                "baseline": bool(r["baseline"]),
                "colour": colours.get(label, "#999999"),
                "cells": cells,
            }
        )
    parts = (["RTT under load"] if has_probe else []) + (["convergence"] if multi else [])
    parts += ["the Mathis model"] if loss else []
    what = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    title = f"{what[0].upper()}{what[1:]} (mean ± 95 % CI over valid runs)"
    return {
        "heads": heads,
        "rows": rows,
        "probe": has_probe,
        "multi": multi,
        "loss": loss,
        "title": title,
    }


def per_run_load_table(
    runs: pd.DataFrame,
    cond: data.Conditions,
    colours: dict[str, str],
    absent: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Per run: the ping percentiles of RTT under load, the convergence time (several
    flows) and the Mathis ratio (loss)."""
    has_probe, multi, loss = _shown(runs, cond, absent)
    heads = [("#", ""), ("run id", ""), ("variant", ""), ("rep", ""), ("valid", "")]
    if has_probe:
        heads += [("RTT under load p50", "ms"), ("p95", "ms"), ("p99", "ms")]
    if multi:
        heads.append(("convergence", "s"))
    if loss:
        heads.append((MATHIS_RATIO.header, ""))
    rows = []
    for _, r in runs.sort_values("order").iterrows():
        cells = [str(r["order"]), str(r["run_id"]), str(r["variant"]), str(r["repetition"])]
        cells.append(_status(r))
        if has_probe:
            cells += [fmt(r[k], DIGITS["ms"]) for k in LOAD_METRICS_PER_RUN]
        if multi:
            conv = r["convergence_s"]
            never = not r["skipped"] and pd.isna(conv) and pd.notna(r["jain"])
            cells.append("never" if never else fmt(conv, CONVERGENCE.digits))
        if loss:
            cells.append(fmt(r["mathis_ratio"], MATHIS_RATIO.digits))
        rows.append(
            {
                "cells": cells,
                "valid": bool(r["valid"]),
                "colour": colours.get(str(r["variant"]), "#999999"),
            }
        )
    return {"heads": heads, "rows": rows}


def loss_table(
    group: list[data.Conditions],
    summary: pd.DataFrame,
    runs: pd.DataFrame,
    matrix: Matrix,
    colours: dict[str, str],
) -> dict[str, Any]:
    """The loss-resilience section's table: per scenario of a loss group, the Mathis
    prediction and each variant's throughput sum and its ratio to the prediction."""
    scens = [c.scenario for c in group]
    present = set(runs.loc[runs["scenario"].isin(scens), "variant"])
    variants = [v for v in matrix.variant_labels if v in present]
    n = group[0].n_flows
    heads = [("loss", "configured"), ("Mathis" + (f" × {n}" if n > 1 else ""), "Mbit/s")]
    for v in variants:
        heads += [(f"{v}: sum", "Mbit/s"), (f"{v}: {MATHIS_RATIO.header}", "")]
    rows = []
    for c in group:
        per_flow = data.group(runs, c.scenario)["mathis_mbps_per_flow"].dropna()
        model = fmt(float(per_flow.iloc[0]) * n, DIGITS["mbps"]) if len(per_flow) else NA
        cells = [c.loss_text(), model if c.has_loss else "no limit (p = 0)"]
        for v in variants:
            s = data.group(summary, c.scenario, v)
            if s.empty:
                cells += [NA, NA]
                continue
            r = s.iloc[0]
            m = MATHIS_RATIO
            cells.append(fmt_ci(r["throughput_sum_mbps_mean"], r["throughput_sum_mbps_ci95"], 1))
            cells.append(fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits))
        rows.append({"scenario": c.scenario, "cells": cells})
    swatches = [{"label": v, "colour": colours.get(v, "#999999")} for v in variants]
    return {"heads": heads, "rows": rows, "variants": swatches}
