"""Ellipsoids sized for the values of a scope's policies, not for every direction of θ.

A calibrated ellipsoid (Wald, credible) of radius √χ²_k_eff(α) bounds θᵀm from
below for every m at once. A policy's value is one functional θᵀm(π), and the
m(π) that the policies of one scope can reach fill a cone K far narrower than the
whole space (for the global policy of the paper's simulation, the nine actions'
averaged context-feature products): guarding all of it makes the penalty swamp
the value differences, and the global policy collapses onto the reference action
(docs/design.md, "Global pessimism sized for a policy's value").

The radius here guards exactly the directions the policies reach. With
θ̂ − θ ≈ L g, g ~ N(0, I) (L Lᵀ = W⁻¹ on range(W)),

    sup_(m ∈ K) (θ̂ − θ)ᵀm / ‖m‖_W⁻¹ = ‖Π_LᵀK(g)‖,

the length of g's projection onto the cone LᵀK (a non-negative least-squares
problem per draw). Its α-quantile R_α makes θᵀm ≥ θ̂ᵀm − R_α‖m‖_W⁻¹ hold for
every policy of the scope at once with probability α, so it holds for the policy
the solver picks. E‖Π(g)‖² is the statistical dimension δ(K) of the cone
(Amelunxen, Lotz, McCoy & Tropp 2014): the principled effective dimension of the
values, between 1 (one direction) and k_eff (the whole space, where R_α is
√χ²_k_eff(α) again). When the cone is a subspace (some strictly positive
combination of the generators vanishes, a linear program), the length is χ with
the subspace's dimension and no draws are needed: the personalised policies of
the paper's simulation reach every identified direction this way.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog, nnls

from .._validation import check_int, check_level, check_option, rng_from
from ..config import get_config
from ..design import mean_candidate_features
from ..population import SCOPES, Population
from .base import ValueRadius
from .description import chi_radius
from .ellipsoid import EllipsoidSet


def value_directions(ellipsoid: EllipsoidSet, population: Population, *, scope: str = "global",
                     reference_action: int = 0) -> np.ndarray:
    """The generators of K: each unit's averaged z(x, s, a) for every non-reference action, (J, k).

    Every m(π) = Σ_u w_u Σ_a π_ua z̄_ua is a non-negative combination of them
    (the reference action's z̄ is 0), whatever the policy.

    Parameters
    ----------
    ellipsoid : EllipsoidSet
        Supplies the coordinates.
    population : Population
    scope : {"global", "personalised"}
        Units are states (z̄ averaged over the contexts of each) or rows.
    reference_action : int

    Returns
    -------
    ndarray of shape (J, k)
        J = units × (A − 1) generators.

    Examples
    --------
    >>> shifted = problem.population(20, seed=3, contexts_per_state=5, context_law="target")
    >>> bl.sets.value_directions(fit.calibrated_set(0.9), shifted, scope="global").shape  # 20 states × 3
    (60, 16)
    """
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    check_option(scope, "scope", SCOPES)
    reference_action = check_int(reference_action, "reference_action", 0, population.n_actions - 1)
    units = population.units(scope)
    z = mean_candidate_features(ellipsoid, population, units, reference_action)
    z = z.reshape(-1, z.shape[-1])
    norms = np.linalg.norm(z, axis=1)
    return z[norms > get_config()["zero_rtol"] * max(norms.max(initial=0.0), np.finfo(float).tiny)]


def value_radius(ellipsoid: EllipsoidSet, directions: np.ndarray, level: float, *, draws: int = 2000,
                 seed=0) -> ValueRadius:
    """R_α with P(θᵀm ≥ θ̂ᵀm − R_α‖m‖_W⁻¹ for every m in the cone of ``directions``) = α.

    Under the set's Gaussian approximation θ̂ − θ ~ N(0, W⁻¹) (Wald: the
    sampling law of θ̂; credible: the posterior of θ); see the module docstring.

    Parameters
    ----------
    ellipsoid : EllipsoidSet
        Supplies W (its ``precision``); its radius is not used.
    directions : ndarray, shape (J, k)
        Generators of the cone K, e.g. :func:`value_directions`.
    level : float
        α in (0, 1).
    draws : int
        Monte Carlo draws of g; the quantile's relative error is about
        √(α(1 − α)/draws) / (density × R_α), below 1% at the default.
    seed : int or Generator

    Returns
    -------
    ValueRadius
        R_α, the cone's statistical dimension, the full radius √χ²_k_eff(α) and how
        R_α was found.

    Examples
    --------
    >>> shifted = problem.population(20, seed=3, contexts_per_state=5, context_law="target")
    >>> wald = fit.calibrated_set(0.9)
    >>> found = bl.sets.value_radius(wald, bl.sets.value_directions(wald, shifted), 0.9)
    >>> round(found.radius, 1), round(found.full_radius, 2), round(found.statistical_dimension, 1)
    (2.2, 3.66, 1.9)
    """
    if not isinstance(ellipsoid, EllipsoidSet):
        raise TypeError(f"ellipsoid must be an EllipsoidSet, got {type(ellipsoid).__name__}")
    level = check_level(level)
    draws = check_int(draws, "draws", 10)
    directions = np.asarray(directions, float)
    if directions.ndim != 2 or directions.shape[1] != ellipsoid.dim:
        raise ValueError(f"directions must have shape (J, {ellipsoid.dim}), got {directions.shape}")
    if not ellipsoid.identified(directions).all():
        raise ValueError("directions leave range(W): some policy's value is not identified by the data, "
                         "and no radius bounds it")
    full = chi_radius(level, ellipsoid.effective_dim)
    generators = directions @ ellipsoid.factor  # Lᵀm, rows
    keep = np.linalg.norm(generators, axis=1) > 0
    generators = generators[keep]
    if generators.shape[0] == 0:
        raise ValueError("directions are all zero: every policy has the reference action's value")
    if _is_subspace(generators):
        dim = int(np.linalg.matrix_rank(generators))
        return ValueRadius(chi_radius(level, dim), float(dim), full, 0,
                           int(generators.shape[0]))
    rng = rng_from(seed)
    lengths = np.empty(draws)
    for j in range(draws):
        g = rng.standard_normal(generators.shape[1])
        weights, _ = nnls(generators.T, g, maxiter=50 * generators.shape[0])
        lengths[j] = np.linalg.norm(generators.T @ weights)
    return ValueRadius(float(np.quantile(lengths, level)), float(np.mean(lengths**2)), full, draws,
                       int(generators.shape[0]))


def _is_subspace(generators: np.ndarray) -> bool:
    """Whether the cone of the rows is a subspace: Σ_j λ_j n_j = 0 for some λ ≥ 1 (feasibility LP)."""
    n = generators.shape[0]
    scale = np.linalg.norm(generators, axis=1)
    res = linprog(np.zeros(n), A_eq=(generators / scale[:, None]).T, b_eq=np.zeros(generators.shape[1]),
                  bounds=(1.0, None), method="highs")
    return bool(res.status == 0)


def size_for_values(ellipsoid: EllipsoidSet, population: Population, *, scope: str = "global",
                    level: float | None = None, reference_action: int = 0, draws: int = 2000,
                    seed=0) -> EllipsoidSet:
    """``ellipsoid`` with the radius that guards the values of ``scope``'s policies on ``population``.

    The returned set has the same centre θ̂ and shape W, ``radius`` R_α of
    :func:`value_radius` and ``sized_for`` = ``scope``. Guarantee (asymptotic,
    under the set's Gaussian approximation): with probability ``level``, every
    policy π of the scope — the one :func:`~bayes_loco.pessimistic_policy`
    picks included — has true value θ*ᵀm(π) at least its pessimistic value
    under this set. The set no longer covers θ* itself at that level.

    Parameters
    ----------
    ellipsoid : EllipsoidSet
        A calibrated ellipsoid (``wald``, ``credible`` or ``sandwich``).
    population : Population
        The population the policy will be solved on.
    scope : {"global", "personalised"}
    level : float or None
        α; None takes the ellipsoid's own level.
    reference_action : int
        a_ref, as in :func:`~bayes_loco.pessimistic_policy`.
    draws, seed
        As in :func:`value_radius`.

    Returns
    -------
    EllipsoidSet
        ``sized_for=scope``, with the radius R_α and ``sizing`` saying how it was found.

    Examples
    --------
    >>> shifted = problem.population(20, seed=3, contexts_per_state=5, context_law="target")
    >>> wald = fit.calibrated_set(0.9)
    >>> sized = bl.sets.size_for_values(wald, shifted, scope="global")
    >>> round(wald.radius, 2), round(sized.radius, 1)       # θ's radius, and a global policy's values'
    (3.66, 2.2)
    >>> policy = bl.pessimistic_policy(sized, shifted, objective="exact", scope="global")

    The radius takes ``draws`` non-negative least-squares projections onto the cone: 23 s
    for 200 states × 9 actions at the default 2,000 draws, on a busy two-core machine.
    """
    if not isinstance(ellipsoid, EllipsoidSet):
        raise TypeError(f"ellipsoid must be an EllipsoidSet, got {type(ellipsoid).__name__}")
    if level is None:
        if ellipsoid.level is None:
            raise ValueError(f"level: the {ellipsoid.kind!r} set has no level (a tuned penalty); give one")
        level = ellipsoid.level
    directions = value_directions(ellipsoid, population, scope=scope, reference_action=reference_action)
    found = value_radius(ellipsoid, directions, level, draws=draws, seed=seed)
    return ellipsoid.with_radius(found.radius, level=float(level), sized_for=scope, sizing=found)

