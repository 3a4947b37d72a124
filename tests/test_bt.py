"""Plain Bradley–Terry (``bl.fit_bradley_terry``): the leaderboard baseline, x ≡ 1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit, log_expit

import bayes_loco as bl

ITEMS = 6


def _comparisons(n: int, seed: int, ties: bool = False):
    """One-hot item comparisons with BT strengths, and contexts the model must ignore."""
    rng = np.random.default_rng(seed)
    strengths = np.linspace(-1.0, 1.5, ITEMS)
    first = rng.integers(0, ITEMS, n)
    second = (first + rng.integers(1, ITEMS, n)) % ITEMS
    eye = np.eye(ITEMS)
    p = expit(strengths[first] - strengths[second])
    labels = (rng.random(n) < p).astype(float)
    if ties:
        labels[rng.random(n) < 0.1] = 0.5
    data = bl.PreferenceData(rng.standard_normal((n, 3)), eye[first] - eye[second], labels,
                             weights=rng.uniform(0.5, 2.0, n))
    return data, first, second, strengths


def _scipy_bt(first, second, labels, weights):
    """Brute-force BT: strengths s (s₀ = 0) maximising Σ w [y log σ(s_i − s_j) + (1 − y) log σ(s_j − s_i)]."""

    def loss(free):
        s = np.concatenate([[0.0], free])
        d = s[first] - s[second]
        return -np.sum(weights * (labels * log_expit(d) + (1 - labels) * log_expit(-d)))

    res = optimize.minimize(loss, np.zeros(ITEMS - 1), method="BFGS", options={"gtol": 1e-10})
    return np.concatenate([[0.0], res.x])


@pytest.mark.parametrize("ties", [False, True])
def test_strengths_and_probabilities_match_a_scipy_fit(ties):
    data, first, second, _ = _comparisons(1500, seed=3, ties=ties)
    fit = bl.fit_bradley_terry(data)
    reference = _scipy_bt(first, second, data.labels, data.weights)
    # Only contrasts are identified with one-hot features: compare θ̂_i − θ̂_0.
    np.testing.assert_allclose(fit.utilities - fit.utilities[0], reference, atol=1e-5)
    expected = expit(reference[first] - reference[second])
    np.testing.assert_allclose(fit.predict_proba(data), expected, atol=1e-6)


def test_it_recovers_the_strengths_within_their_standard_errors():
    data, _, _, strengths = _comparisons(4000, seed=5)
    fit = bl.fit_bradley_terry(data)
    contrast = fit.utilities - fit.utilities[0]
    truth = strengths - strengths[0]
    # Each contrast's s.e. is about sqrt(ITEMS / (N · p(1 − p)) · 2 / (ITEMS − 1)) ≈ 0.06 here; 5 of them.
    assert np.abs(contrast - truth).max() < 5 * 0.06


def test_contexts_are_ignored():
    data, *_ = _comparisons(600, seed=7)
    fit = bl.fit_bradley_terry(data)
    shuffled = bl.PreferenceData(np.random.default_rng(0).standard_normal((data.n, 5)), data.differences,
                                 data.labels, weights=data.weights)
    np.testing.assert_array_equal(fit.predict_proba(shuffled), fit.predict_proba(data))
    np.testing.assert_array_equal(fit.utilities, bl.fit_bradley_terry(shuffled).utilities)
    interval = fit.predict_interval(shuffled, 0.8)
    p = fit.predict_proba(data)
    assert np.all(interval.lower <= p) and np.all(p <= interval.upper)
    assert fit.mle.theta.shape == (1, ITEMS)


def test_it_is_a_fitter_for_cross_validation():
    data, *_ = _comparisons(600, seed=9)
    cv = bl.cross_validate(data, bl.fit_bradley_terry, folds=3, seed=0)
    # A BT model of these data predicts better than a coin (log-loss log 2 ≈ 0.693) on held-out folds.
    assert cv.mean["log_loss"] < 0.65


def test_it_refuses_a_fit_that_is_not_one_context():
    data, *_ = _comparisons(200, seed=1)
    with pytest.raises(TypeError, match="one context"):
        bl.BradleyTerryFit(bl.fit_mle(data))
