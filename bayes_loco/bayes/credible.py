"""Credible sets for θ_rtv with the interface the pessimistic solver uses.

Every kind of :data:`KINDS` — the Gaussian credible ellipsoid, its sandwich,
the hull of draws, the pointwise quantile, the CVaR set, the simultaneous bands of one
population's values (``"family"``) — lives in the RTV coordinates of the
fit whose basis defines θ_rtv (``coordinates`` is its :class:`~bayes_loco.RTVBasis`) and
exposes ``lower_bound(z) = min_{θ ∈ set} θᵀz``, so
:func:`bayes_loco.pessimistic_policy` treats them like the frequentist ellipsoids.

Identified directions. With proper Normal priors on U and V the posterior
covariance of θ_rtv is full rank, but along directions that no comparison
reaches (the state block of the paper's simulation, whose features cancel in
Δφ) it is the prior's, not the data's: on the paper's problem 60 of the k = 138
coordinates. By default the sets are restricted to the range of the reduced
design's Gram matrix Σ_t z_t z_tᵀ — the same k_eff directions that the
frequentist Wald set keeps (78 of 138 there) — and are cylinders along the
rest: a credible statement about what the data identify, with radius
χ²_k_eff rather than χ²_k (at 90 %, radius 9.7 against 12.6 at k_eff = 78, k = 138). A
reward difference z that leaves those directions gets lower bound −inf, exactly
as for the Wald set; with reference-action differencing (docs/design.md,
convention 1) the candidate z of the paper's populations never do.
"""

from __future__ import annotations

import numpy as np

from .._validation import LEVEL, check_level, check_option
from ..coordinates import RTVBasis
from ..population import Population
from ..sets import DrawsSet, EllipsoidSet, QuantileSet, ValueFamilySet, draws_family
from ..sets.description import chi_radius
from .reduced import draws_moments

#: The kinds of :func:`credible_set`, each the ``kind`` of the set it returns.
KINDS = ("credible", "sandwich", "draws", "quantile", "cvar", "family")


def _check_draws(draws, basis) -> np.ndarray:
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[1] != basis.dim:
        raise ValueError(f"draws must have shape (J, {basis.dim}) to match the basis, got {draws.shape}")
    if draws.shape[0] < 2:
        raise ValueError(f"draws must hold at least 2 draws, got {draws.shape[0]}")
    if not np.isfinite(draws).all():
        raise ValueError("draws contain NaN or infinity")
    return draws


def _frame(draws, directions):
    """Mean, the directions P and the (debiased) inverse covariance of Pᵀθ.

    The inverse of a covariance estimated from J draws overstates the precision:
    for Gaussian draws E[Σ̂⁻¹] = Σ⁻¹ (J − 1)/(J − m − 2) in m dimensions (inverse
    Wishart), which in m = 78 dimensions from 2000 draws shrinks a 90 % ellipsoid
    to about 84 % coverage of its own posterior. The factor (J − m − 2)/(J − 1)
    removes that bias (treating the draws as independent).
    """
    j, k = draws.shape
    p = np.eye(k) if directions is None else np.asarray(directions, dtype=float)
    if p.ndim != 2 or p.shape[0] != k:
        raise ValueError(f"directions must have shape ({k}, k_eff), got {p.shape}")
    mean, cov = draws_moments(draws)
    reduced = p.T @ cov @ p
    precision = np.linalg.pinv(0.5 * (reduced + reduced.T), hermitian=True)
    m = p.shape[1]
    if j > m + 2:
        precision *= (j - m - 2) / (j - 1)
    return mean, p, precision


def mahalanobis(draws, center, directions, precision) -> np.ndarray:
    """‖P ᵀ(θ_j − θ̄)‖ in the metric ``precision`` for each draw."""
    y = (np.asarray(draws) - center) @ directions
    return np.sqrt(np.maximum(np.einsum("ji,il,jl->j", y, precision, y), 0.0))


def credible_ellipsoid(draws, basis: RTVBasis, level: float = LEVEL, *,
                       directions: np.ndarray | None = None,
                       information: np.ndarray | None = None) -> EllipsoidSet:
    """Gaussian credible ellipsoid {θ : (θ − θ̄)ᵀ W (θ − θ̄) ≤ χ²_k_eff(level)}, or its sandwich.

    θ̄ and Σ are the posterior mean and covariance of θ_rtv; W = P (PᵀΣP)⁻¹ Pᵀ
    with P the identified directions (all k when ``directions`` is None), the
    inverse debiased for the number of draws J by the factor
    (J − k_eff − 2)/(J − 1) (inverse-Wishart mean; without it the set is too
    small by a few percent of coverage in ~80 dimensions).

    Guarantees: if the posterior of Pᵀθ_rtv is Gaussian, the set holds exactly
    ``level`` of its mass; it is convex, so both solver objectives accept it.
    Does not guarantee: frequentist coverage (measured, not promised), nor
    the level when the posterior is skewed — the factored model's posterior is
    not Gaussian near low-rank truths. Along directions outside P it is
    unbounded (a cylinder).

    With ``information`` F (k × k, the Fisher information at θ̄) the shape is
    instead the sandwich Σ F Σ (kind ``"sandwich"``): the sampling covariance of
    the posterior mean when the posterior is close to Gaussian, since then
    θ̄ ≈ Σ (F θ̂ + prior term) with θ̂ the MLE (Müller 2013, Econometrica 81).
    It is a frequentist confidence set centred at the Bayesian estimate, meant
    for low-rank truths where the posterior is wider than the error of its own
    mean (docs/design.md, convention 8; docs/results/coverage.md measures both). It ignores
    the prior's bias, and the noise of Σ enters twice, so the debiasing factor
    is applied twice.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    level : float
        In (0, 1).
    directions : ndarray of shape (k, k_eff), optional
        P, the identified directions (``post.directions``); all k when None.
    information : ndarray of shape (k, k), optional
        F, for the sandwich.

    Returns
    -------
    EllipsoidSet
        ``kind="credible"``, or ``"sandwich"`` with ``information``.

    Examples
    --------
    >>> bl.bayes.credible_ellipsoid(post.rtv_draws, post.basis, 0.9, directions=post.directions)
    EllipsoidSet(kind='credible', k=16, k_eff=8, radius=3.655, level=0.9)
    """
    level = check_level(level)
    draws = _check_draws(draws, basis)
    mean, p, precision = _frame(draws, directions)
    kind = "credible"
    if information is not None:
        information = np.asarray(information, dtype=float)
        if information.shape != (basis.dim, basis.dim) or not np.isfinite(information).all():
            raise ValueError(f"information must be a finite ({basis.dim}, {basis.dim}) matrix, "
                             f"got shape {information.shape}")
        reduced = p.T @ information @ p
        inverse = np.linalg.pinv(0.5 * (reduced + reduced.T), hermitian=True)
        precision = precision @ inverse @ precision
        kind = "sandwich"
    shape = p @ precision @ p.T
    unit = EllipsoidSet(mean, 0.5 * (shape + shape.T), 1.0, basis, kind=kind, level=level)
    return unit.with_radius(chi_radius(level, unit.effective_dim))


def credible_draws(draws, basis: RTVBasis, level: float = LEVEL, *,
                   directions: np.ndarray | None = None) -> DrawsSet:
    """The convex hull of the ``level`` fraction of draws nearest the mean in Mahalanobis distance.

    Distances use the posterior covariance of the identified directions P, so
    prior noise in unidentified directions does not decide which draws are kept.

    Guarantees: the kept draws are an empirical ``level`` region of the
    posterior (exactly, up to ties), and ``lower_bound`` is the exact support
    function of their hull, which both objectives accept. Does not guarantee:
    that the hull holds ``level`` of the posterior mass — in k_eff ≈ 80
    dimensions a hull of a few thousand draws is far smaller than the credible
    ellipsoid (its support reaches ~3.5σ along a direction, the ellipsoid's
    ~10σ), so it is a milder pessimism whose strength grows with the number of
    draws.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    level : float
        In (0, 1), refused here at 1 as the :class:`~bayes_loco.DrawsSet` it builds would.
    directions : ndarray of shape (k, k_eff), optional
        As in :func:`credible_ellipsoid`.

    Returns
    -------
    DrawsSet
        ``kind="draws"``: the kept draws.

    Examples
    --------
    >>> bl.bayes.credible_draws(post.rtv_draws, post.basis, 0.9)       # 90% of 1,000 draws
    DrawsSet(kind='draws', draws=900, k=16, level=0.9)
    """
    level = check_level(level)
    draws = _check_draws(draws, basis)
    mean, p, precision = _frame(draws, directions)
    dist = mahalanobis(draws, mean, p, precision)
    n_keep = max(1, int(np.ceil(level * draws.shape[0] - 1e-9)))
    kept = draws[np.argsort(dist, kind="stable")[:n_keep]]
    return DrawsSet(kept, basis, kind="draws", level=level)


def credible_cvar(draws, basis: RTVBasis, level: float = LEVEL) -> DrawsSet:
    """All draws as a CVaR set of tail β = 1 − ``level``: pessimistic values are posterior CVaRs.

    Guarantees: every policy's value θᵀm(π) exceeds its pessimistic value with
    posterior probability at least ``level`` (up to Monte Carlo error), the
    policy chosen from these data included (:class:`~bayes_loco.sets.DrawsSet`).
    Convex: both objectives accept it; with the exact objective it is the
    policy that maximises the posterior CVaR_β of its value, a linear program
    of which the hull of draws is the β → 0 end. It bounds values, not θ:
    ``contains`` answers for the CVaR polytope, which holds little of the
    posterior's mass.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    level : float
        In (0, 1).

    Returns
    -------
    DrawsSet
        ``kind="cvar"``, ``tail`` = 1 − level.

    Examples
    --------
    >>> bl.bayes.credible_cvar(post.rtv_draws, post.basis, 0.9)
    DrawsSet(kind='cvar', draws=1000, k=16, level=0.9, tail=0.1)
    """
    level = check_level(level)
    draws = _check_draws(draws, basis)
    return DrawsSet(draws, basis, kind="cvar", level=level, tail=1.0 - level)


def credible_quantile(draws, basis: RTVBasis, level: float = LEVEL) -> QuantileSet:
    """Pointwise lower posterior quantile: ``lower_bound(z)`` = (1 − level) quantile of θ_jᵀz.

    Guarantees: P(θᵀz ≥ bound | data) ≈ ``level`` for each z separately (up to
    Monte Carlo error in the quantile). Does not guarantee anything jointly
    over z, and is not convex: only ``objective="relaxed"`` accepts it.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    level : float
        In (0, 1).

    Returns
    -------
    QuantileSet

    Examples
    --------
    >>> bl.bayes.credible_quantile(post.rtv_draws, post.basis, 0.9)
    QuantileSet(draws=1000, k=16, level=0.9)
    """
    level = check_level(level)
    draws = _check_draws(draws, basis)
    return QuantileSet(draws, basis, level=level)


def credible_family(draws, basis: RTVBasis, population: Population, level: float = LEVEL, *,
                    reference_action: int = 0) -> ValueFamilySet:
    """Simultaneous posterior bands for every row × action value z_uaᵀθ of ``population``.

    The pointwise quantile (:func:`credible_quantile`) corrected for the family: each value's
    draws are ranked, and the band [r-th, (J + 1 − r)-th smallest] uses the largest r for which
    at least ``level`` of the draws lie inside every band at once (a max-rank correction,
    :func:`~bayes_loco.sets.max_rank`), so the posterior and the Wald set's max-∣t∣ family
    (:func:`~bayes_loco.sets.value_family`) bound the same family at the same level.

    Guarantees: P(every value of the family lies in its band | data) ≥ ``level`` up to Monte
    Carlo error (the share of draws inside every band is ≥ ``level`` by construction); the
    family is the population's, fixed before the policy. Does not guarantee anything for other
    values, nor frequentist coverage. Only ``objective="relaxed"`` takes it.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    population : Population
        The population the policy will be solved on: its rows × actions are the family.
    level : float
        In (0, 1).
    reference_action : int
        a_ref, as in :func:`~bayes_loco.pessimistic_policy`.

    Returns
    -------
    ValueFamilySet

    Examples
    --------
    >>> family = bl.bayes.credible_family(post.rtv_draws, post.basis, pop, 0.9)
    >>> family   # the same as post.calibrated_set(0.9, "family", population=pop)
    ValueFamilySet(members=150, k=16, critical=2.878 (max-rank; Bonferroni 3.403), level=0.9, source='draws')
    """
    level = check_level(level)
    draws = _check_draws(draws, basis)
    return draws_family(draws, basis, population, level, reference_action=reference_action)


def credible_set(draws, basis: RTVBasis, level: float = LEVEL, kind: str = "credible", *,
                 directions: np.ndarray | None = None, information: np.ndarray | None = None,
                 population: Population | None = None):
    """The ``kind`` set of :data:`KINDS` from posterior draws of θ_rtv; its ``.kind`` is ``kind``.

    ``"credible"``: :func:`credible_ellipsoid`; ``"sandwich"``: the same with
    the sandwich shape, which needs ``information`` (the Fisher information at
    the posterior mean); ``"draws"``: :func:`credible_draws`; ``"quantile"``:
    :func:`credible_quantile`; ``"cvar"``: :func:`credible_cvar`; ``"family"``:
    :func:`credible_family`, which needs the ``population`` whose values it bounds.
    ``post.calibrated_set(level, kind)`` calls it with the posterior's draws.

    Parameters
    ----------
    draws : ndarray of shape (J, k)
        Posterior draws of θ_rtv (``post.rtv_draws``).
    basis : RTVBasis
        Their coordinates (``post.basis``).
    level : float
        In (0, 1).
    kind : {"credible", "sandwich", "draws", "quantile", "cvar", "family"}
    directions : ndarray of shape (k, k_eff), optional
        As in :func:`credible_ellipsoid`.
    information : ndarray of shape (k, k), optional
        F, for ``kind="sandwich"`` only.
    population : Population, optional
        For ``kind="family"`` only: the population whose row × action values it bounds.

    Returns
    -------
    EllipsoidSet, DrawsSet, QuantileSet or ValueFamilySet

    Examples
    --------
    >>> bl.bayes.credible_set(post.rtv_draws, post.basis, 0.9, "quantile")
    QuantileSet(draws=1000, k=16, level=0.9)
    """
    check_option(kind, "kind", KINDS)
    if (population is None) == (kind == "family"):
        raise ValueError("kind='family' needs the population whose row x action values it bounds "
                         "(population=...)" if kind == "family" else
                         f"population applies to kind='family' only, got kind={kind!r}")
    if kind == "family":
        return credible_family(draws, basis, population, level)
    if kind == "sandwich":
        if information is None:
            raise ValueError("kind='sandwich' needs the Fisher information at the posterior mean "
                             "(information=F, k × k)")
        return credible_ellipsoid(draws, basis, level, directions=directions, information=information)
    if information is not None:
        raise ValueError(f"information (the sandwich shape) applies to kind='sandwich' only, "
                         f"got kind={kind!r}")
    if kind == "credible":
        return credible_ellipsoid(draws, basis, level, directions=directions)
    if kind == "draws":
        return credible_draws(draws, basis, level, directions=directions)
    if kind == "cvar":
        return credible_cvar(draws, basis, level)
    return credible_quantile(draws, basis, level)
