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
    units = np.unique(pop.states)
    zu = np.stack([z[pop.states == u].mean(axis=0) for u in units])
    weights = np.array([(pop.states == u).mean() for u in units])
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


def test_nash_welfare_over_draws_matches_a_grid_search():
    """2 units x 2 actions: π is (p_1, p_2) ∈ [0, 1]²; a fine grid brackets the optimum."""
    rng = np.random.default_rng(29)  # an instance whose optimum mixes in both units
    pop = Population(rng.normal(size=(2, 2)), rng.normal(size=(2, 2, 2)), np.arange(2))
    dset = DrawsSet(rng.normal(loc=0.5, size=(6, 4)), VecCoordinates(2, 2))
    floor = -0.5
    zu, weights = unit_features(pop)
    values = np.einsum("uak,jk->jua", zu, dset.draws)  # action 0 is the reference: values 0
    grid = np.linspace(0.0, 1.0, 401)
    p1, p2 = np.meshgrid(grid, grid, indexing="ij")
    rewards = np.stack([p1[None] * values[:, 0, 1, None, None], p2[None] * values[:, 1, 1, None, None]])
    with np.errstate(invalid="ignore", divide="ignore"):
        welfare = (weights[:, None, None, None] * np.log(rewards - floor)).sum(axis=0)
    best = np.nanmax(np.where(np.isfinite(welfare).all(axis=0), welfare.min(axis=0), -np.inf))
    policy = pessimistic_policy(dset, pop, objective="exact", welfare="nash", floor=floor)
    assert policy.welfare == "nash"
    assert best > np.log(-floor) + 1e-3  # the reference alone is not optimal here
    assert policy.n_mixed == 2  # the grid optimum (0.41, 0.34) mixes in both units
    assert best - 1e-7 <= policy.objective_value <= best + 2e-3  # grid step 1/400
    achieved = (weights * np.log(np.einsum("ua,jua->ju", policy.probabilities, values) - floor)).sum(axis=1)
    assert policy.objective_value == pytest.approx(achieved.min(), abs=1e-9)


def test_nash_welfare_pointwise_picks_the_best_lower_bound():
    pop, dset = instance(3, "personalised")
    relaxed = pessimistic_policy(dset, pop)
    nash = pessimistic_policy(dset, pop, welfare="nash", floor=-1.0)
    assert np.array_equal(nash.actions, relaxed.actions)  # log is increasing: same argmax per unit
    zu, weights = unit_features(pop)
    chosen = np.take_along_axis((zu @ dset.draws.T).min(axis=-1), nash.actions[:, None], axis=1)[:, 0]
    assert nash.objective_value == pytest.approx(weights @ np.log(chosen + 1.0))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"welfare": "rawlsian"}, "welfare"), ({"floor": 0.0}, "floor"),
    ({"floor": 0.5}, "floor")])
def test_welfare_arguments_are_validated(kwargs, match):
    pop, dset = instance(0, "personalised")
    with pytest.raises(ValueError, match=match):
        pessimistic_policy(dset, pop, **kwargs)


# ------------------------------------------------------------------------------ CVaR sets (tail β > 0)

def cvar_policy_lp(draws, zu, weights, tail):
    """max_π CVaR_β(θ_jᵀ m(π)) by Rockafellar–Uryasev: max t − Σ_j s_j / (βJ), s_j ≥ t − θ_jᵀm(π), s ≥ 0."""
    n_units, n_actions, _ = zu.shape
    pi = cp.Variable((n_units, n_actions), nonneg=True)
    t, s = cp.Variable(), cp.Variable(len(draws), nonneg=True)
    values = np.einsum("uak,jk->jua", zu, draws)
    cons = [cp.sum(pi, axis=1) == 1]
    cons += [s[j] >= t - cp.sum(cp.multiply(weights[:, None] * values[j], pi)) for j in range(len(draws))]
    cp.Problem(cp.Maximize(t - cp.sum(s) / (tail * len(draws))), cons).solve(solver=cp.CLARABEL, **CLARABEL)
    return float(t.value - s.value.sum() / (tail * len(draws)))


@pytest.mark.parametrize("tail", [0.25, 0.3, 0.5])
def test_cvar_lower_bound_is_the_mean_of_the_lowest_tail(tail):
    rng = np.random.default_rng(11)
    draws = rng.normal(size=(20, 4))
    cset = DrawsSet(draws, VecCoordinates(2, 2), kind="cvar", tail=tail)
    z = rng.normal(size=(6, 4))
    # Oracle: the LP min over the capped simplex, by cvxpy; and for βJ whole, the mean of the βJ lowest.
    for zz, got in zip(z, cset.lower_bound(z), strict=True):
        q = cp.Variable(20, nonneg=True)
        prob = cp.Problem(cp.Minimize((draws @ zz) @ q), [cp.sum(q) == 1, q <= 1 / (tail * 20)])
        prob.solve(solver=cp.CLARABEL, **CLARABEL)
        assert got == pytest.approx(prob.value, abs=1e-7)
        if (tail * 20) % 1 == 0:
            assert got == pytest.approx(np.sort(draws @ zz)[: int(tail * 20)].mean(), abs=1e-12)


def test_cvar_set_ends_are_the_hull_and_the_mean():
    rng = np.random.default_rng(12)
    draws = rng.normal(size=(15, 3))
    z = rng.normal(size=(5, 3))
    coords = VecCoordinates(1, 3)
    assert np.allclose(DrawsSet(draws, coords, tail=1.0).lower_bound(z), z @ draws.mean(axis=0))
    assert np.allclose(DrawsSet(draws, coords, tail=1 / 15).lower_bound(z), (z @ draws.T).min(axis=1))
    # The mean is in every CVaR set; a lone draw only in those with cap 1.
    assert DrawsSet(draws, coords, tail=0.5).contains(draws.mean(axis=0))
    assert not DrawsSet(draws, coords, tail=0.5).contains(draws[0])
    assert DrawsSet(draws, coords).contains(draws[0])


@pytest.mark.parametrize("scope", ["personalised", "global"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_cvar_policy_maximises_the_cvar_of_its_value(seed, scope):
    pop, hull = instance(seed, scope)
    cset = DrawsSet(hull.draws, hull.coordinates, kind="cvar", level=0.75, tail=0.25)
    zu, weights = unit_features(pop)
    optimum = cvar_policy_lp(cset.draws, zu, weights, 0.25)
    policy = pessimistic_policy(cset, pop, objective="exact", scope=scope, tol=1e-8)
    assert policy.status is PolicyStatus.SOLVED
    assert policy.pessimistic_value == pytest.approx(optimum, abs=1e-6)
    assert policy.certificate.upper == pytest.approx(optimum, abs=1e-6)
    # Its reported value is the CVaR of its own value over the draws; the hull's optimum is below it.
    m = np.einsum("u,ua,uak->k", weights, policy.probabilities, zu)
    assert policy.pessimistic_value == pytest.approx(np.sort(cset.draws @ m)[:3].mean(), abs=1e-9)
    assert policy.pessimistic_value >= policy_space_lp(hull.draws, zu, weights) - 1e-7
    assert cset.contains(policy.theta)


def test_cvar_set_refuses_exact_nash_and_a_bad_tail():
    pop, hull = instance(0, "personalised")
    cset = DrawsSet(hull.draws, hull.coordinates, kind="cvar", tail=0.5)
    with pytest.raises(TypeError, match="hull of draws"):
        pessimistic_policy(cset, pop, objective="exact", welfare="nash")
    with pytest.raises(ValueError, match=r"tail \(β\)"):
        DrawsSet(hull.draws, hull.coordinates, tail=1.5)
