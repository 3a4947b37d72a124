"""Pointwise log-likelihood, PSIS-LOO and model comparison across ranks on posterior trees.

::

    tree = post.with_log_likelihood()          # post.tree plus a log_likelihood group
    az.loo(tree)                               # ArviZ's PSIS-LOO, Pareto k̂ included
    az.compare({"r=1": t1, "r=2": t2, "r=3": t3})
    post.loo()                                 # the same, with a note on the k̂ counts
    bb.compare_ranks(data, [1, 2, 3], nuts={...})   # fit each rank, az.compare them (:mod:`.ranks`)

**The group.** ``log_likelihood`` holds one variable, ``y`` (the observed variable's
name, so ArviZ pairs it with ``observed_data.y`` and ``az.compare`` finds one
variable in each tree), of dims ``(chain, draw, comparison)``: the weighted term
ℓ_t = w_t log p(y_t | Θ, ν) of each comparison at each draw, under the fit's tie
model (:func:`~.ties.pointwise_log_likelihood`; Bernoulli on data without ties and
weights). For a MAP fit the draws are those of its Laplace approximation (with ν at
the MAP), so its LOO is that of the approximation.

**Computed on demand, not stored.** At the paper's N = 3,000 with 4 chains × 1,000
draws the group is 4 × 1000 × 3000 numbers: 96 MB in float64, 48 MB in float32,
against 58 MB for the whole of such a posterior file today. It is a function of
Θ's draws (and ν's) and the data the Posterior already holds, so
:meth:`~PosteriorLikelihood.with_log_likelihood` computes it (at that size, d_x = 20,
d_φ = 29: 10 s on two shared cores, and ``az.loo`` on it 6 s; blocks of draws keep
the work space near ``config["block_values"]`` numbers) and returns a new tree, leaving
``post.tree`` and the files :func:`bayes_loco.save` writes as they were. PyMC does
the same (``pm.compute_log_likelihood`` after sampling). Float64, so that PSIS sees
the values a hand computation gives.

**Weights and ties.** With weights, each ℓ_t is the weighted term, so the elpd is
that of the weighted (quasi-)likelihood the posterior was fitted with; under
``"half"`` with ties it is a quasi-log-likelihood and its elpd compares fits of the
same data and tie model only (different ranks, priors), not "half" against
Davidson.
"""

from __future__ import annotations

from dataclasses import dataclass

import arviz as az
import numpy as np
import xarray as xr

from ..config import get_config
from . import dims as D
from .reduced import stacked_draws
from .ties import DAVIDSON, HALF, pointwise_log_likelihood


def _nu_draws(post, chains: int, draws: int) -> np.ndarray | None:
    """ν per (chain, draw) for a Davidson fit (a MAP fit's ν at the MAP for every draw), else None."""
    if getattr(post, "ties", HALF) != DAVIDSON:
        return None
    tree = post.tree
    if D.NU in tree[D.POSTERIOR].data_vars:
        return np.asarray(tree[D.POSTERIOR][D.NU].transpose("chain", "draw").values, dtype=float)
    if D.POINT_ESTIMATE in tree.children and D.NU in tree[D.POINT_ESTIMATE].data_vars:
        return np.full((chains, draws), float(tree[D.POINT_ESTIMATE][D.NU].values))
    raise ValueError("this Davidson posterior's tree holds no draws of ν (posterior.nu) and no MAP of ν "
                     "(point_estimate.nu); was it made by fit_posterior?")


def log_likelihood(post) -> xr.Dataset:
    """The ``log_likelihood`` group of ``post`` (module docstring): ``y`` of dims (chain, draw, comparison).

    Parameters
    ----------
    post : Posterior
        A fit of :func:`~bayes_loco.bayes.fit_posterior` (or a loaded one).

    Returns
    -------
    xarray.Dataset
        ``y`` of dims (chain, draw, comparison): log p(y_t | Θ) under every draw.

    Examples
    --------
    >>> bl.bayes.log_likelihood(post)["y"].sizes["comparison"]
    300
    """
    tree, data = post.tree, post.data
    theta = np.asarray(tree[D.POSTERIOR][D.THETA].transpose("chain", "draw", D.CONTEXT, D.FEATURE).values,
                       dtype=float)
    chains, draws = theta.shape[:2]
    flat = theta.reshape(chains * draws, data.d_x, data.d_phi)
    nu = _nu_draws(post, chains, draws)
    nu = None if nu is None else nu.reshape(-1)
    ties = getattr(post, "ties", HALF)
    weights = data.loss_weights if data.weighted or data.counts is not None else None
    out = np.empty((flat.shape[0], data.n))
    block = max(1, get_config()["block_values"] // max(1, data.n * data.d_phi))
    for lo in range(0, flat.shape[0], block):
        eta = np.einsum("tj,btj->bt", data.differences, np.matmul(data.contexts, flat[lo: lo + block]))
        out[lo: lo + block] = pointwise_log_likelihood(eta, data.labels, weights, ties,
                                                      None if nu is None else nu[lo: lo + block])
    comparison = (tree[D.OBSERVED_DATA][D.OBSERVED].coords[D.COMPARISON].values
                  if D.OBSERVED_DATA in tree.children else np.arange(data.n))
    posterior = tree[D.POSTERIOR]
    coords = {"chain": posterior.coords["chain"].values, "draw": posterior.coords["draw"].values,
              D.COMPARISON: comparison}
    what = {HALF: "w_t [y_t log σ(η_t) + (1 − y_t) log σ(−η_t)]" if data.has_ties or data.weighted
            else "log p(y_t | Θ) (Bernoulli)",
            DAVIDSON: "w_t log p(y_t | Θ, ν) (Davidson)"}[ties]
    values = xr.DataArray(out.reshape(chains, draws, data.n), dims=("chain", "draw", D.COMPARISON),
                          coords=coords, attrs={"description": f"pointwise log-likelihood {what}"})
    return xr.Dataset({D.OBSERVED: values},
                      attrs={"ties": ties, "note": "computed from the posterior's draws of Θ"
                             + (" and ν" if ties == DAVIDSON else "") + " by Posterior.with_log_likelihood"})


def with_log_likelihood(post) -> xr.DataTree:
    """A copy of ``post.tree`` with the ``log_likelihood`` group, ready for ``az.loo`` and ``az.compare``.

    The copy is shallow (the other groups' arrays are shared, not duplicated);
    ``post.tree`` is left without the group.

    Parameters
    ----------
    post : Posterior

    Returns
    -------
    xarray.DataTree

    Examples
    --------
    >>> tree = bl.bayes.with_log_likelihood(post)
    >>> "log_likelihood" in tree.children, "log_likelihood" in post.tree.children
    (True, False)
    """
    tree = post.tree.copy()
    tree[D.LOG_LIKELIHOOD] = xr.DataTree(log_likelihood(post))
    return tree


@dataclass(frozen=True)
class LOOResult:
    """PSIS-LOO of one posterior: ArviZ's result and a readable account of its Pareto k̂.

    Attributes
    ----------
    elpd : arviz_stats.utils.ELPDDataLOO
        ``az.loo``'s result, pointwise (``elpd_i``, ``pareto_k`` per comparison).
    threshold : float
        ArviZ's k̂ threshold for S draws, min(1 − 1/log₁₀ S, 0.7) (``elpd.good_k``).
    high_k : int
        Comparisons with k̂ above ``threshold``: their leave-one-out estimate is unreliable.
    note : str
        One sentence on ``high_k`` and what to do about it.
    """

    elpd: object
    threshold: float
    high_k: int
    note: str

    @property
    def elpd_loo(self) -> float:
        """The estimated expected log pointwise predictive density, Σ_t elpd_t."""
        return float(self.elpd.elpd)

    @property
    def se(self) -> float:
        return float(self.elpd.se)

    @property
    def p_loo(self) -> float:
        """The effective number of parameters."""
        return float(self.elpd.p)

    @property
    def pareto_k(self) -> np.ndarray:
        """k̂ of each comparison."""
        return np.asarray(self.elpd.pareto_k.values, dtype=float)

    def __str__(self) -> str:
        return f"{self.elpd}\n{self.note}"


def _k_note(pareto_k: np.ndarray, threshold: float, units: str = "comparisons") -> tuple[int, str]:
    """How many of the left-out ``units`` (comparisons, or counted rows) have k̂ above ``threshold``, and
    what to do."""
    n = pareto_k.size
    high = int((pareto_k > threshold).sum())
    if high == 0:
        return 0, (f"Pareto k̂ ≤ {threshold:.2f} for all {n} {units} (max {pareto_k.max():.2f}): "
                   "the PSIS-LOO estimate is reliable.")
    return high, (f"Pareto k̂ > {threshold:.2f} for {high} of {n} {units} ({100 * high / n:.1f} %, max "
                  f"{pareto_k.max():.2f}): their leave-one-out terms are unreliable. More draws help where "
                  f"k̂ < 1; otherwise use K-fold cross-validation, or check those {units} (outliers, "
                  "rarely compared actions).")


def loo(post, *, reff: float | None = None) -> LOOResult:
    """PSIS-LOO (``az.loo``) of ``post`` on :func:`with_log_likelihood`'s tree, with its k̂ counted.

    ArviZ's own warning about large k̂ passes through; the result's ``note``
    counts the comparisons above the threshold.

    Parameters
    ----------
    post : Posterior
    reff : float, optional
        Relative efficiency ESS/S of the draws (``az.loo``'s; by default ArviZ's
        estimate from the posterior group, 1 for one chain).

    Returns
    -------
    LOOResult
        ``elpd_loo``, its ``se``, ``p_loo``, and ``high_k``, the comparisons whose
        estimate is unreliable, with a ``note`` saying what to do.

    Examples
    --------
    >>> result = bl.bayes.loo(post)
    >>> result.high_k
    0
    >>> bool(result.elpd_loo < 0)
    True
    """
    elpd = az.loo(with_log_likelihood(post), pointwise=True, var_name=D.OBSERVED, reff=reff)
    pareto_k = np.asarray(elpd.pareto_k.values, dtype=float)
    # A counted row is left out whole: its f_t comparisons are one unit of the estimate.
    units = "comparisons" if post.data.counts is None else "counted rows"
    high, note = _k_note(pareto_k, float(elpd.good_k), units)
    return LOOResult(elpd, float(elpd.good_k), high, note)


class PosteriorLikelihood:
    """What a :class:`~bayes_loco.bayes.Posterior` knows of its likelihood: ties, ν, log-likelihood, LOO."""

    @property
    def ties(self) -> str:
        """The tie model fitted: ``"half"`` (also the plain Bernoulli model) or ``"davidson"``."""
        return self.settings.get("ties", HALF)

    @property
    def nu(self) -> float | None:
        """Davidson's ν: its posterior mean (a MAP fit: the MAP), or None for the other models."""
        if self.ties != DAVIDSON:
            return None
        tree = self.tree
        if D.POINT_ESTIMATE in tree.children and D.NU in tree[D.POINT_ESTIMATE].data_vars:
            return float(tree[D.POINT_ESTIMATE][D.NU].values)
        return float(stacked_draws(tree, D.NU).mean())

    def with_log_likelihood(self) -> xr.DataTree:
        """``tree`` with its ``log_likelihood`` group (:func:`~bayes_loco.bayes.with_log_likelihood`).

        Returns
        -------
        xarray.DataTree
            A shallow copy; ``az.loo`` and ``az.compare`` read it.

        Examples
        --------
        >>> "log_likelihood" in post.with_log_likelihood().children
        True
        """
        return with_log_likelihood(self)

    def loo(self, *, reff: float | None = None) -> LOOResult:
        """PSIS-LOO of this posterior (:func:`~bayes_loco.bayes.loocv.loo`).

        Parameters
        ----------
        reff : float, optional
            As in :func:`~bayes_loco.bayes.loo`.

        Returns
        -------
        LOOResult

        Examples
        --------
        >>> post.loo().high_k        # no comparison with an unreliable estimate
        0
        """
        return loo(self, reff=reff)
