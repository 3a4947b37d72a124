"""Cross-validation: held-out log-loss, accuracy and Brier score of any fitting function, fold by fold.

Splits are by comparison, or by group (``groups``: a user id per comparison), so that
every group's comparisons lie in one test fold and a fold measures performance on
users the fit has never seen, the way LoRe reports unseen-user accuracy.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validation import check_instance, check_int, rng_from
from .data import PreferenceData
from .evaluate import METRICS, score


def fold_indices(n: int, folds: int = 5, groups=None, seed=0) -> np.ndarray:
    """The test fold (0 … folds − 1) of each of ``n`` comparisons.

    Without ``groups``: a seeded permutation of the rows dealt round-robin, so fold sizes
    differ by at most one. With ``groups`` (one label per comparison, any hashable values):
    the groups are shuffled (seeded), then taken largest first (ties in the shuffled
    order) and each put in the fold with the fewest comparisons so far, as scikit-learn's
    GroupKFold does; every group lies in exactly one test fold.

    Parameters
    ----------
    n : int
        Number of comparisons N.
    folds : int
        Number of folds, ≥ 2.
    groups : array_like, shape (n,), optional
        A group (user) label per comparison; None splits by comparison.
    seed : int or Generator
        Seed of the shuffle.

    Returns
    -------
    ndarray of int, shape (n,)
        The test fold of each comparison.

    Raises
    ------
    ValueError
        ``folds`` < 2, more folds than comparisons or than groups, ``groups`` of the
        wrong length or with missing values.

    Examples
    --------
    >>> np.bincount(bl.crossval.fold_indices(10, 3, seed=0))      # sizes differ by at most one
    array([4, 3, 3])
    >>> bl.crossval.fold_indices(6, 2, groups=["a", "a", "b", "b", "c", "c"], seed=0)
    array([1, 1, 0, 0, 0, 0])
    """
    n = check_int(n, "n", 1)
    folds = check_int(folds, "folds", 2)
    rng = rng_from(seed)
    if groups is None:
        if folds > n:
            raise ValueError(f"folds = {folds} is more than the {n} comparisons: each fold needs one")
        out = np.empty(n, dtype=np.intp)
        out[rng.permutation(n)] = np.arange(n) % folds
        return out
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.shape[0] != n:
        raise ValueError(f"groups must hold one label per comparison ({n}), got shape {groups.shape}")
    codes, _ = pd.factorize(groups, use_na_sentinel=True)
    if np.any(codes < 0):
        i = int(np.flatnonzero(codes < 0)[0])
        raise ValueError(f"groups[{i}] is missing ({groups[i]!r}): give every comparison a group")
    sizes = np.bincount(codes)
    if folds > sizes.size:
        raise ValueError(f"folds = {folds} is more than the {sizes.size} groups: each test fold needs a "
                         "whole group; use fewer folds")
    order = rng.permutation(sizes.size)
    order = order[np.argsort(-sizes[order], kind="stable")]
    load = np.zeros(folds, dtype=np.int64)
    fold_of_group = np.empty(sizes.size, dtype=np.intp)
    for g in order:
        f = int(np.argmin(load))
        fold_of_group[g] = f
        load[f] += sizes[g]
    return fold_of_group[codes]


@dataclass(frozen=True, eq=False)
class CrossValidation:
    """Held-out scores of a fitting function, fold by fold.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per fold: ``fold``, ``n_train``, ``n_test`` (comparisons: a counted row counts f_t),
        the :data:`~bayes_loco.evaluate.METRICS` (``log_loss``, ``accuracy``, ``brier``; weighted by the
        data's weights and counts) and ``seconds``.
    fold_of : ndarray of int, shape (N,)
        The test fold of each comparison.
    by : {"comparison", "group"}
        How the comparisons were split.
    seed : int or None
        The seed of the split (None when a Generator was given).
    warnings : tuple of str
        The warnings the fits and predictions issued, each prefixed with its fold
        (they were also re-issued).
    """

    table: pd.DataFrame
    fold_of: np.ndarray
    by: str
    seed: int | None
    warnings: tuple[str, ...] = ()

    @property
    def folds(self) -> int:
        return len(self.table)

    @property
    def mean(self) -> pd.Series:
        """Each metric's mean over the folds."""
        return self.table[list(METRICS)].mean()

    @property
    def std_err(self) -> pd.Series:
        """Each metric's standard error over the folds: sd (ddof = 1) / √folds."""
        return self.table[list(METRICS)].std(ddof=1) / np.sqrt(self.folds)

    def summary(self) -> pd.DataFrame:
        """A metric per row: ``mean`` and ``std_err``.

        Returns
        -------
        pandas.DataFrame
            Indexed by metric (``log_loss``, ``accuracy``, ``brier``): the mean over the folds
            and its standard error, sd (ddof = 1) / √folds.

        Examples
        --------
        >>> cv = bl.cross_validate(data, lambda d: bl.fit_prs(d, 2, ridge=1.0), folds=3)
        >>> table = cv.summary()
        >>> table.index.tolist(), list(table.columns)
        (['log_loss', 'accuracy', 'brier'], ['mean', 'std_err'])
        """
        return pd.DataFrame({"mean": self.mean, "std_err": self.std_err})

    def __repr__(self) -> str:
        scores = ", ".join(f"{m}={self.mean[m]:.4f} ± {self.std_err[m]:.4f}" for m in METRICS)
        note = f", {len(self.warnings)} warnings" if self.warnings else ""
        return f"CrossValidation({self.folds} folds by {self.by}: {scores}{note})"


def cross_validate(data: PreferenceData, fit_fn: Callable[[PreferenceData], object], folds: int = 5,
                   groups=None, seed=0, *, progress: bool = False) -> CrossValidation:
    """Fit on all folds but one and score on the one left out, for each fold.

    Parameters
    ----------
    data : PreferenceData
    fit_fn : callable
        ``fit_fn(train) -> fit``, any fit with ``predict_proba`` (e.g.
        ``lambda d: bl.fit_prs(d, 2)``).
    folds : int
        Number of folds, ≥ 2.
    groups : array_like, shape (N,), optional
        A group (user) label per comparison: every group's comparisons go to one test
        fold (:func:`fold_indices`). None splits by comparison.
    seed : int or Generator
        Seed of the split.
    progress : bool
        Print one line per fold (its sizes, log-loss and time). Folds are numbered from 0, as
        in the table, ``fold_of``, warnings and errors.

    Returns
    -------
    CrossValidation
        Per-fold table, mean ± standard error per metric.

    Raises
    ------
    Exception
        Whatever ``fit_fn`` (or the prediction) raised, with a note naming the fold.

    Examples
    --------
    >>> cv = bl.cross_validate(data, lambda d: bl.fit_prs(d, 2, ridge=1.0), folds=3)
    >>> cv.folds, cv.table["n_test"].sum()
    (3, np.int64(300))
    >>> bool(0 < cv.mean["log_loss"] < np.log(2))        # better than a coin
    True
    """
    check_instance(data, "data", PreferenceData)
    if not callable(fit_fn):
        raise TypeError(f"fit_fn must be a function of the training data returning a fit, got "
                        f"{type(fit_fn).__name__}")
    fold_of = fold_indices(data.n, folds, groups, seed)
    rows, issued = [], []
    for f in range(folds):
        test_rows = fold_of == f
        train, test = data.subset(~test_rows), data.subset(test_rows)
        sizes = train.n_comparisons, test.n_comparisons  # a counted row stands for its comparisons
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                scores = score(fit_fn(train), test)
            except Exception as exc:
                exc.add_note(f"cross_validate: in fold {f} ({f + 1} of {folds}; {sizes[0]} training, "
                             f"{sizes[1]} test comparisons)")
                raise
        seconds = time.perf_counter() - start
        for w in caught:
            issued.append(f"fold {f}: {w.category.__name__}: {w.message}")
            warnings.warn(f"fold {f}: {w.message}", w.category, stacklevel=2)
        rows.append({"fold": f, "n_train": sizes[0], "n_test": sizes[1], **scores, "seconds": seconds})
        if progress:
            print(f"fold {f} ({f + 1} of {folds}): {sizes[0]} train, {sizes[1]} test, log-loss "
                  f"{scores['log_loss']:.4f}, {seconds:.1f} s", flush=True)
    return CrossValidation(pd.DataFrame(rows), fold_of, "comparison" if groups is None else "group",
                           seed if isinstance(seed, int) else None, tuple(issued))
