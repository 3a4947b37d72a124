"""Figures and tables of a study's results, and the coverage of its sets (:func:`calibration`).

- :func:`summarise`: mean ± s.e. of sub-optimality and the coverages per group, the table
  ``bayes-loco run`` prints;
- :func:`plot_results`: mean ± s.e. of a column against a setting per method, from a study's
  CSV (:func:`~bayes_loco.experiments.run_study`) or
  :func:`~bayes_loco.experiments.compare_policies`' table;
- :func:`calibration`: the frequentist coverage of θ* by each ellipsoid method against the
  nominal level (:data:`LEVELS`), from the W-distances the runner records;
  :func:`plot_calibration` draws it;
- :func:`plot_width`: the ``width`` study's figure (pessimism against the reward model's width,
  and the value family's radius frontier); :data:`STUDY_FIGURES` names a study's own figure.

Neither figure draws a method whose plotted values are all missing, and methods whose values agree
row for row (two policies of one set, say) are drawn once, under all their names joined by " = ".

The geometry of sets, spectra and policies is :mod:`bayes_loco.plots`. As there, nothing here
selects a backend or changes rcParams; the figures are returned open, and ``out=`` saves
``<out>.png`` and ``<out>.pdf``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

__all__ = ["LEVELS", "STUDY_FIGURES", "calibration", "plot_calibration", "plot_results", "plot_width",
           "summarise"]


def _finish(fig: Figure, title: str, n_panels: int, out: str | Path | None) -> Figure:
    """Title, layout, and ``<out>.png`` / ``<out>.pdf`` when ``out`` is given."""
    if title:
        # Sized relative to the font, like the panels' titles (a fixed 9 pt was unreadable once a wide
        # figure was scaled to a page): about 9 characters of it per inch of figure at 10-12 pt.
        fig.suptitle(textwrap.fill(title, width=max(36 * n_panels, int(9 * fig.get_figwidth()))),
                     fontsize="medium")
    fig.tight_layout()
    if out is not None:
        out = Path(out)
        for ext in ("png", "pdf"):
            fig.savefig(out.with_suffix(f".{ext}"), dpi=130)
    return fig


def _format_value(value) -> str:
    return f"{value:g}" if isinstance(value, float | int | np.floating | np.integer) else f"{value}"


def _groups(frame: pd.DataFrame, value: str | list[str], keys: list[str]) -> list[tuple[str, str]]:
    """(method whose rows to draw, its label) per curve, in the order the methods first appear.

    A method whose ``value`` is missing in every row is left out. Methods whose ``value`` agrees
    on every key (NaN where the other has NaN) are one curve, labelled with all their names: drawn
    separately, the later would hide the earlier exactly.
    """
    columns = [value] if isinstance(value, str) else list(value)
    drawn: list[tuple[str, list[str], pd.DataFrame]] = []
    for method, rows in frame.groupby("method", sort=False):
        if rows[columns].isna().all(axis=None):
            continue
        values = rows[[*keys, *columns]].sort_values([*keys, *columns], ignore_index=True)
        same = next((names for _, names, first in drawn if values.equals(first)), None)
        if same is None:
            drawn.append((method, [method], values))
        else:
            same.append(method)
    return [(method, " = ".join(names)) for method, names, _ in drawn]


def _from_zero(axes) -> None:
    """Start the value axes at 0 when nothing drawn lies below it: sub-optimality and seconds have a
    natural zero, an axis cut above it overstates the ratios between the methods, and one reaching
    below it shows values that cannot occur."""
    if min(ax.dataLim.y0 for ax in axes) >= 0:
        for ax in axes:
            ax.set_ylim(0, ax.get_ylim()[1])


def plot_results(results: pd.DataFrame, *, x: str = "n", panel: str | None = "imbalance",
                 y: str = "suboptimality", scope: str = "personalised", title: str = "",
                 sharey: bool = True, out: str | Path | None = None) -> Figure:
    """Mean ± s.e. of ``y`` against ``x`` per method, one panel per value of ``panel``.

    Works on a study's results (``run_study``, its CSVs) and on the table of
    :func:`bayes_loco.experiments.compare_policies`: when ``x`` is not a column, or takes
    one value, the methods are compared side by side on a categorical axis; a ``panel``
    that is not a column gives one panel.

    A method whose ``y`` is missing in every row is not drawn. Methods whose ``y`` agrees task
    for task (the personalised rows of two policies of one set, say) are drawn once, labelled
    ``"A = B"``. The value axis reaches down to 0 when every value is positive, and the legend
    sits to the right of the last panel, off the data.

    Parameters
    ----------
    results : pandas.DataFrame
        One row per method × scope × task, with ``method`` and ``y`` (and ``scope``).
    x : str
        The horizontal axis (log scale when its grid spans a decade or more).
    panel : str or None
        One panel per value of this column.
    y : str
        The plotted column.
    scope : str
        Keep the rows of this ``scope`` (when the column exists).
    title : str
        The figure's title.
    sharey : bool
        One value axis for all panels; ``False`` scales each panel to its own values, for
        panels whose values differ by much.
    out : path, optional
        Save ``<out>.png`` and ``<out>.pdf``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``y`` is not a column, no row has ``scope``, or ``y`` is missing in every row of it.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3}, {"n": 600, "imbalance": 3}),
    ...                 methods=("MLE-Greedy", "PRS-exact-Wald"), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> results = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> fig = ex.plot_results(results, x="n", panel=None, title="sub-optimality against N", out="tiny")
    >>> sorted(p.name for p in __import__("pathlib").Path(".").glob("tiny.*"))
    ['tiny.pdf', 'tiny.png']
    """
    if y not in results:
        raise ValueError(f"y={y!r} is not a column of results (columns: "
                         f"{', '.join(map(str, results.columns))})")
    data = results[results["scope"] == scope] if "scope" in results else results
    if data.empty:
        raise ValueError(f"no results for scope={scope!r}")
    panels = [None] if panel is None or panel not in data else sorted(data[panel].dropna().unique())
    # No x (compare_policies' table) or one value of it (a single setting, as in the demo): compare
    # the methods side by side instead.
    has_x = x in data
    categorical = not has_x or data[x].nunique() <= 1
    # Over the whole figure, so that one legend serves every panel.
    keys = list(dict.fromkeys(c for c in ("study", "cell", "rep", x, panel) if c is not None and c in data))
    curves = _groups(data, y, keys)
    if not curves:
        raise ValueError(f"y={y!r} is missing in every row of scope={scope!r}")
    width = max(4.2, 0.42 * len(curves) + 1.6) if categorical else 4.2
    # Room on the right for the legend, which sits off the data.
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels) + 2.0 * (not categorical),
                                                      3.6 + 0.9 * categorical), sharey=sharey, squeeze=False)
    for ax, value in zip(axes[0], panels, strict=True):
        part = data if value is None else data[data[panel] == value]
        for i, (method, label) in enumerate(curves):
            rows = part[part["method"] == method]
            if categorical:
                values = rows[y].astype(float)
                count = values.count()
                mean, se = values.mean(), values.std() / np.sqrt(count) if count > 1 else 0.0
                ax.errorbar([i], [mean], yerr=[0.0 if np.isnan(se) else se], marker="o", ms=5, capsize=3,
                            color=f"C{i}", label=label)
                continue
            moments = rows.groupby(x)[y].agg(["mean", "std", "count"])
            se = moments["std"].fillna(0) / np.sqrt(moments["count"])
            # A colour per method across panels, also where a panel lacks some method.
            ax.errorbar(moments.index, moments["mean"], yerr=se, marker="o", ms=5, capsize=3, color=f"C{i}",
                        label=label)
        if categorical:
            # Methods drawn as one point on a line each, so that the slanted labels stay short.
            ax.set_xticks(range(len(curves)), [label.replace(" = ", "\n= ") for _, label in curves],
                          rotation=35, ha="right", fontsize="small")
            ax.set_xlabel(f"method ({x} = {_format_value(data[x].iloc[0])})" if has_x else "method")
        else:
            ax.set_xlabel(x)
            grid = part[x].dropna().to_numpy(dtype=float)
            if grid.min() > 0 and grid.max() >= 10 * grid.min():  # N, C₂: grids spanning a decade or more
                ax.set_xscale("log")
                # The grid's own values as the ticks: a log axis's minor labels crowd (3×10³ over 4×10³).
                ticks = np.unique(grid)
                ax.set_xticks(ticks, [_format_value(t) for t in ticks])
                ax.set_xticks([], minor=True)
        ax.set_title("" if value is None else f"{panel} = {_format_value(value)}")
        ax.grid(alpha=0.3)
    _from_zero(axes[0])  # once every panel is drawn: a shared axis fixed earlier would clip the later panels
    axes[0][0].set_ylabel(f"{y} ({scope})")
    if not categorical:  # the tick labels name the methods already
        axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return _finish(fig, title, len(panels), out)


LEVELS = np.linspace(0.05, 0.99, 48)


def calibration(results: pd.DataFrame, levels=LEVELS, *,
                by: tuple[str, ...] = ("method",)) -> pd.DataFrame:
    """Frequentist coverage of θ* against nominal level, for every ellipsoid method in ``results``.

    θ* lies in the level-α set (Wald or credible ellipsoid, radius² = χ²_k_eff(α))
    iff its W-distance² ≤ χ²_k_eff(α), so one run at any level gives the whole
    curve from the ``truth_distance`` and ``k_eff`` columns. Rows with no distance
    (greedy, hull, quantile sets; the paper's Gram set, whose radius is not a level)
    are left out, and so are rows whose ``covered`` is missing where that column
    exists: the runner leaves it empty for a set that does not claim to cover θ* (one
    sized for the policy's values, whose radius is not χ²_k_eff(α), or a CVaR set).

    Parameters
    ----------
    results : pandas.DataFrame
        A study's results or :func:`~bayes_loco.experiments.compare_policies`' table, with
        ``truth_distance``, ``k_eff``, ``level`` and the ``by`` columns.
    levels : sequence of float
        Nominal levels in (0, 1).
    by : tuple of str
        One curve per group of these columns.

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, ``level``, ``coverage`` and ``seeds``.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3}, {"n": 600, "imbalance": 3}),
    ...                 methods=("MLE-Greedy", "PRS-exact-Wald"), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> results = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> ex.calibration(results, levels=[0.5, 0.9])[["method", "level", "seeds"]]
               method  level  seeds
    0  PRS-exact-Wald    0.5      4
    1  PRS-exact-Wald    0.9      4
    """
    need = {"truth_distance", "k_eff", "level", *by}
    missing = need - set(results.columns)
    if missing:
        raise ValueError(f"results lack the columns {sorted(missing)}")
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 1 or levels.size == 0 or not ((levels > 0) & (levels < 1)).all():
        raise ValueError("levels must be a non-empty 1-d sequence in (0, 1)")
    rows = results[results["truth_distance"].notna() & results["k_eff"].notna() & results["level"].notna()]
    if "covered" in rows:
        rows = rows[rows["covered"].notna()]
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
                     out: str | Path | None = None) -> Figure:
    """Coverage of θ* against nominal level per ellipsoid method, one panel per value of ``panel``.

    The grey band is the 95% binomial band around the diagonal for the number of
    seeds: a curve inside it is calibrated as far as the seeds can tell. The curves
    come from :func:`calibration`, so a method whose set does not claim θ* is not drawn.
    Methods with the same curve in every panel (the exact and the relaxed policy of one
    Wald set, say) are drawn once, labelled ``"A = B"``. The legend sits to the right of
    the last panel, off the curves.

    Parameters
    ----------
    results : pandas.DataFrame
        As for :func:`calibration`.
    panel : str or None
        One panel per value of this column (e.g. ``"n"``).
    title : str
    out : path, optional
        Save ``<out>.png`` and ``<out>.pdf``.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3}, {"n": 600, "imbalance": 3}),
    ...                 methods=("MLE-Greedy", "PRS-exact-Wald"), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> results = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> fig = ex.plot_calibration(results, title="coverage of θ*_rtv against the nominal level")
    >>> len(fig.axes)
    1
    """
    by = ("method",) if panel is None or panel not in results else ("method", panel)
    table = calibration(results, by=by)
    panels = [None] if len(by) == 1 else sorted(table[panel].unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.2, 4.0), squeeze=False)
    curves = _groups(table, ["coverage", "seeds"], ["level", *by[1:]])
    for ax, value in zip(axes[0], panels, strict=True):
        part = table if value is None else table[table[panel] == value]
        seeds = int(part["seeds"].min())
        level = np.sort(part["level"].unique())
        half = 1.96 * np.sqrt(level * (1 - level) / seeds)
        ax.fill_between(level, level - half, level + half, color="0.85", label=f"±1.96 s.e. ({seeds} seeds)")
        ax.plot([0, 1], [0, 1], color="0.5", lw=0.8)
        for i, (method, label) in enumerate(curves):
            rows = part[part["method"] == method]
            ax.plot(rows["level"], rows["coverage"], lw=1.8, color=f"C{i}", label=label)
        ax.set_xlabel("nominal level")
        ax.set_title("" if value is None else f"{panel} = {value}")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("coverage of θ*_rtv")
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return _finish(fig, title, len(panels), out)


# The width study's methods as drawn: (method, label, colour).
WIDTH_CURVES = (("PRS-Greedy", "greedy, PRS's estimate", "C0"), ("PRS-exact-Wald", "exact, Wald 90%", "C1"),
                ("PRS-relaxed-family", "relaxed, value family 90%", "C2"),
                ("PRS-best-of-exact-and-family", "best of both at 95% each", "C3"),
                ("PRS-split-certified", "certified on a split, 90%", "C4"),
                ("PRS-split-certified-row-space", "certified in a row space, 90%", "C5"),
                ("PRS-best-of-exact-and-row-space", "best of exact and row space, 95% each", "C6"))
FRONTIER_PREFIX = "PRS-relaxed-family-frontier @ "


def _d_phi(results: pd.DataFrame, d_a: int, d_s: int) -> pd.Series:
    """d_φ = d_a − 1 + d_s + noise_dims of the paper's problem (``d_a``, ``d_s`` where not recorded)."""
    recorded = {"d_a": d_a, "d_s": d_s, "noise_dims": 0}

    def column(name):
        return results[name] if name in results else recorded[name]

    return column("d_a") - 1 + column("d_s") + column("noise_dims")


def _frontier(axes, data: pd.DataFrame, greedy: pd.Series, widths: list) -> None:
    """The relaxed policy at fixed critical values: improvement / greedy's and bound held, per d_φ."""
    frontier = data[data["method"].str.startswith(FRONTIER_PREFIX)]
    family = data[data["method"] == "PRS-relaxed-family"].groupby("d_phi")
    for i, width in enumerate(widths):
        rows = frontier[frontier["d_phi"] == width].groupby("radius")
        if not len(rows):
            continue
        label = f"d_φ = {width:g} ({rows.size().max()} seeds)"
        ratio = rows["improvement"].mean() / greedy.get(width, np.nan)
        axes[0].plot(ratio.index, ratio.to_numpy(), marker=".", color=f"C{i + 3}", label=label)
        axes[1].plot(ratio.index, rows["value_covered"].mean().to_numpy(), marker=".", color=f"C{i + 3}",
                     label=label)
        if width in family.groups:
            own = family.get_group(width)
            c = own["radius"].mean()
            axes[0].plot([c], [own["improvement"].mean() / greedy.get(width, np.nan)], marker="*", ms=12,
                         color=f"C{i + 3}", ls="none")
            axes[1].plot([c], [own["value_covered"].mean()], marker="*", ms=12, color=f"C{i + 3}",
                         ls="none")


def plot_width(results: pd.DataFrame, *, d_a: int = 10, d_s: int = 20, title: str = "",
               out: str | Path | None = None) -> Figure:
    """The ``width`` study: pessimism against d_φ (top) and the value family's radius frontier (bottom).

    Top left: sub-optimality (mean ± s.e. over seeds) of the greedy policy of PRS's estimate, the
    exact policy of the 90% Wald set, the relaxed policy of the 90% value family, the better bound of
    both and the policy certified on a split (:func:`~bayes_loco.split_policy`). Top right: each
    pessimistic policy's true improvement over the reference action divided by the greedy policy's
    (means over seeds; the dashed line at 0.5). Bottom: the relaxed policy at fixed critical values
    c, one curve per d_φ: the same ratio (left) and the share of seeds in which the chosen policy's
    true value was at least its reported bound (right; the dashed line at 0.9), with the family's
    own c (its mean over seeds) marked on each curve.
    """
    data = results[results["scope"] == "personalised"].assign(d_phi=_d_phi(results, d_a, d_s))
    missing = {"improvement", "value_covered"} - set(data)
    if missing:
        raise ValueError(f"results lack the columns {sorted(missing)}: run the width study")
    widths = sorted(data["d_phi"].unique())
    greedy = data[data["method"] == "PRS-Greedy"].groupby("d_phi")["improvement"].mean()
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 7.2))
    for method, label, colour in WIDTH_CURVES:
        rows = data[data["method"] == method]
        if rows.empty:
            continue
        moments = rows.groupby("d_phi")["suboptimality"].agg(["mean", "std", "count"])
        axes[0, 0].errorbar(moments.index, moments["mean"], yerr=moments["std"] / np.sqrt(moments["count"]),
                            marker="o", capsize=3, color=colour, label=label)
        if method != "PRS-Greedy":
            ratio = rows.groupby("d_phi")["improvement"].mean() / greedy
            axes[0, 1].plot(ratio.index, ratio.to_numpy(), marker="o", color=colour, label=label)
    axes[0, 0].set_ylabel("sub-optimality (personalised)")
    axes[0, 1].axhline(0.5, color="0.5", ls="--", lw=0.8)
    axes[0, 1].set_ylabel("improvement over a_ref / greedy's")
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_xticks(widths, [f"{w:g}" for w in widths])
        ax.set_xlabel("d_φ")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylim(bottom=0)
    axes[0, 0].legend(fontsize="small")
    _frontier(axes[1], data, greedy, widths)
    axes[1, 0].axhline(0.5, color="0.5", ls="--", lw=0.8)
    axes[1, 0].set_ylabel("improvement over a_ref / greedy's")
    axes[1, 1].axhline(0.9, color="0.5", ls="--", lw=0.8)
    axes[1, 1].set_ylabel("bound held (share of seeds)")
    axes[1, 1].set_ylim(-0.02, 1.02)
    for ax in axes[1]:
        ax.set_xlabel("critical value c (standard errors); ★ the family's own c")
        ax.grid(alpha=0.3)
    axes[1, 1].legend(fontsize="small", loc="lower right")
    return _finish(fig, title, 2, out)


#: A study's own figure (:attr:`~bayes_loco.experiments.Study.figure`), drawn beside the standard ones.
STUDY_FIGURES = {"width": plot_width}


def summarise(results: pd.DataFrame, by: Iterable[str]) -> pd.DataFrame:
    """Mean, standard error and replication count of sub-optimality, and coverage, per group.

    ``coverage`` is of θ* by the set, ``value_coverage`` of the policy's true value by its pessimistic
    value (results written before that column existed have no ``value_coverage``).

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`run_study` (or :func:`read_results`).
    by : iterable of str
        The columns to group by, e.g. ``["scope", "n", "method"]``.

    Returns
    -------
    pandas.DataFrame
        ``mean`` and ``se`` of sub-optimality, ``reps``, ``coverage``, ``value_coverage``,
        ``theta_error`` (and ``rank_correct`` where a rank was selected), per group.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3}, {"n": 600, "imbalance": 3}),
    ...                 methods=("MLE-Greedy", "PRS-exact-Wald"), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> results = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> table = ex.summarise(results, ["method"])
    >>> list(table["method"]), list(table["reps"])
    (['MLE-Greedy', 'PRS-exact-Wald'], [4, 4])
    """
    grouped = results.groupby(list(by), dropna=False)
    table = grouped["suboptimality"].agg(mean="mean", se=lambda v: v.std(ddof=1) / np.sqrt(len(v)),
                                         reps="count")
    table["coverage"] = grouped["covered"].mean()
    if "value_covered" in results:
        table["value_coverage"] = grouped["value_covered"].mean()
    table["theta_error"] = grouped["theta_error"].mean()
    if "selected_rank" in results and "rank" in results:
        hit = (results["selected_rank"] == results["rank"]).where(results["selected_rank"].notna())
        table["rank_correct"] = hit.groupby([results[b] for b in by], dropna=False).mean()
    return table.reset_index()
