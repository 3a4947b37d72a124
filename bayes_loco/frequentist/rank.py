"""Rank selection by the generalised information criterion (GIC) or by cross-validation.

GIC(r) = L̄(Θ̂_r) + a_n·k(r), with L̄ the mean negative log-likelihood of the
rank-r FGD fit, k(r) = (d_x + d_φ) r − r² its number of free parameters and, as
in the paper, a_n = 0.1·log n / n.

CV(r) = the mean over folds of the held-out log-loss of the rank-r FGD fit on the
other folds (:mod:`bayes_loco.crossval`), by comparison or by group (user).
The FGD fit is the one whose rank the paper's pipeline chooses (GIC scores it too),
and without a split its predictions are PRS's: PRS's reduced MLE starts at, and stays
at, FGD's Θ̂ (:func:`~bayes_loco.fit_prs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._checks import checks_data
from .._validation import (
    as_float_array,
    check_instance,
    check_option,
    check_rank,
    check_real,
    check_shape,
)
from ..crossval import fold_indices
from ..data import PreferenceData
from ..evaluate import log_loss
from .fgd import LowRankResult, fit_low_rank
from .mle import fit_mle

CRITERIA = ("gic", "cv")


@dataclass(frozen=True, eq=False)
class RankSelection:
    """GIC (and, with ``criterion="cv"``, held-out log-loss) over candidate ranks.

    ``rank`` minimises the ``criterion``'s column: ``gic``, or the mean over folds of
    ``cv_log_loss``. ``fits`` are the rank-r FGD fits on all the data either way.

    Attributes
    ----------
    ranks, gic, mean_nll, n_params : ndarray, shape (R,)
        Candidates, GIC(r), L̄(Θ̂_r) and k(r).
    penalty : float
        a_n.
    fits : tuple of LowRankResult
    criterion : {"gic", "cv"}
        Which column chose ``rank``.
    cv_log_loss : ndarray, shape (R, folds), or None
        Held-out log-loss of each rank's fit in each fold (``criterion="cv"``).
    fold_of : ndarray of int, shape (N,), or None
        The test fold of each comparison (``criterion="cv"``).
    """

    ranks: np.ndarray
    gic: np.ndarray
    mean_nll: np.ndarray
    n_params: np.ndarray
    penalty: float
    fits: tuple[LowRankResult, ...]
    criterion: str = "gic"
    cv_log_loss: np.ndarray | None = None
    fold_of: np.ndarray | None = None

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
        check_option(self.criterion, "criterion", CRITERIA)
        if self.cv_log_loss is not None:
            cv = as_float_array(self.cv_log_loss, "cv_log_loss", 2)
            if cv.shape[0] != ranks.size or cv.shape[1] < 2:
                raise ValueError(f"cv_log_loss must have shape ({ranks.size}, folds >= 2), got {cv.shape}")
        elif self.criterion == "cv":
            raise ValueError("criterion='cv' needs cv_log_loss (held-out log-loss per rank and fold)")

    @property
    def cv_mean(self) -> np.ndarray | None:
        """Mean held-out log-loss of each rank over the folds (None without CV)."""
        return None if self.cv_log_loss is None else self.cv_log_loss.mean(axis=1)

    @property
    def cv_std_err(self) -> np.ndarray | None:
        """Its standard error over the folds, sd (ddof = 1) / √folds (None without CV)."""
        if self.cv_log_loss is None:
            return None
        return self.cv_log_loss.std(axis=1, ddof=1) / np.sqrt(self.cv_log_loss.shape[1])

    def _best_index(self) -> int:
        return int(np.argmin(self.gic if self.criterion == "gic" else self.cv_mean))

    @property
    def rank(self) -> int:
        return int(self.ranks[self._best_index()])

    @property
    def best(self) -> LowRankResult:
        return self.fits[self._best_index()]

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate rank r, with its criteria and whether it was selected.

        Returns
        -------
        pandas.DataFrame
            ``rank``, ``mean_nll`` (L̄(Θ̂_r)), ``k`` (k(r) = (d_x + d_φ) r − r²), ``gic``
            (L̄ + a_n·k), with CV also ``cv_log_loss`` and ``cv_std_err`` (mean and
            standard error over the folds), and ``selected``.

        Examples
        --------
        >>> list(bl.select_rank(data, [1, 2, 3]).to_frame().columns)
        ['rank', 'mean_nll', 'k', 'gic', 'selected']
        """
        frame = pd.DataFrame({"rank": self.ranks, "mean_nll": self.mean_nll, "k": self.n_params,
                              "gic": self.gic})
        if self.cv_log_loss is not None:
            frame["cv_log_loss"], frame["cv_std_err"] = self.cv_mean, self.cv_std_err
        frame["selected"] = self.ranks == self.rank
        return frame

    def cv_table(self) -> pd.DataFrame:
        """Held-out log-loss per rank (rows) and fold (columns); empty without CV.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``rank``, one column per ``fold``; no column when selected by GIC.

        Examples
        --------
        >>> bl.select_rank(data, [1, 2], criterion="cv", folds=3).cv_table().shape
        (2, 3)
        >>> bl.select_rank(data, [1, 2]).cv_table().shape
        (2, 0)
        """
        if self.cv_log_loss is None:
            return pd.DataFrame(index=pd.Index(self.ranks, name="rank"))
        return pd.DataFrame(self.cv_log_loss, index=pd.Index(self.ranks, name="rank"),
                            columns=pd.Index(range(self.cv_log_loss.shape[1]), name="fold"))

    def __repr__(self) -> str:
        how = "GIC" if self.criterion == "gic" else f"{self.cv_log_loss.shape[1]}-fold CV"
        return (f"RankSelection(rank={self.rank} by {how}, candidates={self.ranks.tolist()}, "
                f"a_n={self.penalty:.3g})")


@checks_data
def select_rank(data: PreferenceData, ranks: Sequence[int] | None = None, *, criterion: str = "gic",
                penalty: float | None = None, ridge: float = 0.0, folds: int = 5, groups=None, seed=0,
                progress: bool = False, **fit_options) -> RankSelection:
    """Choose r by GIC(r) = L̄(Θ̂_r) + a_n·k(r), or by held-out log-loss.

    Parameters
    ----------
    data : PreferenceData
    ranks : sequence of int, optional
        Candidates; default 1 … min(10, the rank the data determine,
        :meth:`~bayes_loco.PreferenceData.identified_rank`).
    criterion : {"gic", "cv"}
        ``"gic"`` (the paper's) or ``"cv"``: the lowest mean held-out log-loss
        (:func:`~bayes_loco.evaluate.log_loss`, weighted by the data's weights) of the
        rank-r FGD fit over ``folds`` folds (by comparison, or by ``groups``).
    penalty : float, optional
        a_n; default 0.1·log n / n (the paper's choice).
    ridge : float
        Passed to the MLE and FGD fits (one MLE start serves every rank, in each fold).
    folds, groups, seed
        The CV split (:func:`~bayes_loco.crossval.fold_indices`); ignored for GIC.
    progress : bool
        Print one line per CV fold.
    **fit_options
        Passed to every fit: ``ties=`` (a tie model) to the MLE start and FGD, the other
        options of :func:`~bayes_loco.fit_low_rank` (``method``, ``max_iter``, ``tol``) to FGD.

    Returns
    -------
    RankSelection
        Every candidate's fit and criteria; ``.rank`` and ``.best`` are the selected ones.

    Examples
    --------
    >>> selection = bl.select_rank(data, [1, 2, 3])
    >>> selection.ranks.tolist(), selection.rank in (1, 2, 3)
    ([1, 2, 3], True)
    >>> selection.best.rank == selection.rank
    True
    """
    if ranks is None:
        ranks = range(1, max(data.identified_rank(10), 1) + 1)
    if isinstance(ranks, str) or not isinstance(ranks, Iterable):
        raise TypeError(f"ranks must be a sequence of candidate ranks, e.g. [{ranks!r}] or range(1, 6), got "
                        f"{type(ranks).__name__} {ranks!r}")
    ranks = np.array(sorted({check_rank(r, data.d_x, data.d_phi) for r in ranks}))
    if ranks.size == 0:
        raise ValueError("ranks is empty")
    check_option(criterion, "criterion", CRITERIA)
    n = data.n_comparisons  # the N of the likelihood: counted rows stand for their comparisons
    a_n = 0.1 * np.log(n) / n if penalty is None else check_real(penalty, "penalty", 0.0)
    fits = _fits(data, ranks, ridge, fit_options)
    mean_nll = np.array([f.nll / n for f in fits])
    k = np.array([f.n_params for f in fits])
    cv = fold_of = None
    if criterion == "cv":
        fold_of = fold_indices(data.n, folds, groups, seed)
        cv = np.empty((ranks.size, folds))
        for f in range(folds):
            test = fold_of == f
            held_out = data.subset(test)
            for i, fit in enumerate(_fits(data.subset(~test), ranks, ridge, fit_options)):
                cv[i, f] = log_loss(held_out, fit.predict_proba(held_out))
            if progress:
                scores = ", ".join(f"r={r}: {v:.4f}" for r, v in zip(ranks, cv[:, f], strict=True))
                print(f"fold {f} ({f + 1} of {folds}): held-out log-loss {scores}", flush=True)
    return RankSelection(ranks, mean_nll + a_n * k, mean_nll, k, float(a_n), fits, criterion, cv, fold_of)


# fit_mle takes these of select_rank's fit options (beside ridge); FGD takes them all.
MLE_OPTIONS = ("ties",)


def _fits(data: PreferenceData, ranks: np.ndarray, ridge: float, options: dict) -> tuple[LowRankResult, ...]:
    """The rank-r FGD fits of ``data`` for every candidate, all started from one MLE."""
    initial = fit_mle(data, ridge=ridge, **{k: v for k, v in options.items() if k in MLE_OPTIONS})
    return tuple(fit_low_rank(data, int(r), ridge=ridge, initial=initial, **options) for r in ranks)
