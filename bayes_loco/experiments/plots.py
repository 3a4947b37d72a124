"""Figures of study results: mean ± standard error against N, one panel per setting."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_results(results: pd.DataFrame, *, x: str = "n", panel: str | None = "imbalance",
                 y: str = "suboptimality", scope: str = "personalised", title: str = "",
                 out: str | Path | None = None) -> plt.Figure:
    """Mean ± s.e. of ``y`` against ``x`` per method, one panel per value of ``panel``.

    Saves ``<out>.png`` and ``<out>.pdf`` when ``out`` is given.
    """
    data = results[results["scope"] == scope] if "scope" in results else results
    if data.empty:
        raise ValueError(f"no results for scope={scope!r}")
    panels = [None] if panel is None or panel not in data else sorted(data[panel].dropna().unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), sharey=True, squeeze=False)
    # One value of x (a single setting, as in the demo): compare the methods side by side instead.
    categorical = data[x].nunique() == 1
    for ax, value in zip(axes[0], panels, strict=True):
        part = data if value is None else data[data[panel] == value]
        for i, (method, rows) in enumerate(part.groupby("method", sort=False)):
            stats = rows.groupby(x)[y].agg(["mean", "std", "count"])
            se = stats["std"].fillna(0) / np.sqrt(stats["count"])
            where = [i] if categorical else stats.index
            ax.errorbar(where, stats["mean"], yerr=se, marker="o", ms=5, capsize=3, label=method)
        if categorical:
            names = list(part.groupby("method", sort=False).groups)
            ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize=8)
            ax.set_xlabel(f"method ({x} = {data[x].iloc[0]:g})")
        else:
            ax.set_xlabel(x)
            if x == "n":  # the paper's N grid spans a decade
                ax.set_xscale("log")
        ax.set_title("" if value is None else f"{panel} = {value:g}" if isinstance(value, float | int)
                     else f"{panel} = {value}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{y} ({scope})")
    axes[0][-1].legend(fontsize=8)
    if title:
        fig.suptitle(textwrap.fill(title, width=45 * len(panels)), fontsize=9)
    fig.tight_layout()
    if out is not None:
        out = Path(out)
        for ext in ("png", "pdf"):
            fig.savefig(out.with_suffix(f".{ext}"), dpi=130)
    return fig
