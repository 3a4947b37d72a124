"""DrawsSet (convex hull of draws) and QuantileSet against independent oracles.

Oracles: the policy-space LP  max_π min_j θ_jᵀ m(π)  and the epigraph LP
min_{λ ∈ simplex} Σ_u w_u max_a (Σ_j λ_j θ_j)ᵀ z_ua, both solved by cvxpy with
Clarabel; z built by explicit loops; brute-force enumeration of the hull's vertices.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from bayes_loco import (
    DrawsSet,
    PolicyStatus,
    Population,
    QuantileSet,
    VecCoordinates,
    pessimistic_policy,
)

CLARABEL = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def instance(seed, scope, n_units=6, n_actions=3, d_x=2, d_phi=3, n_draws=12):
    rng = np.random.default_rng(seed)
    groups = np.arange(n_units) if scope == "personalised" else np.repeat(np.arange(n_units // 2), 2)
    n = groups.size
    contexts = rng.normal(size=(n, d_x))
    features = rng.normal(size=(n, n_actions, d_phi))
    draws = rng.normal(loc=0.3, size=(n_draws, d_x * d_phi))
    return Population(contexts, features, groups), DrawsSet(draws, VecCoordinates(d_x, d_phi))


def unit_features(pop, reference=0):
    """z_ua = vec(x (φ_a − φ_ref)ᵀ) averaged over the rows of each unit, by explicit loops."""
    n, n_actions, d_phi = pop.features.shape
    d_x = pop.contexts.shape[1]
    z = np.zeros((n, n_actions, d_x * d_phi))
    for i in range(n):
        for a in range(n_actions):
            z[i, a] = np.outer(pop.contexts[i], pop.features[i, a] - pop.features[i, reference]).ravel()
    units = np.unique(pop.groups)
    zu = np.stack([z[pop.groups == u].mean(axis=0) for u in units])
    weights = np.array([(pop.groups == u).mean() for u in units])
    return zu, weights


def policy_space_lp(draws, zu, weights):
    """max_π min_j θ_jᵀ m(π): the exact pessimistic value over stochastic policies."""
    n_units, n_actions, _ = zu.shape
    pi = cp.Variable((n_units, n_actions), nonneg=True)
    s = cp.Variable()
    values = np.einsum("uak,jk->jua", zu, draws)
    cons = [cp.sum(pi, axis=1) == 1]
    cons += [s <= cp.sum(cp.multiply(weights[:, None] * values[j], pi)) for j in range(len(draws))]
    cp.Problem(cp.Maximize(s), cons).solve(solver=cp.CLARABEL, **CLARABEL)
    return float(s.value)


def epigraph_lp(draws, zu, weights):
    """min over λ on the simplex of Σ_u w_u max_a (λᵀ draws) z_ua."""
    n_units, n_actions, _ = zu.shape
    lam = cp.Variable(len(draws), nonneg=True)
    t = cp.Variable(n_units)
    theta = draws.T @ lam
    cons = [cp.sum(lam) == 1] + [t[u] >= zu[u, a] @ theta for u in range(n_units) for a in range(n_actions)]
    cp.Problem(cp.Minimize(weights @ t), cons).solve(solver=cp.CLARABEL, **CLARABEL)
    return float(weights @ t.value)


@pytest.mark.parametrize("scope", ["personalised", "global"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_exact_hull_matches_the_policy_space_lp(seed, scope):
    pop, dset = instance(seed, scope)
    zu, weights = unit_features(pop)
    optimum = policy_space_lp(dset.draws, zu, weights)
    assert optimum == pytest.approx(epigraph_lp(dset.draws, zu, weights), abs=1e-7)
    policy = pessimistic_policy(dset, pop, objective="exact", scope=scope, tol=1e-8)
    assert policy.status is PolicyStatus.SOLVED
    assert policy.pessimistic_value == pytest.approx(optimum, abs=1e-6)
    assert policy.certificate.upper == pytest.approx(optimum, abs=1e-6)
    assert np.allclose(policy.probabilities.sum(axis=1), 1.0)
    assert (policy.probabilities >= 0).all()
    # the reported pessimistic value is the policy's own worst case over the draws
    m = np.einsum("u,ua,uak->k", weights, policy.probabilities, zu)
    assert policy.pessimistic_value == pytest.approx((dset.draws @ m).min(), abs=1e-9)
    # the minimising θ lies in the hull and V(θ) equals the upper bound
    assert dset.contains(policy.theta)
    assert policy.certificate.upper == pytest.approx(weights @ (zu @ policy.theta).max(axis=1), abs=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_exact_hull_is_at_least_as_good_as_relaxed(seed):
    pop, dset = instance(100 + seed, "personalised", n_units=8, n_draws=20)
    relaxed = pessimistic_policy(dset, pop, objective="relaxed")
    exact = pessimistic_policy(dset, pop, objective="exact", tol=1e-8)
    assert exact.pessimistic_value >= relaxed.pessimistic_value - 1e-9
    # relaxed is the mean of pointwise minima: never above the policy's joint worst case
    assert relaxed.objective_value <= relaxed.pessimistic_value + 1e-12
    assert exact.pessimistic_value >= -1e-12  # the reference action is always available


def test_draws_set_lower_bound_is_the_minimum_over_vertices():
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(30, 4))
    dset = DrawsSet(draws, VecCoordinates(2, 2))
    z = rng.normal(size=(7, 4))
    expected = np.array([min(d @ zz for d in draws) for zz in z])
    assert np.allclose(dset.lower_bound(z), expected)
    # any convex combination is inside, a point beyond a vertex is not
    lam = rng.dirichlet(np.ones(30))
    assert dset.contains(lam @ draws)
    assert not dset.contains(draws.mean(axis=0) + 10 * (draws[0] - draws.mean(axis=0)))


def test_quantile_set_is_the_pointwise_lower_quantile():
    rng = np.random.default_rng(6)
    draws = rng.normal(size=(2001, 3))
    qset = QuantileSet(draws, VecCoordinates(1, 3), level=0.9)
    z = np.array([1.0, 0.0, 0.0])
    # θ_1 ~ N(0, 1): its 10% quantile is −1.2816; the tolerance is 4 s.e. of a sample quantile
    se = np.sqrt(0.1 * 0.9 / 2001) / 0.1755
    assert qset.lower_bound(z) == pytest.approx(-1.2816, abs=4 * se)
    assert qset.lower_bound(z) == pytest.approx(np.sort(draws[:, 0])[200], abs=0.02)


def test_quantile_set_is_refused_by_the_exact_objective():
    pop, dset = instance(0, "personalised")
    qset = QuantileSet(dset.draws, dset.coordinates, level=0.9)
    with pytest.raises(TypeError, match=r"EllipsoidSet.*DrawsSet"):
        pessimistic_policy(qset, pop, objective="exact")
    relaxed = pessimistic_policy(qset, pop, objective="relaxed")
    assert relaxed.probabilities.shape == (pop.n, pop.n_actions)


@pytest.mark.parametrize(("draws", "match"), [
    (np.zeros((0, 3)), "non-empty"), (np.zeros(3), "non-empty"), (np.full((2, 3), np.nan), "NaN"),
])
def test_draws_set_rejects_bad_draws(draws, match):
    with pytest.raises(ValueError, match=match):
        DrawsSet(draws, VecCoordinates(1, 3))


@pytest.mark.parametrize(("level", "match"), [(0.0, "level"), (1.0, "level")])
def test_quantile_set_rejects_bad_level(level, match):
    with pytest.raises(ValueError, match=match):
        QuantileSet(np.zeros((5, 3)), VecCoordinates(1, 3), level=level)
