"""Certify the values of a few policies chosen on other data: one-sided simultaneous lower bounds.

A pessimistic policy guards every value it might use; at a reward model's width that is tens of
thousands of row × action values (:mod:`bayes_loco.sets.family`), and a simultaneous guarantee over
all of them keeps almost nothing. A policy is judged on one number, its value against the reference action,

    V(π) = m(π)ᵀθ,   m(π) = (1/n) Σ_i Σ_a π(a | i) z_ia,   z_ia = z(x_i, s_i, a) − z(x_i, s_i, a_ref),

so once a handful of candidate policies π_1 … π_J are fixed, J functionals are all that need a
bound. Choose the candidates on one part of the data and bound their values on another
(:func:`certify_policies`): with ŝ_j = ‖m(π_j)‖_{W⁻¹} from the second part's Wald set,

    V(π_j) ≥ m(π_j)ᵀθ̂ − c·ŝ_j   for every j at once, with probability ≥ level,

where c is the level quantile of max_j t_j, t_j = m(π_j)ᵀ(θ̂ − θ)/ŝ_j, simulated from θ̂ − θ ~
N(0, W⁻¹) (one-sided: only lower bounds are promised; Φ⁻¹(level) for one candidate, 1.28 at 0.9,
where the value family of 18,000 members needs 4.5). The certificate deploys the candidate with the
largest lower bound, or the reference action (value 0, known) when none is above 0, and its bound
is that candidate's lower bound: it holds whenever every candidate's does.

:func:`split_policy` runs the whole road on one data set: PRS with a split (the low-rank fit on the
first N₀ comparisons, the reduced MLE and its Wald set on the rest, :func:`~bayes_loco.fit_prs`),
candidates from the first part alone (the greedy policy of its Θ̂, and that policy kept only on the
rows whose estimated gain over the reference reaches given quantiles), bounds from the second part.

Assumptions, stated where the guarantee is: the Gaussian approximation of the second part's θ̂ (which
fails where the reduced model has many coordinates per comparison: :func:`check_dimension` warns), the
candidates independent of the second part (they read only the first), and the reduced model's
subspace (fixed by the first part) holding the candidates' values: the bound is on m(π)ᵀθ in the
first part's RTV coordinates, and the part of Θ* outside that subspace is not in it
(docs/explanation/value-family.md, "Certifying a chosen policy").

At a reward model's width the reduced model has r(d_x + d_φ) − r² coordinates, a third of the
comparisons at d_φ = 4,096, and its values come out inflated. :func:`certify_row_space` bounds the
candidates in Θ = A V̂₂ᵀ (d_x·r coordinates) instead, V̂₂ fitted on half the rest and A on the other
half (``split_policy(..., model="row-space")``): the true values where the rows of Θ* lie in span V̂₂,
attenuated (conservative) where V̂₂ misses part of them or mixes in noise.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from ._validation import LEVEL, check_int, check_level, check_option, check_real, rng_from
from .config import get_config
from .data import PreferenceData
from .evaluate import check_policy
from .exceptions import ConvergenceWarning, DataWarning
from .frequentist import LowRankResult, PRSResult, fit_low_rank, fit_mle, fit_prs
from .model import rewards
from .policy import Policy, greedy_policy
from .population import Population
from .sets import EllipsoidSet, QuantileSet
from .sets.family import candidate_blocks, draw_ranks, quantile_interval

__all__ = ["PolicyCertificate", "certify_policies", "certify_row_space", "certify_split", "check_dimension",
           "gain_candidates", "min_rank", "policy_moments", "split_policy"]

#: How a certificate's critical value was found: simulated one-sided max-t, Bonferroni's bound, or
#: the posterior draws' one-sided simultaneous rank.
CERTIFY_METHODS = ("max-t", "bonferroni", "min-rank")


@dataclass(frozen=True, eq=False)
class PolicyCertificate:
    """Simultaneous lower bounds on the values of candidate policies, and the one they deploy.

    Guarantee (``level_meaning``): with probability ≥ ``level`` every candidate's value relative to
    the reference action is at least its ``lower``, so the deployed :attr:`policy`'s value is at
    least its ``pessimistic_value`` — provided the candidates were chosen without the comparisons
    the set was fitted on.

    Attributes
    ----------
    candidates : tuple of Policy
        The policies bounded, solved on ``population``.
    estimate : ndarray, shape (J,)
        m(π_j)ᵀθ̂ (posterior: the draws' mean).
    scale : ndarray, shape (J,)
        ŝ_j = ‖m(π_j)‖_{W⁻¹} (posterior: the draws' standard deviation).
    lower : ndarray, shape (J,)
        The simultaneous lower bounds.
    critical : float
        c: ``lower = estimate − c·scale`` (posterior: Φ⁻¹ of the band's tail, for reading).
    method : {"max-t", "bonferroni", "min-rank"}
    level : float
    level_meaning : str
    chosen : int or None
        The deployed candidate (the largest lower bound); None: no bound is above 0, and the
        reference action is deployed.
    population : Population
    reference_action : int
    row_space_share : float or None
        :func:`certify_row_space`'s view of the choice: the share of the choosing fit's ‖Θ̂‖²_F in the
        row space V̂₂ the bounds are in (None for the other certificates).
    """

    candidates: tuple[Policy, ...]
    estimate: np.ndarray
    scale: np.ndarray
    lower: np.ndarray
    critical: float
    method: str
    level: float
    level_meaning: str
    chosen: int | None
    population: Population
    reference_action: int
    row_space_share: float | None = None

    @property
    def policy(self) -> Policy:
        """The deployed policy: the chosen candidate with its lower bound as ``pessimistic_value``, or
        the reference action everywhere (bound 0) when no candidate is certified above it."""
        if self.chosen is None:
            first = self.candidates[0]
            probabilities = np.zeros_like(first.probabilities)
            probabilities[:, self.reference_action] = 1.0
            return replace(first, probabilities=probabilities, pessimistic_value=0.0, objective_value=0.0,
                           theta=None, certificate=None, rounded_value=None, level=self.level,
                           level_meaning=self.level_meaning,
                           message="no candidate's value was certified above the reference action's")
        bound = float(self.lower[self.chosen])
        return replace(self.candidates[self.chosen], pessimistic_value=bound, objective_value=bound,
                       level=self.level, level_meaning=self.level_meaning,
                       message=f"candidate {self.chosen} of {len(self.candidates)}, certified on other data")

    def __repr__(self) -> str:
        chosen = "the reference action" if self.chosen is None else f"candidate {self.chosen}"
        return (f"PolicyCertificate(candidates={len(self.candidates)}, critical={self.critical:.3f} "
                f"({self.method}), level={self.level:g}, deploys {chosen}, "
                f"bound={self.policy.pessimistic_value:.4g})")


def policy_moments(coordinates, policies: Sequence[Policy], population: Population,
                   reference_action: int = 0) -> np.ndarray:
    """m(π_j) = (1/n) Σ_i Σ_a π_j(a | i) z_ia in ``coordinates``, a block of rows at a time.

    A policy's value relative to the reference action is m(π)ᵀθ (:func:`~bayes_loco.relative_value`
    under the Θ of θ).

    Parameters
    ----------
    coordinates : Coordinates
        Those of the set that will bound the values (an RTV basis, or vec Θ).
    policies : sequence of Policy
        Solved on ``population``.
    population : Population
    reference_action : int

    Returns
    -------
    ndarray, shape (J, k)

    Examples
    --------
    >>> policy = bl.greedy_policy(fit.theta, pop)
    >>> m = bl.certify.policy_moments(fit.coordinates, [policy], pop)
    >>> bool(np.isclose(m[0] @ fit.estimate, bl.relative_value(policy, fit.theta, pop)))
    True
    """
    probabilities = [p.row_probabilities for p in policies]
    moments = np.zeros((len(policies), coordinates.dim))
    for lo, hi, z in candidate_blocks(coordinates, population, reference_action):
        for j, rows in enumerate(probabilities):
            moments[j] += np.einsum("ia,iak->k", rows[lo:hi], z)
    return moments / population.n


def min_rank(values: np.ndarray, level: float) -> int:
    """r of the one-sided simultaneous band from draws: the largest r with at least ``level`` of the
    draws at or above every column's r-th smallest value at once (the lower half of
    :func:`~bayes_loco.sets.max_rank`'s construction).

    Parameters
    ----------
    values : ndarray, shape (J, m)
        Rows are draws, columns the candidates' values.
    level : float
        The share of draws left above every bound at once, in (0, 1).

    Returns
    -------
    int
        r, between 1 and J.

    Examples
    --------
    >>> values = np.random.default_rng(0).standard_normal((1000, 3))
    >>> r = bl.certify.min_rank(values, 0.9)
    >>> bool((values >= np.sort(values, axis=0)[r - 1]).all(axis=1).mean() >= 0.9)
    True
    """
    ranks = draw_ranks(values)
    return int(np.sort(ranks.min(axis=1))[math.floor((1 - level) * ranks.shape[0] + 1e-9)])


def certify_policies(uncertainty_set: EllipsoidSet | QuantileSet, policies: Sequence[Policy],
                     population: Population, level: float | None = None, *, method: str = "max-t",
                     draws: int = 100_000, seed=0) -> PolicyCertificate:
    """One-sided simultaneous lower bounds on the candidates' values, from a set fitted on other data.

    Parameters
    ----------
    uncertainty_set : EllipsoidSet or QuantileSet
        A calibrated ellipsoid (``fit.calibrated_set(level)``: its W is the inverse covariance of θ̂;
        its radius is not used), or a posterior's quantile set (its draws give the bounds: the
        one-sided simultaneous rank, :func:`min_rank`). Fitted on comparisons the candidates were
        not chosen from.
    policies : sequence of Policy
        The candidates, solved on ``population`` with the same reference action.
    population : Population
    level : float or None
        None takes the set's level.
    method : {"max-t", "bonferroni"}
        An ellipsoid's critical value: the ``level`` quantile of max_j t_j simulated from
        θ̂ − θ ~ N(0, W⁻¹), or Bonferroni's Φ⁻¹(1 − (1 − level)/J), which caps it.
    draws : int
        Monte Carlo draws of max_j t_j.
    seed : int or Generator

    Returns
    -------
    PolicyCertificate

    Raises
    ------
    ValueError
        No candidate, candidates with different reference actions or solved on another
        population, a Gram set (no inverse covariance), a candidate's value not identified by the
        set, or a level missing.

    Examples
    --------
    >>> first, rest = data.split(150)             # choose on the first half, bound on the rest
    >>> greedy = bl.greedy_policy(bl.fit_low_rank(first, 2, ridge=1.0).theta, pop)
    >>> cert = bl.certify_policies(bl.fit_prs(rest, 2, ridge=1.0).calibrated_set(0.9), [greedy], pop)
    >>> round(cert.critical, 4)                    # one candidate: Φ⁻¹(0.9)
    1.2816
    """
    if not isinstance(uncertainty_set, EllipsoidSet | QuantileSet):
        raise TypeError(f"uncertainty_set must be an EllipsoidSet or a QuantileSet, got "
                        f"{type(uncertainty_set).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    policies = tuple(policies)
    if not policies:
        raise ValueError("policies: give at least one candidate policy")
    for j, policy in enumerate(policies):
        try:
            check_policy(policy, population)
        except (TypeError, ValueError) as err:
            raise type(err)(f"policies[{j}]: {err}") from None
    reference = {p.reference_action for p in policies}
    if len(reference) > 1:
        raise ValueError(f"policies: the candidates have different reference actions {sorted(reference)}")
    reference_action = reference.pop()
    if level is None:
        level = getattr(uncertainty_set, "level", None)
        if level is None:
            raise ValueError("level: the set has no level; give one")
    level = check_level(level)
    coordinates = uncertainty_set.coordinates
    moments = policy_moments(coordinates, policies, population, reference_action)
    if isinstance(uncertainty_set, QuantileSet):
        estimate, scale, lower, critical = _draws_bounds(uncertainty_set.draws @ moments.T, level)
        method = "min-rank"
        meaning = ("posterior: every candidate's value is at least its lower bound at once with posterior "
                   "probability ≥ level, given data the candidates were not chosen from")
    else:
        estimate, scale, lower, critical = _ellipsoid_bounds(uncertainty_set, moments, level, method, draws,
                                                             seed)
        meaning = ("asymptotic: every candidate's value is at least its lower bound at once with probability "
                   "≥ level under the Gaussian approximation of θ̂, for candidates chosen without the "
                   "comparisons θ̂ was fitted on")
    best = int(np.argmax(lower))
    chosen = best if lower[best] > 0 else None
    return PolicyCertificate(policies, estimate, scale, lower, critical, method, float(level), meaning,
                             chosen, population, reference_action)


def _draws_bounds(values: np.ndarray, level: float):
    """(estimate, scale, lower, critical) of J functionals' draws (draws, J): the one-sided rank band."""
    r = min_rank(values, level)
    lower = np.partition(values, r - 1, axis=0)[r - 1]
    return values.mean(axis=0), values.std(axis=0, ddof=1), lower, float(stats.norm.isf(r / values.shape[0]))


def _ellipsoid_bounds(ellipsoid: EllipsoidSet, moments: np.ndarray, level: float, method: str, draws: int,
                      seed):
    """(estimate, scale, lower, critical) of the moments' values from an ellipsoid's centre and W."""
    if ellipsoid.kind == "gram":
        raise ValueError("uncertainty_set: the paper's Gram set (kind 'gram') has W = Σ z zᵀ, not the "
                         "inverse covariance of the estimate; use fit.calibrated_set(level)")
    check_option(method, "method", CERTIFY_METHODS[:2])  # min-rank is the draws' own
    draws = check_int(draws, "draws", 100)
    whitened, inside = ellipsoid.whitened(moments)
    if not inside.all():
        raise ValueError(f"policies: the values of candidates {np.flatnonzero(~inside).tolist()} are not "
                         "identified by the set (their moments leave range(W))")
    scale = np.linalg.norm(whitened, axis=1)
    critical = float(stats.norm.isf((1 - level) / len(moments)))  # Bonferroni, one-sided
    if method == "max-t" and len(moments) > 1:
        # t = (t_1 … t_J) ~ N(0, R) with R the candidates' correlations: drawn in J dimensions, not
        # in the set's k_eff (at reward-model width 100,000 draws of ε would take 13 GB).
        g = whitened / np.where(scale > 0, scale, 1.0)[:, None]
        vals, vecs = np.linalg.eigh(g @ g.T)
        root = vecs * np.sqrt(np.clip(vals, 0.0, None))
        t = rng_from(seed).standard_normal((draws, len(moments))) @ root.T
        critical = min(critical, quantile_interval(t.max(axis=1), level)[0])
    estimate = moments @ ellipsoid.center
    return estimate, scale, estimate - critical * scale, critical


def gain_candidates(theta: np.ndarray, population: Population,
                    quantiles: Sequence[float] = (0.0, 0.25, 0.5, 0.75), *,
                    scope: str = "personalised") -> tuple[Policy, ...]:
    """Candidate policies read from one estimate Θ̂: its greedy policy, kept only on the units of largest
    estimated gain.

    For each q of ``quantiles``, the greedy policy of Θ̂ on the units whose estimated gain over the
    reference action, max_a r̂(u, a) − r̂(u, a_ref), reaches the q-quantile of the units' gains, and
    the reference action on the others (q = 0: the greedy policy itself). Dropping the units of
    small estimated gain drops values that are mostly noise, so a candidate of larger q has a
    smaller standard error for a smaller share of the gain.

    Parameters
    ----------
    theta : ndarray of shape (d_x, d_φ)
        Θ̂, from data the candidates' values will not be bounded with.
    population : Population
    quantiles : sequence of float
        In [0, 1].
    scope : {"personalised", "global"}

    Returns
    -------
    tuple of Policy
        One per quantile, objective ``"greedy"``, reference action 0; ``objective_value`` is each
        one's value under Θ̂.

    Examples
    --------
    >>> candidates = bl.certify.gain_candidates(fit.theta, pop, (0.0, 0.5))
    >>> [round(float((c.actions != 0).mean()), 2) for c in candidates]
    [0.58, 0.5]
    """
    greedy = greedy_policy(theta, population, scope=scope)
    units = population.units(scope)
    scores = units.mean(rewards(theta, population.contexts, population.features))
    gains = scores.max(axis=1) - scores[:, greedy.reference_action]
    out = []
    for q in quantiles:
        q = check_real(q, "quantiles", 0.0, 1.0)
        keep = gains >= np.quantile(gains, q) if q > 0 else np.ones(gains.shape, dtype=bool)
        probabilities = np.where(keep[:, None], greedy.probabilities, 0.0)
        probabilities[~keep, greedy.reference_action] = 1.0
        out.append(replace(greedy, probabilities=probabilities,
                           objective_value=float(units.weights @ (probabilities * scores).sum(axis=1))))
    return tuple(out)


def check_dimension(fit: PRSResult) -> float:
    """Warn (:class:`~bayes_loco.DataWarning`) where the set certifying the candidates has too many
    coordinates per comparison for its Gaussian approximation: k / N of the reduced MLE above
    ``config["certify_dimension_ratio"]``. Returns the ratio.

    There a logistic MLE's estimates are inflated away from 0 and its Wald standard errors are too
    small (Sur & Candès 2019), so the lower bounds sit above the true values: at a reward model's
    width (k = 16,496 on 50,000 comparisons) every candidate's bound failed.

    Parameters
    ----------
    fit : PRSResult
        The fit whose Wald set certifies (``fit.k`` coordinates, ``fit.estimation_data`` its comparisons).

    Returns
    -------
    float
        k / N of the reduced MLE.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ratio = bl.certify.check_dimension(bl.fit_prs(data, 2, ridge=1.0, n_initial=150))
    >>> round(ratio, 3), [type(w.message).__name__ for w in caught]
    (0.107, ['DataWarning'])
    """
    n = fit.estimation_data.n_comparisons
    ratio = fit.k / n
    limit = get_config()["certify_dimension_ratio"]
    if ratio > limit:
        warnings.warn(f"the certifying fit has {fit.k} coordinates for {n} comparisons "
                      f"(k / N = {ratio:.3g} > {limit:g}): there the reduced MLE's values are inflated and "
                      "its standard errors too small, so the bounds can exceed the true values (at a "
                      "reward model's width every bound failed). Certify with more comparisons, a lower "
                      "rank or fewer features, or in a row space fitted on other comparisons "
                      "(model='row-space': d_x·r coordinates, its bounds err low)", DataWarning,
                      stacklevel=3)
    return ratio


def split_policy(data: PreferenceData, rank: int, population: Population, level: float = LEVEL, *,
                 n_initial: int | None = None, ridge: float = 1.0,
                 quantiles: Sequence[float] = (0.0, 0.25, 0.5, 0.75),
                 scope: str = "personalised", model: str = "reduced",
                 max_iter: int = 5000) -> PolicyCertificate:
    """Choose candidate policies on the first N₀ comparisons and certify their values on the rest.

    PRS with a split (:func:`~bayes_loco.fit_prs`: the low-rank fit on the first ``n_initial``
    comparisons, the reduced MLE and W on the others), the candidates of :func:`gain_candidates`
    from the low-rank fit's Θ̂ (the first part alone), their one-sided simultaneous bounds from the
    reduced MLE's Wald set (:func:`certify_policies`). The guarantee and its assumptions are in the
    module docstring; ``cert.policy`` is the policy to deploy.

    Parameters
    ----------
    data : PreferenceData
        In the order to split: the first ``n_initial`` comparisons choose, the rest certify
        (shuffle first if the order carries anything).
    rank : int
        r of the low-rank fit.
    population : Population
        The population the policy is for.
    level : float
        α of the simultaneous bounds.
    n_initial : int or None
        N₀; None: half the comparisons.
    ridge : float
        λ of both fits, as in :func:`~bayes_loco.fit_prs`.
    quantiles : sequence of float
        The candidates (:func:`gain_candidates`).
    scope : {"personalised", "global"}
    model : {"reduced", "row-space"}
        What the rest certifies in: PRS's reduced model (r(d_x + d_φ) − r² coordinates,
        :func:`certify_split`), or a row space fitted on half the rest (d_x·r coordinates on the other
        half: :func:`certify_row_space`, for d_φ large against the comparisons).
    max_iter : int
        FGD's iterations for the choosing fit (:func:`~bayes_loco.fit_low_rank`; at d_φ = 4,096 and
        50,000 comparisons an iteration takes about 0.6 s, and 100 choose as well as 1,000).

    Returns
    -------
    PolicyCertificate

    Examples
    --------
    >>> cert = bl.split_policy(data, 2, pop, 0.9)   # 150 comparisons choose, 150 certify
    >>> cert
    PolicyCertificate(candidates=4, critical=1.4... (max-t), level=0.9, deploys the reference action, bound=0)
    >>> cert.policy.pessimistic_value, bool((cert.policy.actions == 0).all())   # nothing certified above it
    (0.0, True)
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    check_option(model, "model", ("reduced", "row-space"))
    n_initial = data.n_comparisons // 2 if n_initial is None else n_initial
    if model == "row-space":
        first, rest = data.split(n_initial)
        return certify_row_space(fit_low_rank(first, rank, ridge=ridge, max_iter=max_iter), rest, population,
                                 level, quantiles=quantiles, scope=scope, ridge=ridge)
    fit = fit_prs(data, rank, n_initial=n_initial, ridge=ridge, max_iter=max_iter)
    return certify_split(fit, population, level, quantiles=quantiles, scope=scope)


def certify_row_space(low_rank: LowRankResult, data: PreferenceData, population: Population,
                      level: float = LEVEL, *, n_basis: int | None = None,
                      quantiles: Sequence[float] = (0.0, 0.25, 0.5, 0.75),
                      scope: str = "personalised", ridge: float = 1.0) -> PolicyCertificate:
    """Certify a low-rank fit's gain candidates in a row space fitted on comparisons neither has seen.

    ``data`` (comparisons ``low_rank`` was not fitted on) is split in two. A rank-r fit of the first
    ``n_basis`` (FGD to convergence, or as many iterations as ``low_rank`` took if it stopped early)
    gives the row space V̂₂ (d_φ × r). On the others, Θ = A V̂₂ᵀ has d_x·r coordinates whatever d_φ:
    the MLE of A (:func:`~bayes_loco.fit_mle` on x_t, V̂₂ᵀΔφ_t) and its Wald set bound the values of
    :func:`gain_candidates` of Θ̂ = ``low_rank.theta`` (:func:`certify_policies`).

    The bounds are on the values under the model's best fit A†V̂₂ᵀ, the true values when the rows of
    Θ* lie in span V̂₂. Where they do not, what lies outside is lost and what V̂₂ mixes in is noise of
    comparisons the candidates never read: the values come out attenuated, the bounds err low
    (docs/explanation/value-family.md, "In a row space fitted on other data"). Θ̂'s own row space errs
    high: the candidates favour actions large along Θ̂'s noise directions, and A credits them.
    ``row_space_share``, the share of ‖Θ̂‖²_F in span V̂₂, is how much of what chose the candidates
    the bounds can see: low, they are far below the values.

    Parameters
    ----------
    low_rank : LowRankResult
        The fit that chooses, on comparisons other than ``data``'s.
    data : PreferenceData
        The comparisons that certify, in the order to split.
    population : Population
        The rows the candidates act on; the certificate is on it, not on its row-space copy.
    level : float
        α of the simultaneous bounds.
    n_basis : int or None
        How many of ``data``'s comparisons (the first) fit the row space; None: half.
    quantiles : sequence of float
        The candidates (:func:`gain_candidates`).
    scope : {"personalised", "global"}
    ridge : float
        λ of the row space's fit and of the MLE of A.

    Returns
    -------
    PolicyCertificate
        On ``population``; its ``level_meaning`` names the model.

    Examples
    --------
    >>> first, rest = data.split(150)
    >>> cert = bl.certify.certify_row_space(bl.fit_low_rank(first, 2, ridge=1.0), rest, pop, 0.9)
    >>> len(cert.candidates), cert.method, 0 <= cert.row_space_share <= 1
    (4, 'max-t', True)
    """
    if not isinstance(low_rank, LowRankResult):
        raise TypeError(f"low_rank must be a LowRankResult (bl.fit_low_rank), got {type(low_rank).__name__}")
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    if data.d_x != low_rank.theta.shape[0] or data.d_phi != low_rank.theta.shape[1]:
        raise ValueError(f"data: d_x × d_φ = {data.d_x} × {data.d_phi}, the fit's Θ̂ is "
                         f"{low_rank.theta.shape[0]} × {low_rank.theta.shape[1]}")
    n_comparisons = data.n_comparisons
    n_basis = n_comparisons // 2 if n_basis is None else check_int(n_basis, "n_basis", 1, n_comparisons - 1)
    candidates = gain_candidates(low_rank.theta, population, quantiles, scope=scope)
    basis_data, data = data.split(n_basis)
    rank = low_rank.rank
    stopped = not low_rank.diagnostics.converged
    effort = f", {low_rank.diagnostics.n_iter} FGD iterations" if stopped else ""
    with warnings.catch_warnings():
        if stopped:  # as early as the choosing fit, whose warning the user has had
            warnings.simplefilter("ignore", ConvergenceWarning)
        limit = {"max_iter": low_rank.diagnostics.n_iter} if stopped else {}
        other = fit_low_rank(basis_data, rank, ridge=ridge, **limit).theta
    basis = np.linalg.svd(other, full_matrices=False)[2][:rank].T
    norm = max(np.sum(low_rank.theta ** 2), np.finfo(float).tiny)
    share = float(np.sum((low_rank.theta @ basis) ** 2) / norm)
    narrow = data.delta.times(basis) if data.indexed else data.differences @ basis
    narrow_data = PreferenceData(data.contexts, narrow, data.labels, weights=data.weights, counts=data.counts)
    fit = fit_mle(narrow_data, ridge=ridge)
    in_space = Population(population.contexts, population.features @ basis, population.states)
    cert = certify_policies(fit.calibrated_set(level), [replace(c, population=in_space.fingerprint)
                                                        for c in candidates], in_space, level)
    meaning = (f"{cert.level_meaning}; the values are those of the best fit Θ = A V̂₂ᵀ in the row space of "
               f"a rank-{rank} fit of {n_basis:,} other comparisons{effort}, the true values when the rows "
               f"of Θ* lie in it ({share:.0%} of the choosing fit's Θ̂ does)")
    return replace(cert, candidates=candidates, population=population, level_meaning=meaning,
                   row_space_share=share)


def certify_split(fit: PRSResult, population: Population, level: float = LEVEL, *,
                  quantiles: Sequence[float] = (0.0, 0.25, 0.5, 0.75), scope: str = "personalised",
                  uncertainty_set: EllipsoidSet | None = None) -> PolicyCertificate:
    """The certificate of a PRS fit with a split: :func:`split_policy` after its fit.

    Warns where the certifying part has too many coordinates per comparison (:func:`check_dimension`),
    reads the candidates from the first part's Θ̂ (:func:`gain_candidates` of ``fit.low_rank.theta``)
    and bounds them with the second part's Wald set (:func:`certify_policies`).

    Parameters
    ----------
    fit : PRSResult
        PRS fitted with ``n_initial`` below N, so that its two parts are disjoint.
    population : Population
    level : float
        α of the simultaneous bounds.
    quantiles : sequence of float
        The candidates (:func:`gain_candidates`).
    scope : {"personalised", "global"}
    uncertainty_set : EllipsoidSet or None
        ``fit.calibrated_set(level)`` when already built (at a reward model's width it takes minutes);
        None builds it.

    Returns
    -------
    PolicyCertificate

    Examples
    --------
    >>> cert = bl.certify.certify_split(bl.fit_prs(data, 2, ridge=1.0, n_initial=150), pop, 0.9)
    >>> bool(np.array_equal(cert.lower, bl.split_policy(data, 2, pop, 0.9).lower))   # split_policy's steps
    True
    """
    if not isinstance(fit, PRSResult):
        raise TypeError(f"fit must be a PRSResult (bl.fit_prs), got {type(fit).__name__}")
    if fit.n_initial is None:
        raise ValueError("fit: certify_split needs a PRS fit with a split (fit_prs(…, n_initial=N₀)), "
                         "so that the candidates are chosen on comparisons the bounds never use")
    check_dimension(fit)
    candidates = gain_candidates(fit.low_rank.theta, population, quantiles, scope=scope)
    uncertainty_set = fit.calibrated_set(level) if uncertainty_set is None else uncertainty_set
    return certify_policies(uncertainty_set, candidates, population, level)
