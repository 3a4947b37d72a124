"""One result shape for the frequentist fits: the Fit protocol, Diagnostics and summary().

Oracles: statsmodels' Logit on the explicit Kronecker design (standard errors and
Wald intervals), explicit Gram matrices, the SVD of Θ̂ (the low-rank fit's own RTV
coordinates), and the label-flip invariance of the model without intercept.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

import bayes_loco as bl
from bayes_loco import simulate
from bayes_loco.results import Summary


@pytest.fixture(scope="module")
def small():
    """Paper simulation with a state block that no comparison reaches (k_eff < k)."""
    problem = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0)
    data = problem.sample(800, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        prs = bl.fit_prs(data, 2)
    return problem, data, prs


def fits(small):
    _, _, prs = small
    return {"mle": prs.low_rank.initial, "low_rank": prs.low_rank, "prs": prs}


@pytest.mark.parametrize("name", ["mle", "low_rank", "prs"])
def test_every_fit_follows_the_protocol(small, name):
    _, data, _ = small
    fit = fits(small)[name]
    assert isinstance(fit, bl.Fit)
    assert fit.theta.shape == (data.d_x, data.d_phi)
    assert fit.estimate.shape == (fit.coordinates.dim,)
    d = fit.diagnostics
    assert isinstance(d, bl.Diagnostics) and d.converged and d.status is bl.FitStatus.CONVERGED
    # PRS without a split starts at its optimum, FGD's own estimate (test_prs), and may take no step
    assert d.n_iter >= (0 if name == "prs" else 1) and d.warnings == () and d.seconds > 0
    assert np.isnan(d.max_rhat) and d.divergences is None
    # the estimate is Θ̂ in the fit's coordinates, up to the truncated block 22 (zero for these fits)
    np.testing.assert_allclose(fit.coordinates.to_coordinates(fit.theta), fit.estimate, atol=1e-10)


@pytest.mark.parametrize("name", ["mle", "low_rank", "prs"])
def test_penalty_set_is_the_gram_ellipsoid(small, name):
    _, data, _ = small
    fit = fits(small)[name]
    coordinates = fit.coordinates
    z = np.stack([coordinates.transform(data.contexts[t:t + 1], data.differences[t:t + 1])[0]
                  for t in range(data.n)])
    gram = sum(np.outer(row, row) for row in z)
    for c2 in (1.0, 5.0):
        s = fit.penalty_set(c2)
        assert s.kind == "gram" and s.level is None and s.coordinates is coordinates
        np.testing.assert_allclose(s.precision, gram, rtol=1e-10, atol=1e-8)
        np.testing.assert_array_equal(s.center, fit.estimate)
        assert s.radius == pytest.approx(c2 * np.sqrt(coordinates.dim / data.n), rel=1e-12)
    with pytest.raises(ValueError, match=r"^c2 must be in"):
        fit.penalty_set(-1.0)


@pytest.mark.parametrize("name", ["mle", "low_rank", "prs"])
def test_calibrated_set_is_a_wald_set_at_the_level(small, name):
    fit = fits(small)[name]
    assert fit.calibrated_kinds == ("wald", "family")
    for level in (0.5, 0.9):
        s = fit.calibrated_set(level)
        assert s.kind == "wald" and s.level == level
        assert s.radius**2 == pytest.approx(stats.chi2.ppf(level, s.effective_dim), rel=1e-12)
    with pytest.raises(ValueError, match="kind must be one of 'wald'"):
        fit.calibrated_set(0.9, "credible")


def test_low_rank_estimate_is_its_singular_values_in_its_own_coordinates(small):
    low_rank = fits(small)["low_rank"]
    estimate = low_rank.estimate
    r = low_rank.rank
    np.testing.assert_allclose(estimate[: r * r].reshape(r, r), np.diag(low_rank.singular_values), atol=1e-10)
    np.testing.assert_allclose(estimate[r * r:], 0.0, atol=1e-10)


def test_mle_summary_matches_statsmodels(random_problem, kron):
    z = kron(random_problem.data.contexts, random_problem.data.differences)
    y = random_problem.data.labels.astype(float)
    ref = sm.Logit(y, z).fit(method="newton", tol=1e-12, disp=0)
    summary = bl.fit_mle(random_problem.data).summary(level=0.9)
    table = summary.to_frame()
    assert len(table) == 20 and list(table.columns) == ["estimate", "std_err", "lower", "upper"]
    np.testing.assert_allclose(table["std_err"], ref.bse, rtol=1e-5)
    np.testing.assert_allclose(table[["lower", "upper"]], ref.conf_int(alpha=0.1), rtol=1e-4, atol=1e-5)
    assert summary.header["N"] == 4000 and summary.header["k"] == summary.header["k_eff"] == 20
    assert summary.header["converged"] is True and summary.notes == ()


def test_prs_summary_lists_the_identified_coordinates_only(small):
    _, _, prs = small
    summary = prs.summary(0.95)
    wald = prs.calibrated_set(0.95)
    table = summary.to_frame()
    assert len(table) == wald.effective_dim == summary.header["k_eff"] == 10
    assert summary.header["k"] == 16 and summary.header["rank"] == 2 and summary.header["d_phi"] == 6
    kept = [prs.basis.labels().index(label) for label in table.index]
    np.testing.assert_array_equal(table["estimate"], prs.theta_rtv[kept])
    # standard errors from the pseudo-inverse of the Fisher information (scipy, not the set's eigh)
    cov = np.linalg.pinv(wald.precision, hermitian=True)
    np.testing.assert_allclose(table["std_err"], np.sqrt(np.diag(cov))[kept], rtol=1e-6)
    half = stats.norm.ppf(0.975) * table["std_err"]
    np.testing.assert_allclose(table["upper"] - table["estimate"], half, rtol=1e-10)
    assert any("6 of 16 coordinates are not identified" in note for note in summary.notes)
    text = str(summary)
    for key in ("k_eff", "converged", "N0", "11 (u0, v0)", "[1] 6 of 16"):
        assert key in text
    assert "<table>" in summary._repr_html_()


def test_summary_prints_at_most_max_rows_and_says_how_many_more(small):
    _, _, prs = small
    mle = prs.low_rank.initial
    summary = Summary("t", {"N": 1}, mle.summary().table, max_rows=5)
    assert "7 more rows" in str(summary)
    with pytest.raises(ValueError, match=r"^level must be in"):
        mle.summary(level=1.0)


def test_separated_fit_says_so_in_its_status_and_notes():
    problem = simulate.paper_problem(rank=3, imbalance=10, seed=0)
    data = problem.sample(1000, seed=2)
    with pytest.warns(bl.SeparationWarning):
        fit = bl.fit_mle(data)
    assert fit.separated and fit.diagnostics.status is bl.FitStatus.SEPARATED
    assert any("separable" in w for w in fit.diagnostics.warnings)
    assert any("separable" in note for note in fit.summary().notes)


def test_labels_of_one_class_warn_and_fit_like_any_ordering(random_problem):
    data = random_problem.data
    # Store the preferred answer always as features_1: (Δφ, y) -> (sign·Δφ, 1) is the same observation.
    sign = np.where(data.labels == 1, 1.0, -1.0)
    ones = bl.PreferenceData(data.contexts, sign[:, None] * data.differences, np.ones(data.n, dtype=int))
    with pytest.warns(bl.DataWarning, match="labels: all 4000 comparisons have y = 1"):
        flipped = bl.fit_mle(ones)
    np.testing.assert_allclose(flipped.theta, bl.fit_mle(data).theta, atol=1e-8)
    with pytest.warns(bl.DataWarning, match="labels"):
        bl.fit_prs(ones, 2)


def test_wald_kind_is_the_default_calibrated_kind(small):
    for fit in fits(small).values():
        default = fit.calibrated_set(0.9, None)
        assert default.kind == "wald"
        np.testing.assert_array_equal(default.precision, fit.calibrated_set(0.9, "wald").precision)


def test_labels_of_one_class_warn_once_per_call_on_both_roads(small):
    _, data, prs = small
    sign = np.where(data.labels == 1, 1.0, -1.0)
    ones = bl.PreferenceData(data.contexts, sign[:, None] * data.differences, np.ones(data.n, dtype=int))
    for fit in (lambda: bl.fit_prs(ones, 2), lambda: bl.select_rank(ones, [1, 2]),
                lambda: bl.bayes.fit_posterior(ones, 2, method="map", start=prs.low_rank, progressbar=False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit()
        labels = [w for w in caught if issubclass(w.category, bl.DataWarning)]
        assert len(labels) == 1 and "labels" in str(labels[0].message)
        assert labels[0].filename == __file__  # attributed to the caller's line


def test_prs_carries_the_start_mle_separation_into_its_notes():
    # 150 comparisons, 90 % of them (0, 1): the rarely compared actions are separable
    problem = simulate.paper_problem(d_s=3, d_a=5, d_x=4, rank=2, imbalance=10, seed=0)
    data = problem.sample(150, seed=1)
    with pytest.warns(bl.SeparationWarning):
        prs = bl.fit_prs(data, 2)
    assert any("fit_mle: the data look separable" in w for w in prs.low_rank.diagnostics.warnings)
    assert any("fit_mle: the data look separable" in w for w in prs.diagnostics.warnings)
    assert any("fit_mle: the data look separable" in note for note in prs.summary().notes)


def test_an_ill_conditioned_information_gets_a_note():
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.normal(size=(n, 3))
    x[:, 2] = x[:, 1] + 3e-5 * rng.normal(size=n)  # two nearly collinear context coordinates
    dphi = rng.normal(size=(n, 2))
    theta = np.array([[0.5, 0.2], [0.3, -0.4], [0.1, 0.2]])
    y = (rng.random(n) < 1 / (1 + np.exp(-np.einsum("ij,ij->i", x @ theta, dphi)))).astype(int)
    fit = bl.fit_mle(bl.PreferenceData(x, dphi, y))
    wald = fit.calibrated_set()
    eigenvalues = np.linalg.eigvalsh(wald.precision)
    assert wald.effective_dim == 6
    assert wald.condition_number == pytest.approx(eigenvalues.max() / eigenvalues.min(), rel=1e-6)
    assert wald.condition_number > 1e8
    assert any("ill-conditioned" in note for note in fit.summary().notes)
    assert not any("ill-conditioned" in note for note in fits_of_random(rng).summary().notes)


def fits_of_random(rng):
    """A well-conditioned MLE on Gaussian data (the contrast for the ill-conditioned one)."""
    x, dphi = rng.normal(size=(2000, 3)), rng.normal(size=(2000, 2))
    y = (rng.random(2000) < 0.5).astype(int)
    return bl.fit_mle(bl.PreferenceData(x, dphi, y))


def test_diagnostics_ess_per_second():
    d = bl.Diagnostics("nuts-pymc", True, 500, bl.FitStatus.CONVERGED, seconds=4.0, min_ess_bulk=800.0)
    assert d.ess_per_second == 200.0
    assert np.isnan(bl.Diagnostics("map", True, 3, bl.FitStatus.CONVERGED).ess_per_second)
