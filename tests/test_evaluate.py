"""Policy value, optimal value and sub-optimality, and the held-out metrics, against loops and brute force."""

from __future__ import annotations

import itertools
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import statsmodels.api as sm

import bayes_loco as bl
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
from bayes_loco.evaluate import accuracy, brier, calibration_curve, log_loss, score

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


# ---------------------------------------------------------------- held-out metrics without a truth



def labelled(seed, n=500, ties=0.2):
    """Labels in {0, ½, 1} (a share ``ties`` of ties), p in (0, 1) with some exactly ½, and weights."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(float)
    y[rng.random(n) < ties] = 0.5
    p = rng.uniform(0.01, 0.99, n)
    p[rng.random(n) < 0.05] = 0.5
    return y, p, rng.uniform(0.5, 2.0, n)


def test_log_loss_of_binary_labels_is_statsmodels_binomial_loglike():
    y, p, w = labelled(0, ties=0.0)
    obs = sm.families.Binomial().loglike_obs(y, p)
    assert log_loss(y, p) == pytest.approx(-np.mean(obs), rel=1e-12)
    assert log_loss(y, p, w) == pytest.approx(-np.sum(w * obs) / np.sum(w), rel=1e-12)


def test_log_loss_with_ties_counts_a_tie_half_each_way():
    y, p, w = labelled(1)
    def term(yt, pt):
        return -(yt * math.log(pt) + (1 - yt) * math.log(1 - pt))
    loop = [term(a, b) for a, b in zip(y, p, strict=True)]
    assert log_loss(y, p) == pytest.approx(sum(loop) / len(loop), rel=1e-12)
    weighted = sum(a * b for a, b in zip(w, loop, strict=True)) / sum(w)
    assert log_loss(y, p, w) == pytest.approx(weighted, rel=1e-12)
    # a tie costs at least log 2 whatever is predicted, reached at p = ½
    assert log_loss([0.5], [0.5]) == pytest.approx(math.log(2))
    assert log_loss([0.5], [0.9]) > math.log(2)


def test_log_loss_clips_certain_misses():
    assert log_loss([1, 0], [0.0, 1.0]) == pytest.approx(-math.log(bl.get_config()["eps"]))
    assert np.isfinite(log_loss([1], [0.0]))


def test_accuracy_and_brier_against_loops():
    y, p, w = labelled(2)

    def hit(yt, pt):
        if yt == 0.5 or pt == 0.5:
            return 0.5
        return 1.0 if (pt > 0.5 and yt == 1) or (pt < 0.5 and yt == 0) else 0.0

    hits = [hit(a, b) for a, b in zip(y, p, strict=True)]
    assert accuracy(y, p) == pytest.approx(np.mean(hits), rel=1e-12)
    assert accuracy(y, p, w) == pytest.approx(np.dot(w, hits) / w.sum(), rel=1e-12)
    squares = [(b - a) ** 2 for a, b in zip(y, p, strict=True)]
    assert brier(y, p) == pytest.approx(np.mean(squares), rel=1e-12)
    assert brier(y, p, w) == pytest.approx(np.dot(w, squares) / w.sum(), rel=1e-12)
    assert accuracy([0.5, 1, 0, 1], [0.9, 0.5, 0.2, 0.3]) == pytest.approx((0.5 + 0.5 + 1 + 0) / 4)


def test_metrics_read_labels_and_weights_from_preference_data():
    y, p, w = labelled(3, n=50)
    data = bl.PreferenceData(np.ones((50, 1)), np.ones((50, 1)), y, weights=w)
    for metric in (log_loss, accuracy, brier):
        assert metric(data, p) == pytest.approx(metric(y, p, w), rel=1e-14)
    with pytest.raises(ValueError, match="weights were given twice"):
        log_loss(data, p, w)


@pytest.mark.parametrize("weighted", [False, True])
def test_counted_rows_score_as_the_comparisons_they_stand_for(weighted):
    """Each metric and the reliability curve (counts, means, standard errors) of rows given f_t times
    equal those of the same rows counted f_t, with or without sampling weights."""
    y, p, w = labelled(6, n=60)
    f = 1 + np.arange(60) % 4
    rows = np.repeat(np.arange(60), f)
    weights = w if weighted else None
    counted = bl.PreferenceData(np.ones((60, 1)), np.ones((60, 1)), y, counts=f, weights=weights)
    expanded = bl.PreferenceData(np.ones((rows.size, 1)), np.ones((rows.size, 1)), y[rows],
                                 weights=None if weights is None else w[rows])
    for metric in (log_loss, accuracy, brier):
        assert metric(counted, p) == pytest.approx(metric(expanded, p[rows]), rel=1e-12)
    a, b = calibration_curve(counted, p, bins=4), calibration_curve(expanded, p[rows], bins=4)
    assert a["count"].tolist() == b["count"].tolist() and a["count"].sum() == rows.size
    columns = ["predicted", "observed", "std_err"]
    np.testing.assert_allclose(a[columns], b[columns], rtol=1e-12)


@pytest.mark.parametrize(("args", "error", "match"), [
    (([0, 1], [0.5]), ValueError, "p has 1 entries"),
    (([0, 1], [0.5, 1.2]), ValueError, r"p\[1\] = 1.2"),
    (([0, 2], [0.5, 0.5]), ValueError, r"labels\[1\] = 2"),
    (([0, 1], [0.5, np.nan]), ValueError, "NaN"),
    (([0, 1], [0.5, 0.5], [1.0, -1.0]), ValueError, r"weights\[1\]"),
])
def test_bad_metric_arguments_name_themselves(args, error, match):
    for metric in (log_loss, accuracy, brier, calibration_curve):
        with pytest.raises(error, match=match):
            metric(*args[:2], weights=args[2] if len(args) > 2 else None)


def test_calibration_curve_against_a_loop():
    y, p, w = labelled(4)
    curve = calibration_curve(y, p, bins=5, weights=w)
    for row in curve.itertuples():
        inside = (p >= row.lower) & ((p < row.upper) if row.upper < 1 else (p <= 1))
        wb, yb = w[inside], y[inside]
        mean = np.dot(wb, yb) / wb.sum()
        assert row.count == inside.sum()
        assert row.predicted == pytest.approx(np.dot(wb, p[inside]) / wb.sum(), rel=1e-12)
        assert row.observed == pytest.approx(mean, rel=1e-12)
        n = inside.sum()
        spread = math.sqrt(n / (n - 1) * np.sum(wb**2 * (yb - mean) ** 2)) / wb.sum()
        assert row.std_err == pytest.approx(spread, rel=1e-12)
    # without weights the standard error is s / √n
    plain = calibration_curve(y, p, bins=[0, 0.3, 1.0])
    first = y[p < 0.3]
    assert plain["std_err"].iloc[0] == pytest.approx(first.std(ddof=1) / math.sqrt(first.size), rel=1e-12)


def test_calibrated_probabilities_give_observed_near_predicted_within_standard_errors():
    """y ~ Bernoulli(p) with p ~ U(0, 1), N = 20,000: each bin's observed mean is within 3 s.e. of its
    predicted mean, and Σ z² over the 10 bins is below χ²₁₀'s 0.999 quantile (29.6); p² as the
    prediction (miscalibrated) fails both by far."""
    rng = np.random.default_rng(5)
    p = rng.random(20_000)
    y = (rng.random(p.size) < p).astype(int)
    curve = calibration_curve(y, p, bins=10)
    z = (curve["observed"] - curve["predicted"]) / curve["std_err"]
    assert len(curve) == 10 and curve["count"].sum() == p.size
    assert np.all(np.abs(z) < 3) and np.sum(z**2) < 29.6
    wrong = calibration_curve(y, p**2, bins=10)
    z = (wrong["observed"] - wrong["predicted"]) / wrong["std_err"]
    assert np.sum(z**2) > 1000


def test_calibration_curve_drops_empty_bins_and_checks_edges():
    curve = calibration_curve([0, 1, 1], [0.05, 0.95, 1.0], bins=10)
    assert curve["bin"].tolist() == [0, 9] and curve["count"].tolist() == [1, 2]
    assert np.isnan(curve["std_err"].iloc[0])
    with pytest.raises(ValueError, match="bins"):
        calibration_curve([0, 1], [0.2, 0.8], bins=[0.0, 0.5])
    with pytest.raises(ValueError, match="bins"):
        calibration_curve([0, 1], [0.2, 0.8], bins=0)


def test_score_is_the_metrics_of_predict_proba(random_problem):
    data = random_problem.data
    fit = bl.fit_mle(data.subset(slice(0, 3000)))
    held_out = data.subset(slice(3000, None))
    p = fit.predict_proba(held_out)
    assert score(fit, held_out) == {"log_loss": log_loss(held_out, p), "accuracy": accuracy(held_out, p),
                                    "brier": brier(held_out, p)}


def test_plot_reliability_draws_each_curve_with_its_error_bars_and_counts(tmp_path):
    from matplotlib.figure import Figure

    from bayes_loco.plots import plot_reliability

    rng = np.random.default_rng(6)
    p = rng.random(3000)
    y = (rng.random(p.size) < p).astype(int)
    curves = {"calibrated": calibration_curve(y, p, bins=8),
              "overconfident": calibration_curve(y, p**2, bins=8)}
    ax = Figure().subplots()
    assert plot_reliability(curves, ax=ax) is ax
    diagonal = ax.lines[0]
    assert list(diagonal.get_xdata()) == [0, 1] and list(diagonal.get_ydata()) == [0, 1]
    assert len(ax.containers) == 2
    for container, curve in zip(ax.containers, curves.values(), strict=True):
        line, _, (bars,) = container.lines
        np.testing.assert_allclose(line.get_xdata(), curve["predicted"])
        np.testing.assert_allclose(line.get_ydata(), curve["observed"])
        lengths = np.array([seg[1, 1] - seg[0, 1] for seg in bars.get_segments()])
        np.testing.assert_allclose(lengths, 2 * 1.96 * curve["std_err"], rtol=1e-12)
    counts = [int(t.get_text()) for t in ax.texts]
    assert counts == [*curves["calibrated"]["count"], *curves["overconfident"]["count"]]
    assert [t.get_text() for t in ax.get_legend().get_texts()][1:] == ["calibrated (±1.96 s.e.)",
                                                                     "overconfident (±1.96 s.e.)"]
    ax.figure.savefig(os.environ.get("RELIABILITY_PNG", tmp_path / "reliability.png"))
    one = Figure().subplots()
    plot_reliability(curves["calibrated"], ax=one)
    assert len(one.containers) == 1
    with pytest.raises(ValueError, match="lacks the columns"):
        plot_reliability({"bad": curves["calibrated"].drop(columns="std_err")}, ax=one)
    with pytest.raises(TypeError, match="DataFrame"):
        plot_reliability({"bad": [1, 2]}, ax=one)
