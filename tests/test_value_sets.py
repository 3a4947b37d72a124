"""Ellipsoids sized for a scope's policy values (bayes_loco.sets.value) against closed forms and brute force.

The radius is the α-quantile of the length of g's projection onto a cone (g ~ N(0, I)):
for a ray that length is max(g₁, 0); for the whole space it is χ_k; for the positive
orthant Σ max(g_i, 0)² is chi-bar-squared with binomial weights. Tolerances are four
Monte Carlo standard errors of a sample quantile at the number of draws used.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, special, stats

import bayes_loco as bl
from bayes_loco import EllipsoidSet, VecCoordinates
from bayes_loco.sets import size_for_values, value_directions, value_radius

DRAWS = 4000


def quantile_se(level, density, draws=DRAWS):
    return np.sqrt(level * (1 - level) / draws) / density


def ellipsoid(k, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(3 * k, k))
    return EllipsoidSet(np.zeros(k), scale * a.T @ a, 1.0, VecCoordinates(1, k), kind="wald", level=0.9)


def test_a_single_direction_needs_the_one_sided_normal_quantile():
    e = ellipsoid(4)
    found = value_radius(e, np.array([[1.0, -2.0, 0.5, 0.0]]), 0.9, draws=DRAWS, seed=1)
    expected = stats.norm.ppf(0.9)
    assert found.radius == pytest.approx(expected, abs=4 * quantile_se(0.9, stats.norm.pdf(expected)))
    assert found.statistical_dimension == pytest.approx(0.5, abs=0.06)  # E max(g, 0)² = 1/2
    assert found.full_radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.9, 4)))
    assert found.generators == 1


def test_a_subspace_of_directions_needs_the_chi_radius_of_its_dimension():
    """A cone that is a subspace (±e_i) gives χ of its dimension exactly, without draws; the Monte Carlo path
    forced on the same cone (a copy that is not recognised) agrees within its error."""
    from bayes_loco.sets import value as value_module

    k = 5
    e = ellipsoid(k, seed=2)
    whole = value_radius(e, np.vstack([np.eye(k), -np.eye(k)]), 0.9)
    assert whole.draws == 0 and whole.radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.9, k)), rel=1e-12)
    assert whole.radius == pytest.approx(whole.full_radius, rel=1e-12) and whole.statistical_dimension == k
    plane = value_radius(e, np.vstack([np.eye(k)[:2], -np.eye(k)[:2], np.eye(k)[:2] + 0.0]), 0.9)
    assert plane.draws == 0 and plane.radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.9, 2)), rel=1e-12)
    original = value_module._is_subspace
    try:
        value_module._is_subspace = lambda generators: False
        sampled = value_radius(e, np.vstack([np.eye(k), -np.eye(k)]), 0.9, draws=DRAWS, seed=3)
    finally:
        value_module._is_subspace = original
    density = stats.chi.pdf(whole.radius, k)
    assert sampled.radius == pytest.approx(whole.radius, abs=4 * quantile_se(0.9, density))
    assert sampled.statistical_dimension == pytest.approx(k, rel=0.05)


def test_an_orthant_of_the_whitened_space_is_chi_bar_squared():
    """Generators L⁻ᵀ e_i make LᵀK the positive orthant: P(‖Π g‖² ≤ t) = Σ_j C(k, j) 2⁻ᵏ F_{χ²_j}(t)."""
    k = 6
    e = ellipsoid(k, seed=4)
    directions = np.linalg.solve(e.factor.T, np.eye(k)).T  # rows m_i with Lᵀ m_i = e_i
    assert np.allclose(directions @ e.factor, np.eye(k))

    def cdf(t):
        return sum(special.comb(k, j) * 0.5**k * (stats.chi2.cdf(t, j) if j else 1.0) for j in range(k + 1))

    t90 = optimize.brentq(lambda t: cdf(t) - 0.9, 1e-6, 100)
    expected = np.sqrt(t90)
    density = (cdf(t90 + 1e-4) - cdf(t90 - 1e-4)) / 2e-4 * 2 * expected  # of ‖Π g‖, by the chain rule
    found = value_radius(e, directions, 0.9, draws=DRAWS, seed=5)
    assert found.radius == pytest.approx(expected, abs=4 * quantile_se(0.9, density))
    assert found.statistical_dimension == pytest.approx(k / 2, rel=0.06)


def test_radius_is_invariant_to_scaling_w_and_the_directions():
    e = ellipsoid(5, seed=6)
    directions = np.random.default_rng(7).normal(size=(8, 5))
    base = value_radius(e, directions, 0.8, draws=500, seed=8)
    scaled = value_radius(replace(e, precision=9.0 * e.precision), 3.0 * directions, 0.8, draws=500, seed=8)
    assert scaled.radius == pytest.approx(base.radius, rel=1e-9)
    assert scaled.statistical_dimension == pytest.approx(base.statistical_dimension, rel=1e-9)


def test_projection_length_is_the_largest_normalised_value_over_the_cone():
    """Brute force: the sup of gᵀn/‖n‖ over many random non-negative combinations never exceeds ‖Π g‖,
    and comes within 1% of it."""
    from scipy.optimize import nnls

    rng = np.random.default_rng(9)
    generators = rng.normal(size=(4, 3)) + np.array([1.5, 0.0, 0.0])
    for _ in range(5):
        g = rng.normal(size=3)
        weights, _ = nnls(generators.T, g)
        projected = np.linalg.norm(generators.T @ weights)
        mixes = rng.dirichlet(0.3 * np.ones(4), size=200_000) @ generators
        brute = max(0.0, float((mixes @ g / np.linalg.norm(mixes, axis=1)).max()))
        assert brute <= projected + 1e-9
        assert brute == pytest.approx(projected, abs=0.01 * max(1.0, projected))


def test_global_values_need_a_smaller_radius_than_theta_and_keep_their_guarantee():
    """On the paper's simulation the global policy's value directions have a small statistical dimension;
    the guarantee (every policy's value above its bound) holds in the Gaussian model at the level asked."""
    problem = bl.simulate.paper_problem(rank=3, imbalance=3)
    data = problem.sample(3000, seed=0)
    prs = bl.fit_prs(data, 3, ridge=1.0)
    wald = prs.calibrated_set(0.9, "wald")
    pop = problem.population(40, seed=1, contexts_per_state=10, context_law="shifted")
    sized = size_for_values(wald, pop, scope="global", draws=1000, seed=2)
    assert sized.sized_for == "global" and sized.level == 0.9 and sized.kind == "wald"
    assert np.array_equal(sized.center, wald.center) and sized.precision is wald.precision
    assert sized.radius < 0.6 * wald.radius
    assert 1.0 < sized.sizing.statistical_dimension < 0.5 * wald.effective_dim
    assert "sized_for='global'" in repr(sized)
    # Coverage in the Gaussian model: θ = θ̂ − L g; the event "every policy's value ≥ its bound" is
    # "max over generators' cone of gᵀn/‖n‖ ≤ R", checked here on the generators and their mean
    # (a necessary condition), over 400 draws: at least 90% minus four binomial s.e.
    directions = value_directions(wald, pop, scope="global")
    rng = np.random.default_rng(3)
    gens = directions @ wald.factor
    unit = gens / np.linalg.norm(gens, axis=1, keepdims=True)
    g = rng.standard_normal((400, gens.shape[1]))
    held = (g @ unit.T).max(axis=1) <= sized.radius
    assert held.mean() >= 0.9 - 4 * np.sqrt(0.09 / 400)
    # Policies sized this way do not collapse onto the reference action.
    policy = bl.pessimistic_policy(sized, pop, objective="exact", scope="global")
    assert policy.actions.min() > 0


def test_value_sizing_rejects_bad_input():
    e = ellipsoid(3)
    with pytest.raises(TypeError, match="ellipsoid must be an EllipsoidSet"):
        value_radius("wald", np.eye(3), 0.9)
    with pytest.raises(ValueError, match=r"directions must have shape \(J, 3\)"):
        value_radius(e, np.eye(4), 0.9)
    with pytest.raises(ValueError, match="level"):
        value_radius(e, np.eye(3), 1.0)
    with pytest.raises(ValueError, match="all zero"):
        value_radius(e, np.zeros((2, 3)), 0.9)
    flat = replace(e, precision=np.diag([1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="leave range"):
        value_radius(flat, np.array([[0.0, 0.0, 1.0]]), 0.9)
    pop = bl.Population(np.ones((2, 1)), np.random.default_rng(0).normal(size=(2, 2, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="has no level"):
        size_for_values(replace(e, level=None), pop)
    with pytest.raises(ValueError, match="scope"):
        size_for_values(e, pop, scope="everyone")
