"""How strong may global pessimism be? Sub-optimality and the value guarantee against the radius.

On the `shift` study's data (same cells, same task seeds), the exact global policy of PRS's
Wald set is solved at a grid of radii R, from R = 0 (greedy on PRS's θ̂) through the
single-policy radii z₀.₉ = 1.28 and z₀.₉₅ = 1.64 to the value-sized radius R_α of
``bl.sets.size_for_values`` (every policy's value bounded at once with probability 0.9). For
each it records the global sub-optimality and whether the chosen policy's true value (relative
to the reference action) cleared the pessimistic value it reported; MLE-Greedy is the yardstick
of the figure's reference lines (0.5× and 1.25× its sub-optimality).

    bayes-loco frontier --reps 20 --out docs/data/shift-frontier

Writes ``shift-frontier.csv`` (one row per regime × q × seed × radius; a rerun skips the tasks
already there) and ``shift-frontier.png``; prints the ratios to MLE-Greedy. About 10 s per task
on one core.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from ..evaluate import relative_value, suboptimality
from ..policy import greedy_policy, pessimistic_policy
from ..sets import size_for_values
from .methods import Fits
from .runner import task_inputs
from .studies import STUDIES

__all__ = ["ratios", "run"]

#: The study's grid, as :data:`~bayes_loco.experiments.STUDIES` holds the others': the radii R of the exact
#: policy (z₀.₉ = 1.2816 and z₀.₉₅ = 1.6449 among them) and the shift study's q it runs on by default.
GRID = {"radii": (0.25, 0.5, 0.75, 1.0, 1.2816, 1.6449, 2.0, 3.0), "imbalances": (1, 3, 10)}


def _task(cell: int, settings: dict, rep: int, seed: int) -> list[dict]:
    """The rows of one shift-study task: greedy baselines, then the exact policy at every radius."""
    inputs = task_inputs("shift", cell, settings, rep, seed)
    s, truth, population = inputs.settings, inputs.truth, inputs.populations["global"]
    fits = Fits(inputs.data, rank=int(s["rank"]), ridge=float(s["ridge"]))
    wald = fits["prs"].calibrated_set(float(s["level"]), "wald")
    base = {"regime": s["regime"], "imbalance": s["imbalance"], "rep": rep}
    greedy = {name: greedy_policy(fits[fit].theta, population, scope="global")
              for name, fit in (("MLE-Greedy", "mle"), ("PRS-Greedy", "prs"))}
    rows = [base | {"method": name, "radius": 0.0, "value_covered": np.nan,
                    "suboptimality": suboptimality(policy, truth, population)}
            for name, policy in greedy.items()]
    sized = size_for_values(wald, population, scope="global")
    for radius, method in [(r, "exact") for r in GRID["radii"]] + [(sized.radius, "exact-values")]:
        policy = pessimistic_policy(wald.with_radius(radius), population, objective="exact",
                                    scope="global")
        covered = relative_value(policy, truth, population) >= policy.pessimistic_value - 1e-12
        rows.append(base | {"method": method, "radius": radius, "value_covered": float(covered),
                            "suboptimality": suboptimality(policy, truth, population)})
    return rows


def ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Mean global sub-optimality per regime, q and method (radius), divided by MLE-Greedy's.

    Parameters
    ----------
    table : pandas.DataFrame
        The rows of :func:`run`.

    Returns
    -------
    pandas.DataFrame
        Indexed by (regime, imbalance); a column per method, the exact policy's named by its
        radius (two decimals); MLE-Greedy's column is 1.

    Examples
    --------
    >>> import pandas as pd
    >>> from bayes_loco.experiments import frontier
    >>> rows = pd.DataFrame({"regime": "covered", "imbalance": 10, "rep": 0,
    ...                      "method": ["MLE-Greedy", "PRS-Greedy", "exact"], "radius": [0.0, 0.0, 2.0],
    ...                      "suboptimality": [0.2, 0.4, 0.05]})
    >>> frontier.ratios(rows).round(2).to_dict("records")
    [{'2.0': 0.25, 'MLE-Greedy': 1.0, 'PRS-Greedy': 2.0}]
    """
    table = table.assign(column=np.where(table["method"] == "exact", table["radius"].round(2).astype(str),
                                         table["method"]))
    means = table.pivot_table(index=["regime", "imbalance"], columns="column", values="suboptimality")
    return means.div(means["MLE-Greedy"], axis=0)


def _figure(table: pd.DataFrame, path: Path) -> None:
    """Top: sub-optimality / MLE-Greedy's against R; bottom: how often the chosen policy's bound held."""
    regimes = list(dict.fromkeys(table["regime"]))
    fig, axes = plt.subplots(2, len(regimes), figsize=(4.2 * len(regimes), 6.4), sharex=True, squeeze=False)
    greedy = table[table["method"] == "MLE-Greedy"].groupby(["regime", "imbalance"])["suboptimality"].mean()
    policies = table[table["method"].isin(["PRS-Greedy", "exact", "exact-values"])]
    for j, regime in enumerate(regimes):
        top, bottom = axes[0, j], axes[1, j]
        for q, sub in policies[policies["regime"] == regime].groupby("imbalance"):
            # R = 0 is the greedy policy of PRS's θ̂, the centre every radius shares.
            exact = sub[sub["method"].isin(["exact", "PRS-Greedy"])].groupby("radius").mean(numeric_only=True)
            ratio = exact["suboptimality"] / greedy[regime, q]
            line, = top.plot(ratio.index, ratio.values, "o-", ms=3, label=f"q = {q:g}")
            values = sub[sub["method"] == "exact-values"]
            top.plot(values["radius"].mean(), values["suboptimality"].mean() / greedy[regime, q], "*",
                     ms=12, color=line.get_color())
            bottom.plot(exact.index, exact["value_covered"], "o-", ms=3, color=line.get_color())
            bottom.plot(values["radius"].mean(), values["value_covered"].mean(), "*", ms=12,
                        color=line.get_color())
        top.axhline(1.25, color="k", ls="--", lw=0.8)
        top.axhline(0.5, color="k", ls=":", lw=0.8)
        top.set_yscale("log")
        top.set_yticks([0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10])
        top.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        top.yaxis.set_minor_formatter(NullFormatter())
        top.set_title(regime)
        bottom.axhline(0.9, color="k", ls="--", lw=0.8)
        bottom.set_ylim(-0.05, 1.05)
        bottom.set_xlabel("radius R (0: PRS's greedy; ★: value-sized R₀.₉)")
    axes[0, 0].set_ylabel("global sub-optimality / MLE-Greedy's")
    axes[1, 0].set_ylabel("chosen policy's bound held")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Exact global policy of PRS's Wald set against its radius (dashed: 1.25× and 0.9; "
                 "dotted: 0.5×)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(reps: int, seed: int, out: Path, imbalances=GRID["imbalances"], regimes=None,
        progress=print) -> pd.DataFrame:
    """Run (or finish) the frontier: the shift study's cells with q in ``imbalances``, ``reps`` seeds each.

    Parameters
    ----------
    reps : int
        Seeds per cell (the shift study's task seeds for the same ``seed``).
    seed : int
        The base seed.
    out : Path
        Folder for ``shift-frontier.csv`` (appended task by task; tasks already there are skipped)
        and ``shift-frontier.png``.
    imbalances : sequence of float
        The q of the shift study's cells to run (default 1, 3 and 10).
    regimes : sequence of str, optional
        The regimes of the cells to run (default all three: paper, covered, uncovered).
    progress : callable
        Called with a line after each seed.

    Returns
    -------
    pandas.DataFrame
        Every row of the CSV: regime, imbalance, rep, method (``MLE-Greedy``, ``PRS-Greedy``,
        ``exact`` at each radius, ``exact-values``), radius, value_covered, suboptimality.

    Examples
    --------
    >>> from bayes_loco.experiments import frontier
    >>> table = frontier.run(1, 0, Path("frontier"), imbalances=(10,))   # doctest: +SKIP
    seed 1 of 1 done
    """
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "shift-frontier.csv"
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=["regime", "imbalance", "rep"])
    finished = set(zip(done["regime"], done["imbalance"].astype(float), done["rep"].astype(int), strict=True))
    cells = [(i, cell) for i, cell in enumerate(STUDIES["shift"].cells) if cell["imbalance"] in imbalances
             and (regimes is None or cell["regime"] in regimes)]
    for rep in range(reps):
        for index, cell in cells:
            if (cell["regime"], float(cell["imbalance"]), rep) in finished:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows = pd.DataFrame(_task(index, STUDIES["shift"].fixed | cell, rep, seed))
            rows.to_csv(csv, mode="a", header=not csv.exists(), index=False)
        progress(f"seed {rep + 1} of {reps} done")
    table = pd.read_csv(csv)
    _figure(table, out / "shift-frontier.png")
    return table
