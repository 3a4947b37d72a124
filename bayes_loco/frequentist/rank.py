"""Rank selection by the generalised information criterion (GIC).

GIC(r) = L̄(Θ̂_r) + a_n·k(r), with L̄ the mean negative log-likelihood of the
rank-r FGD fit, k(r) = (d_x + d_φ) r − r² its number of free parameters and, as
in the paper, a_n = 0.1·log n / n.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import as_float_array, check_instance, check_rank, check_real, check_shape
from ..data import PreferenceData, checks_data
from .fgd import LowRankResult, fit_low_rank
from .mle import fit_mle


@dataclass(frozen=True, eq=False)
class RankSelection:
    """GIC over candidate ranks; ``rank`` is the minimiser."""

    ranks: np.ndarray
    gic: np.ndarray
    mean_nll: np.ndarray
    n_params: np.ndarray
    penalty: float
    fits: tuple[LowRankResult, ...]

    def __post_init__(self):
        ranks = np.asarray(self.ranks)
        if ranks.ndim != 1 or ranks.size == 0 or ranks.dtype.kind not in "iu":
            raise ValueError(f"ranks must be a non-empty 1-d integer array, got {ranks.dtype} {ranks.shape}")
        for name in ("gic", "mean_nll", "n_params"):
            values = as_float_array(getattr(self, name), name, 1)
            check_shape(values, name, ranks.shape, " (one per rank)")
        check_real(self.penalty, "penalty", 0.0)
        check_instance(self.fits, "fits", tuple | list, "tuple of LowRankResult")
        if len(self.fits) != ranks.size:
            raise ValueError(f"fits must hold one fit per rank ({ranks.size}), got {len(self.fits)}")
        for i, (fit, r) in enumerate(zip(self.fits, ranks, strict=True)):
            check_instance(fit, f"fits[{i}]", LowRankResult)
            if fit.rank != r:
                raise ValueError(f"fits[{i}] has rank {fit.rank}, but ranks[{i}] = {r}")

    @property
    def rank(self) -> int:
        return int(self.ranks[np.argmin(self.gic)])

    @property
    def best(self) -> LowRankResult:
        return self.fits[int(np.argmin(self.gic))]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"rank": self.ranks, "mean_nll": self.mean_nll, "k": self.n_params,
                             "gic": self.gic, "selected": self.ranks == self.rank})

    def __repr__(self) -> str:
        return f"RankSelection(rank={self.rank}, candidates={self.ranks.tolist()}, a_n={self.penalty:.3g})"


@checks_data
def select_rank(data: PreferenceData, ranks: Sequence[int] | None = None, *, penalty: float | None = None,
                ridge: float = 0.0) -> RankSelection:
    """Choose r by GIC(r) = L̄(Θ̂_r) + a_n·k(r).

    Parameters
    ----------
    data : PreferenceData
    ranks : sequence of int, optional
        Candidates; default 1 … min(d_x, d_φ, 10).
    penalty : float, optional
        a_n; default 0.1·log n / n (the paper's choice).
    ridge : float
        Passed to the MLE and FGD fits (one MLE start serves every rank).
    """
    if ranks is None:
        ranks = range(1, min(data.d_x, data.d_phi, 10) + 1)
    if isinstance(ranks, str) or not isinstance(ranks, Iterable):
        raise TypeError(f"ranks must be a sequence of candidate ranks, e.g. [{ranks!r}] or range(1, 6), got "
                        f"{type(ranks).__name__} {ranks!r}")
    ranks = np.array(sorted({check_rank(r, data.d_x, data.d_phi) for r in ranks}))
    if ranks.size == 0:
        raise ValueError("ranks is empty")
    n = data.n
    a_n = 0.1 * np.log(n) / n if penalty is None else check_real(penalty, "penalty", 0.0)
    initial = fit_mle(data, ridge=ridge)
    fits = tuple(fit_low_rank(data, int(r), ridge=ridge, initial=initial) for r in ranks)
    mean_nll = np.array([f.nll / n for f in fits])
    k = np.array([f.n_params for f in fits])
    return RankSelection(ranks, mean_nll + a_n * k, mean_nll, k, float(a_n), fits)
