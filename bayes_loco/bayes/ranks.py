"""Posterior fits at several ranks compared by PSIS-LOO: :func:`compare_ranks`.

It fits :func:`~bayes_loco.bayes.fit_posterior` at each rank and compares the fits
with ``az.compare`` on their pointwise log-likelihood (:mod:`.loocv`), so it sits
above the fit in the import graph, while :mod:`.loocv` sits below the
:class:`~bayes_loco.bayes.Posterior` it serves.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import arviz as az
import pandas as pd

from .._checks import checks_data
from ..data import PreferenceData
from .fit import fit_posterior
from .loocv import loo


@dataclass(frozen=True)
class RankComparison:
    """:func:`compare_ranks`'s result: ``az.compare``'s table of the ranks and the fits behind it.

    Attributes
    ----------
    table : pandas.DataFrame
        ``az.compare`` (raw numbers): one row per rank labelled ``"r=<rank>"``, best
        first, with ``elpd``, ``se``, ``elpd_diff`` and its s.e. ``dse``, ``p``,
        ``weight`` and ArviZ's diagnostics.
    best : int
        The rank of highest elpd (the table's first row).
    selected : int
        The smallest rank within one s.e. of the best, elpd_diff ≥ −dse (the
        one-standard-error rule: a higher rank must earn its parameters).
    loo : dict of int to LOOResult
    posteriors : dict of int to Posterior
    note : str
        The ranks' differences in words, and the k̂ counts.
    """

    table: pd.DataFrame
    best: int
    selected: int
    loo: dict
    posteriors: dict
    note: str

    def __str__(self) -> str:
        return f"{self.table.to_string()}\n{self.note}"


def rank_label(rank: int) -> str:
    """The label of a rank in :func:`compare_ranks`'s table (``"r=2"``)."""
    return f"r={rank}"


@checks_data
def compare_ranks(data: PreferenceData, ranks, **fit_kwargs) -> RankComparison:
    """Fit the posterior at each rank and compare them by PSIS-LOO (``az.compare``).

    Parameters
    ----------
    data : PreferenceData
    ranks : sequence of int
        At least two distinct ranks.
    **fit_kwargs
        Passed to every :func:`~bayes_loco.bayes.fit_posterior` call (``ties``,
        ``method``, ``nuts``, ``prior``, ``random_seed``, …); not ``rank`` or ``start``
        (each rank starts from its own frequentist fit).

    Returns
    -------
    RankComparison
        ``az.compare``'s table (best rank first) and each rank's posterior and LOO.

    Examples
    --------
    MAP fits with Laplace draws keep it quick (seconds per rank); NUTS is what to report:

    >>> comparison = bl.bayes.compare_ranks(data, [1, 2], method="map", random_seed=0)
    >>> sorted(comparison.posteriors)
    [1, 2]
    """
    try:
        ranks = [int(r) for r in ranks]
    except (TypeError, ValueError):
        raise TypeError(f"ranks must be a sequence of integers, got {ranks!r}") from None
    if len(set(ranks)) < 2 or len(set(ranks)) != len(ranks):
        raise ValueError(f"ranks must hold at least two distinct ranks, each once, got {ranks}")
    for key in ("rank", "start"):
        if key in fit_kwargs:
            raise ValueError(f"compare_ranks fits every rank from its own start; do not pass {key}=")
    posteriors = {r: fit_posterior(data, r, **fit_kwargs) for r in ranks}
    results = {r: loo(post) for r, post in posteriors.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the k̂ warnings were given once by loo above
        table = az.compare({rank_label(r): res.elpd for r, res in results.items()}, round_to="none")
    by_label = {rank_label(r): r for r in ranks}
    best = by_label[table.index[0]]
    close = [by_label[label] for label, row in table.iterrows() if row["elpd_diff"] >= -row["dse"]]
    selected = min(close)
    lines = [f"{rank_label(best)} has the highest elpd ({table.iloc[0]['elpd']:.1f}, s.e. "
             f"{table.iloc[0]['se']:.1f})"
             + "".join(f"; {label} is {-row['elpd_diff']:.1f} lower (s.e. {row['dse']:.1f})"
                       for label, row in table.iloc[1:].iterrows())
             + f". The smallest rank within one s.e. of it: {selected}."]
    lines += [f"{rank_label(r)}: {res.note}" for r, res in results.items() if res.high_k]
    return RankComparison(table, best, selected, results, posteriors, " ".join(lines))
