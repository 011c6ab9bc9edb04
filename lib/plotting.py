"""The book's figure style and helpers for scaling plots (ours solid, the paper's dashed black)."""

from __future__ import annotations

import numpy as np

# Okabe & Ito (2008) colour-blind-safe palette, black left out: black is kept for the paper.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
PAPER_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.3}


def use_style() -> None:
    """Apply the house style once per chapter: 6x4 in figures, palette, frameless legends."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(
        {
            "figure.figsize": (6.0, 4.0),
            "figure.dpi": 110,
            "axes.prop_cycle": cycler(color=PALETTE),
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.25,
            "legend.frameon": False,
            "font.size": 10,
            "lines.markersize": 5,
        }
    )


def _check_same_length(**arrays) -> dict[str, np.ndarray]:
    out = {k: np.asarray(v, dtype=float) for k, v in arrays.items() if v is not None}
    lengths = {k: v.shape for k, v in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"arrays must have the same shape, got {lengths}")
    return out


def plot_ours(ax, x, y, lo=None, hi=None, *, label: str, color=None, marker: str = "o"):
    """Plot our measurement: solid line with markers, and a shaded band from lo to hi if given."""
    arr = _check_same_length(x=x, y=y, lo=lo, hi=hi)
    if (lo is None) != (hi is None):
        raise ValueError("pass both lo and hi for an uncertainty band, or neither")
    (line,) = ax.plot(arr["x"], arr["y"], marker=marker, label=label, color=color)
    if lo is not None:
        ax.fill_between(arr["x"], arr["lo"], arr["hi"], color=line.get_color(), alpha=0.2, lw=0)
    return line


def plot_paper(ax, x, y, *, label: str):
    """Plot the paper's curve or value as a dashed black line labelled with its source."""
    arr = _check_same_length(x=x, y=y)
    (line,) = ax.plot(arr["x"], arr["y"], label=label, **PAPER_STYLE)
    return line


def loglog(ax, xlabel: str, ylabel: str) -> None:
    """Log-log axes with sentence-case labels (symbol and unit), as power laws are shown."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
