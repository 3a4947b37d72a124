"""Figures of study results: mean ± standard error against N, one panel per setting.

Importing this module leaves matplotlib's backend alone (without a display
matplotlib picks Agg itself); the figures are returned open, for the caller to
show or close.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def _finish(fig: plt.Figure, title: str, n_panels: int, out: str | Path | None) -> plt.Figure:
    """Title, layout, and ``<out>.png`` / ``<out>.pdf`` when ``out`` is given."""
    if title:
        fig.suptitle(textwrap.fill(title, width=45 * n_panels), fontsize=9)
    fig.tight_layout()
    if out is not None:
        out = Path(out)
        for ext in ("png", "pdf"):
            fig.savefig(out.with_suffix(f".{ext}"), dpi=130)
    return fig


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
            grid = part[x].dropna().to_numpy(dtype=float)
            if grid.min() > 0 and grid.max() >= 10 * grid.min():  # N, C₂: grids spanning a decade or more
                ax.set_xscale("log")
        ax.set_title("" if value is None else f"{panel} = {value:g}" if isinstance(value, float | int)
                     else f"{panel} = {value}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{y} ({scope})")
    axes[0][-1].legend(fontsize=8)
    return _finish(fig, title, len(panels), out)


LEVELS = np.linspace(0.05, 0.99, 48)


def calibration(results: pd.DataFrame, levels=LEVELS, *,
                by: tuple[str, ...] = ("method",)) -> pd.DataFrame:
    """Frequentist coverage of θ* against nominal level, for every ellipsoid method in ``results``.

    θ* lies in the level-α set (Wald or credible ellipsoid, radius² = χ²_{k_eff}(α))
    iff its W-distance² ≤ χ²_{k_eff}(α), so one run at any level gives the whole
    curve from the ``truth_distance`` and ``k_eff`` columns. Rows with no distance
    (greedy, hull, quantile sets; the paper's Gram set, whose radius is not a level)
    are left out. Returns ``by`` columns, ``level``, ``coverage`` and ``seeds``.
    """
    from scipy import stats

    need = {"truth_distance", "k_eff", "level", *by}
    missing = need - set(results.columns)
    if missing:
        raise ValueError(f"results lack the columns {sorted(missing)}")
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 1 or levels.size == 0 or not ((levels > 0) & (levels < 1)).all():
        raise ValueError("levels must be a non-empty 1-d sequence in (0, 1)")
    rows = results[results["truth_distance"].notna() & results["k_eff"].notna() & results["level"].notna()]
    # One row per fitted set: the personalised and global rows of a task share it.
    keys = [c for c in ("study", "cell", "rep", *by) if c in rows]
    rows = rows.drop_duplicates(keys)
    out = []
    for group, part in rows.groupby(list(by), sort=False):
        d2 = part["truth_distance"].to_numpy() ** 2
        k = part["k_eff"].to_numpy()
        inside = d2[None, :] <= stats.chi2.ppf(levels[:, None], k[None, :])
        labels = dict(zip(by, group if isinstance(group, tuple) else (group,), strict=True))
        out.append(pd.DataFrame({**labels, "level": levels, "coverage": inside.mean(axis=1),
                                 "seeds": len(part)}))
    if not out:
        raise ValueError("results hold no ellipsoid with a level (Wald or credible) and a truth distance")
    return pd.concat(out, ignore_index=True)


def plot_calibration(results: pd.DataFrame, *, panel: str | None = None, title: str = "",
                     out: str | Path | None = None) -> plt.Figure:
    """Coverage of θ* against nominal level per ellipsoid method, one panel per value of ``panel``.

    The grey band is the 95% binomial band around the diagonal for the number of
    seeds: a curve inside it is calibrated as far as the seeds can tell.
    Saves ``<out>.png`` and ``<out>.pdf`` when ``out`` is given.
    """
    by = ("method",) if panel is None or panel not in results else ("method", panel)
    table = calibration(results, by=by)
    panels = [None] if len(by) == 1 else sorted(table[panel].unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    for ax, value in zip(axes[0], panels, strict=True):
        part = table if value is None else table[table[panel] == value]
        seeds = int(part["seeds"].min())
        level = np.sort(part["level"].unique())
        half = 1.96 * np.sqrt(level * (1 - level) / seeds)
        ax.fill_between(level, level - half, level + half, color="0.85", label=f"±1.96 s.e. ({seeds} seeds)")
        ax.plot([0, 1], [0, 1], color="0.5", lw=0.8)
        for method, rows in part.groupby("method", sort=False):
            ax.plot(rows["level"], rows["coverage"], lw=1.8, label=method)
        ax.set_xlabel("nominal level")
        ax.set_title("" if value is None else f"{panel} = {value}")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("coverage of θ*_rtv")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    return _finish(fig, title, len(panels), out)
