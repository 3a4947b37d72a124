"""Policy value, optimal value and sub-optimality against explicit loops and brute force."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from bayes_loco import (
    EllipsoidSet,
    Policy,
    Population,
    VecCoordinates,
    greedy_policy,
    optimal_value,
    pessimistic_policy,
    policy_value,
    relative_value,
    suboptimality,
)

SCOPES = ("personalised", "global")


def make_population(seed, n_states=4, d_x=3, d_phi=4, n_actions=3, max_size=4):
    """Groups share a state (the same φ); contexts differ within a group."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_size + 1, size=n_states)
    groups = np.repeat(np.arange(n_states), sizes)
    groups = groups[rng.permutation(groups.size)]
    phi = rng.normal(size=(n_states, n_actions, d_phi))[groups]
    x = rng.normal(size=(groups.size, d_x))
    return Population(x, phi, groups), rng.normal(size=(d_x, d_phi))


def explicit_rewards(theta, pop):
    return np.array([[pop.contexts[i] @ theta @ pop.features[i, a] for a in range(pop.n_actions)]
                     for i in range(pop.n)])


def units_of(pop, scope):
    return np.arange(pop.n) if scope == "personalised" else pop.states


def make_policy(probabilities, pop, scope):
    return Policy(np.asarray(probabilities, float), units_of(pop, scope), scope, "relaxed", 0, 0.0, 0.0)


def loop_value(probabilities, pop, scope, r):
    units = units_of(pop, scope)
    return sum(probabilities[units[i]] @ r[i] for i in range(pop.n)) / pop.n


# ---------------------------------------------------------------------------- policy_value


@pytest.mark.parametrize("scope", SCOPES)
def test_uniform_policy_value_is_mean_reward(scope):
    pop, theta = make_population(0)
    n_units = pop.n if scope == "personalised" else pop.n_states
    uniform = make_policy(np.full((n_units, 3), 1 / 3), pop, scope)
    assert policy_value(uniform, theta, pop) == pytest.approx(explicit_rewards(theta, pop).mean(), rel=1e-12)


@pytest.mark.parametrize("scope", SCOPES)
def test_stochastic_policy_value_matches_loops(scope):
    pop, theta = make_population(1)
    n_units = pop.n if scope == "personalised" else pop.n_states
    probs = np.random.default_rng(2).dirichlet(np.ones(3), size=n_units)
    r = explicit_rewards(theta, pop)
    assert policy_value(make_policy(probs, pop, scope), theta, pop) == pytest.approx(
        loop_value(probs, pop, scope, r), rel=1e-12)


def test_global_policy_and_its_rows_have_the_same_value():
    pop, theta = make_population(3)
    probs = np.random.default_rng(4).dirichlet(np.ones(3), size=pop.n_states)
    glob = make_policy(probs, pop, "global")
    rows = make_policy(glob.row_probabilities, pop, "personalised")
    assert policy_value(glob, theta, pop) == pytest.approx(policy_value(rows, theta, pop), rel=1e-13)


@pytest.mark.parametrize(("scope", "reference"), [("personalised", 0), ("global", 2)])
def test_relative_value_is_the_value_above_always_playing_the_reference(scope, reference):
    pop, theta = make_population(6)
    n_units = pop.n if scope == "personalised" else pop.n_states
    probs = np.random.default_rng(7).dirichlet(np.ones(3), size=n_units)
    policy = Policy(probs, units_of(pop, scope), scope, "exact", reference, 0.0, 0.0)
    r = explicit_rewards(theta, pop)
    expected = loop_value(probs, pop, scope, r - r[:, [reference]])
    assert relative_value(policy, theta, pop) == pytest.approx(expected, rel=1e-12)
    always = Policy(np.eye(3)[[reference] * n_units], units_of(pop, scope), scope, "exact", reference,
                    0.0, 0.0)
    assert relative_value(always, theta, pop) == pytest.approx(0.0, abs=1e-12)


# ---------------------------------------------------------------------------- optimal_value


@pytest.mark.parametrize("scope", SCOPES)
def test_optimal_value_is_the_best_deterministic_policy(scope):
    """Brute force over every deterministic policy (A^units of them)."""
    pop, theta = make_population(5, n_states=3, max_size=2)
    r = explicit_rewards(theta, pop)
    n_units = pop.n if scope == "personalised" else pop.n_states
    assert n_units <= 6
    eye = np.eye(3)
    best = max(loop_value(eye[list(c)], pop, scope, r) for c in itertools.product(range(3), repeat=n_units))
    assert optimal_value(theta, pop, scope) == pytest.approx(best, rel=1e-12)


def test_optimal_global_is_at_most_personalised():
    for seed in range(6, 12):
        pop, theta = make_population(seed)
        personal = optimal_value(theta, pop, "personalised")
        glob = optimal_value(theta, pop, "global")
        assert glob <= personal + 1e-12
    # contexts within a group that disagree on the best action make the inequality strict
    r = explicit_rewards(theta, pop)
    disagree = any(np.unique(r[pop.states == g].argmax(axis=1)).size > 1 for g in range(pop.n_states))
    assert disagree and glob < personal - 1e-6
    # personalised scope is the default
    assert optimal_value(theta, pop) == personal


def test_optimal_value_rejects_unknown_scope():
    pop, theta = make_population(12)
    with pytest.raises(ValueError, match="scope"):
        optimal_value(theta, pop, "personalized")


# ---------------------------------------------------------------------------- suboptimality


@pytest.mark.parametrize("scope", SCOPES)
def test_greedy_under_the_truth_is_optimal(scope):
    pop, theta = make_population(13)
    greedy = greedy_policy(theta, pop, scope=scope)
    assert abs(suboptimality(greedy, theta, pop)) <= 1e-12
    assert policy_value(greedy, theta, pop) == pytest.approx(optimal_value(theta, pop, scope), rel=1e-12)


@pytest.mark.parametrize("scope", SCOPES)
def test_suboptimality_is_nonnegative_and_positive_for_a_wrong_model(scope):
    pop, theta = make_population(14, n_states=6)
    rng = np.random.default_rng(15)
    n_units = pop.n if scope == "personalised" else pop.n_states
    r = explicit_rewards(theta, pop)
    best = optimal_value(theta, pop, scope)
    wrong = theta + rng.normal(scale=2.0, size=theta.shape)
    eset = EllipsoidSet(wrong.ravel(), np.eye(theta.size), 0.5, VecCoordinates(*theta.shape))
    policies = [greedy_policy(wrong, pop, scope=scope),
                pessimistic_policy(eset, pop, scope=scope),
                pessimistic_policy(eset, pop, scope=scope, objective="exact"),
                make_policy(rng.dirichlet(np.ones(3), size=n_units), pop, scope),
                make_policy(np.eye(3)[rng.integers(0, 3, size=n_units)], pop, scope)]
    subs = []
    for policy in policies:
        sub = suboptimality(policy, theta, pop)
        assert sub >= -1e-12
        expected = best - loop_value(policy.probabilities, pop, scope, r)
        assert sub == pytest.approx(expected, abs=1e-12)
        subs.append(sub)
    assert subs[0] > 1e-3  # the wrong model's greedy policy loses something


def test_truth_may_be_an_object_with_theta():
    pop, theta = make_population(16)
    policy = greedy_policy(np.zeros_like(theta) + 0.1, pop)
    holder = SimpleNamespace(theta=theta)
    assert policy_value(policy, holder, pop) == policy_value(policy, theta, pop)
    assert optimal_value(holder, pop, "global") == optimal_value(theta, pop, "global")
    assert suboptimality(policy, holder, pop) == suboptimality(policy, theta, pop)
    assert policy_value(policy, theta.tolist(), pop) == policy_value(policy, theta, pop)


# ---------------------------------------------------------------------------- bad input


def test_truth_with_the_wrong_shape_raises():
    pop, theta = make_population(17)
    policy = greedy_policy(theta, pop)
    for bad in (theta.T, theta[:, :-1], theta.ravel(), SimpleNamespace(theta=theta[1:])):
        with pytest.raises(ValueError, match="shape"):
            policy_value(policy, bad, pop)
        with pytest.raises(ValueError, match="shape"):
            optimal_value(bad, pop)
        with pytest.raises(ValueError, match="shape"):
            suboptimality(policy, bad, pop)


def test_policy_from_another_population_raises():
    pop, theta = make_population(18)
    other, _ = make_population(19, n_states=7)
    assert other.n != pop.n
    policy = greedy_policy(theta, other)
    with pytest.raises(ValueError, match="rows"):
        policy_value(policy, theta, pop)
    with pytest.raises(ValueError, match="rows"):
        suboptimality(policy, theta, pop)
