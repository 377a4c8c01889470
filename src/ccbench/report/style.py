"""Variant colours and matplotlib settings shared by every figure.

Colours come from the variant order in the matrix, so a variant has the same colour
in every figure and in the table swatches. The baseline is black (the reference);
the others use the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

from typing import Any

from ccbench.model import Matrix

BASELINE_COLOUR = "#000000"
PALETTE = [
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#8C564B",
    "#7F7F7F",
    "#1B9E77",
    "#E7298A",
]
FLOW_LINESTYLES = ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (5, 1.5, 1, 1.5))]
REF_COLOUR = "#777777"
DPI = 150

RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7,
    "figure.titlesize": 9,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "savefig.dpi": DPI,
    "svg.fonttype": "none",
}


def variant_colours(matrix: Matrix) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    for label in matrix.variant_labels:
        if label == matrix.baseline:
            out[label] = BASELINE_COLOUR
        else:
            out[label] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def flow_colour(colour: str, k: int) -> str:
    """Flow k (1-based) of a variant: the variant colour, lighter for later flows, so
    flows stay apart where line styles overlap."""
    if k <= 1:
        return colour
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    f = min(0.55, 0.3 * (k - 1))  # mix towards white
    mix = [round(c + (255 - c) * f) for c in (r, g, b)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def flow_linestyle(k: int) -> Any:
    return FLOW_LINESTYLES[(k - 1) % len(FLOW_LINESTYLES)]
