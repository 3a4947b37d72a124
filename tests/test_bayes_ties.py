"""Ties and weights in the PyMC model: the "half" quasi-likelihood, Davidson's model, and their fits."""

from __future__ import annotations

import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import expit, log_expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.bayes import ties as T
from bayes_loco.model import outcome_probabilities

RANK = 1


def _margins(theta, data):
    return np.einsum("ti,ij,tj->t", data.contexts, theta, data.differences)


def davidson_data(n: int, nu: float, seed: int, *, d_x: int = 3, d_phi: int = 4, weights: bool = False):
    """Labels drawn from Davidson's model at a rank-1 Θ and ``nu``; returns (data, Θ)."""
    rng = np.random.default_rng(seed)
    theta = np.outer(rng.standard_normal(d_x), rng.standard_normal(d_phi))
    x = rng.standard_normal((n, d_x))
    dphi = rng.standard_normal((n, d_phi))
    probs = outcome_probabilities(np.einsum("ti,ij,tj->t", x, theta, dphi), nu)
    u = rng.random(n)
    y = np.where(u < probs[:, 0], 0.0, np.where(u < probs[:, 0] + probs[:, 1], 0.5, 1.0))
    w = rng.choice([1.0, 2.0], n) if weights else None
    return bl.PreferenceData(x, dphi, y, weights=w), theta


def expanded(data: bl.PreferenceData) -> bl.PreferenceData:
    """Unweighted 0/1 data with the same "half" log-likelihood as ``data`` (weights 1 or 2, ties weight 2).

    A comparison of weight 2 is two copies of it; a tie of weight 2 is one win and one loss.
    """
    rows, labels = [], []
    for t in range(data.n):
        y, w = data.labels[t], data.sample_weights[t]
        assert w in (1.0, 2.0) and (y != 0.5 or w == 2.0)
        copies = [1, 0] if y == 0.5 else [int(y)] * int(w)
        rows += [t] * len(copies)
        labels += copies
    return bl.PreferenceData(data.contexts[rows], data.differences[rows], np.array(labels, dtype=np.int8))


@pytest.fixture(scope="module")
def tied():
    """Bradley–Terry labels where every comparison of weight 2 has a one-in-three chance of being a tie."""
    rng = np.random.default_rng(5)
    n, d_x, d_phi = 240, 3, 4
    theta = np.outer(rng.standard_normal(d_x), rng.standard_normal(d_phi))
    x, dphi = rng.standard_normal((n, d_x)), rng.standard_normal((n, d_phi))
    y = (rng.random(n) < expit(np.einsum("ti,ij,tj->t", x, theta, dphi))).astype(float)
    w = rng.choice([1.0, 2.0], n)
    y[(w == 2.0) & (rng.random(n) < 1 / 3)] = 0.5
    return bl.PreferenceData(x, dphi, y, weights=w)


def _point(model, rng):
    return {name: value + 0.3 * rng.standard_normal(np.shape(value))
            for name, value in model.initial_point().items()}


# --------------------------------------------------------------------------- the model


def test_without_ties_and_weights_the_model_is_the_bernoulli_one(tied):
    plain = bl.PreferenceData(tied.contexts, tied.differences, (tied.labels > 0.5).astype(np.int8))
    ones = bl.PreferenceData(tied.contexts, tied.differences, plain.labels, weights=np.ones(tied.n))
    for data in (plain, ones):
        model = bb.build_model(data, RANK, ties="half")
        assert T.likelihood_kind(data, "half") == T.BERNOULLI
        assert {v.name for v in model.data_vars} == {D.DATA_CONTEXTS, D.DATA_DIFFERENCES, D.DATA_LABELS}
    model = bb.build_model(plain, RANK)
    point = _point(model, np.random.default_rng(0))
    logp = model.compile_logp()(point)
    assert bb.build_model(ones, RANK).compile_logp()(point) == logp
    # The observed y's log mass is scipy's Bernoulli at the margins, and it draws Bernoulli labels.
    eta = _margins(point[D.LEFT] @ point[D.RIGHT].T, plain)
    y_logp = model.compile_logp(vars=[model[D.OBSERVED]], sum=False)(point)[0]
    reference = stats.bernoulli(expit(eta)).logpmf(plain.labels)
    np.testing.assert_allclose(y_logp, reference, rtol=1e-12, atol=1e-15)
    draws = T._bernoulli_random(np.array([-2.0, 0.0, 3.0]), rng=np.random.default_rng(1), size=(20_000, 3))
    assert draws.dtype == np.int64
    np.testing.assert_allclose(draws.mean(axis=0), expit([-2.0, 0.0, 3.0]), atol=4 * 0.5 / np.sqrt(20_000))


def test_the_bernoulli_term_is_scipys_and_its_gradient_is_y_minus_sigma_everywhere():
    """(y − ½)η − ½|η| − log1p(e^{−|η|}): log σ(±η) far into both tails; gradient y − σ(η), at η = 0 too."""
    eta = pt.vector("eta")
    y = pt.vector("y")
    term = T.log_likelihood_term(y, eta)
    f = pytensor.function([y, eta], [term, pt.grad(pt.sum(term), eta)])
    grid = np.array([-800.0, -40.0, -3.0, -1e-9, 0.0, 1e-9, 0.5, 40.0, 800.0])
    for label in (0.0, 1.0):
        value, gradient = f(np.full(grid.size, label), grid)
        expected = label * log_expit(grid) + (1 - label) * log_expit(-grid)  # scipy's log σ, stable
        np.testing.assert_allclose(value, expected, rtol=1e-13, atol=1e-300)
        # Absolute: y − σ(η) sums ±½ terms, so σ(−40) ≈ 4e-18 comes out as 0 (rounding of order 1e-17).
        np.testing.assert_allclose(gradient, label - expit(grid), rtol=1e-13, atol=1e-16)


def test_half_log_posterior_equals_the_bernoulli_one_on_the_expanded_data(tied):
    """Weight 2 = two copies, a tie of weight 2 = a win and a loss: PyMC's Bernoulli is the reference."""
    model = bb.build_model(tied, RANK, ties="half")
    reference = bb.build_model(expanded(tied), RANK)
    assert T.likelihood_kind(tied, "half") == T.HALF and D.OBSERVED in model.named_vars
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = _point(model, rng)
        assert model.compile_logp()(point) == pytest.approx(reference.compile_logp()(point), rel=1e-12)


def test_davidson_log_likelihood_is_that_of_the_outcome_probabilities():
    data, _ = davidson_data(150, 0.8, seed=2, weights=True)
    model = bb.build_model(data, RANK, ties="davidson", prior={"nu_scale": 0.7})
    y_logp = model.compile_logp(vars=[model[D.OBSERVED]])
    rng = np.random.default_rng(3)
    for _ in range(3):
        point = _point(model, rng)
        u = point[D.LEFT]
        v = point[D.RIGHT]
        nu = np.exp(T.log_nu_start(data) + point[T.NU_SHIFT])
        probs = outcome_probabilities(_margins(u @ v.T, data), float(nu))
        column = (2 * data.labels).astype(int)  # 0, ½, 1 -> P(0), P(tie), P(1)
        expected = np.sum(data.sample_weights * np.log(probs[np.arange(data.n), column]))
        assert y_logp(point) == pytest.approx(expected, rel=1e-10)


def test_the_prior_of_nu_is_lognormal_whatever_the_data_tie_share():
    """log ν ~ N(0, σ_ν²) whatever the start log ν₀ the data give (the sampler moves in log ν − log ν₀)."""
    for share, seed in ((0.05, 0), (0.6, 1)):
        rng = np.random.default_rng(seed)
        n = 200
        y = np.where(rng.random(n) < share, 0.5, rng.integers(0, 2, n).astype(float))
        data = bl.PreferenceData(rng.standard_normal((n, 2)), rng.standard_normal((n, 3)), y)
        model = bb.build_model(data, RANK, ties="davidson", prior={"nu_scale": 0.8})
        prior_logp = model.compile_logp(vars=[model[T.NU_SHIFT]])
        for shift in (-1.0, 0.0, 0.7):
            point = model.initial_point() | {T.NU_SHIFT: np.array(shift)}
            log_nu = T.log_nu_start(data) + shift
            assert prior_logp(point) == pytest.approx(stats.norm(0, 0.8).logpdf(log_nu), rel=1e-12)
        # ν starts where an even comparison ties with the data's (smoothed) tie share τ: ν₀ = 2τ/(1 − τ).
        tau = (np.sum(y == 0.5) + 0.5) / (n + 1)
        start = model.initial_point()
        assert start[T.NU_SHIFT] == 0.0
        (nu,) = model.replace_rvs_by_values([model[T.NU]])
        nu_at_start = float(model.compile_fn(nu, inputs=model.value_vars, on_unused_input="ignore")(start))
        assert nu_at_start == pytest.approx(2 * tau / (1 - tau), rel=1e-12)


def test_a_compiled_model_is_never_reused_for_another_likelihood(tied):
    """The nutpie cache key tells the Bernoulli, "half" and Davidson graphs of one shape apart."""
    from bayes_loco.bayes.samplers import model_key

    plain = bl.PreferenceData(tied.contexts, tied.differences, (tied.labels > 0.5).astype(np.int8))
    half = bb.Prior()
    davidson = T.tie_prior(bb.Prior(), "davidson")
    keys = {model_key(bb.build_model(plain, RANK), None, half),
            model_key(bb.build_model(tied, RANK), None, half),
            model_key(bb.build_model(tied, RANK, prior=davidson, ties="davidson"), None, davidson)}
    assert len(keys) == 3


def test_the_chart_model_carries_the_tie_likelihood():
    """The chart parametrisation (bayes.chart, which calls model.add_likelihood) gets Davidson's ν and weights
    from ``ties``: its y log-likelihood at a point equals the factored model's at the same U, V, ν."""
    data, _ = davidson_data(300, 0.8, seed=6, weights=True)
    prior = T.tie_prior(bb.Prior(), "davidson")
    frame = bb.chart_frame(data, bl.fit_low_rank(data, 2).theta, 2)
    chart = bb.build_chart_model(data, 2, frame, prior=prior, ties="davidson")
    assert T.NU_SHIFT in {v.name for v in chart.free_RVs}
    assert T.DATA_WEIGHTS in {v.name for v in chart.data_vars}
    point = _point(chart, np.random.default_rng(4))
    u, v = (chart.compile_fn(var, inputs=chart.value_vars, on_unused_input="ignore")(point)
            for var in chart.replace_rvs_by_values([chart[D.LEFT], chart[D.RIGHT]]))
    factored = bb.build_model(data, 2, prior=prior, ties="davidson")
    at = {D.LEFT: u, D.RIGHT: v, T.NU_SHIFT: point[T.NU_SHIFT]}
    assert chart.compile_logp(vars=[chart[D.OBSERVED]])(point) == pytest.approx(
        factored.compile_logp(vars=[factored[D.OBSERVED]])(at), rel=1e-10)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"ties": "draw"}, ValueError, "ties must be one of"),
    ({"ties": "half", "prior": {"nu_scale": 1.0}}, ValueError, r"prior.nu_scale=1 is the prior of Davidson"),
    ({"ties": "davidson", "prior": {"nu_scale": 0.0}}, ValueError, "prior.nu_scale"),
    ({"ties": "davidson", "prior": {"nu_sd": 1.0}}, ValueError, "prior has no setting 'nu_sd'"),
])
def test_bad_tie_settings_are_refused_naming_them(tied, kwargs, error, match):
    with pytest.raises(error, match=match):
        bb.fit_posterior(tied, RANK, method="map", progressbar=False, **kwargs)


@pytest.mark.parametrize("build", ["factored", "chart"])
def test_the_tie_model_is_ties_never_read_from_the_prior(tied, build):
    """A prior on ν does not choose Davidson's model: without ``ties="davidson"`` it is refused by name."""
    prior = T.tie_prior(bb.Prior(), "davidson")
    frame = bb.chart_frame(tied, bl.fit_low_rank(tied, RANK).theta, RANK)
    make = ((lambda **kw: bb.build_model(tied, RANK, prior=prior, **kw)) if build == "factored" else
            (lambda **kw: bb.build_chart_model(tied, RANK, frame, prior=prior, **kw)))
    with pytest.raises(ValueError, match="ties='half' has no ν"):
        make()
    assert T.NU_SHIFT in {v.name for v in make(ties="davidson").free_RVs}


# --------------------------------------------------------------------------- fits


def _hand_gradient(data, u, v, scale):
    """∂/∂(U, V) of Σ w_t [y_t log σ(η_t) + (1 − y_t) log σ(−η_t)] − (‖U‖² + ‖V‖²)/2s², written out."""
    eta = np.einsum("ti,ik,tj,jk->t", data.contexts, u, data.differences, v)
    g = data.contexts.T @ ((data.sample_weights * (data.labels - expit(eta)))[:, None] * data.differences)
    return g @ v - u / scale**2, g.T @ u - v / scale**2


def test_half_map_is_a_stationary_point_of_the_hand_coded_log_posterior(tied):
    """The MAP of the "half" posterior with ties and weights zeroes the hand-written gradient, and it is the
    MAP of the Bernoulli posterior on the expanded data (same log posterior, same start)."""
    start = bl.fit_low_rank(expanded(tied), 2)
    post = bb.fit_posterior(tied, 2, method="map", ties="half", start=start, prior={"scale": 1.5},
                            progressbar=False, map={"draws": 50})
    assert post.settings["ties"] == "half" and post.ties == "half" and post.nu is None
    u = post.tree[D.FACTORS][D.LEFT].values[0, 0]
    v = post.tree[D.FACTORS][D.RIGHT].values[0, 0]
    at_map = np.hypot(*map(np.linalg.norm, _hand_gradient(tied, u, v, 1.5)[:2]))
    # At the start (the prior-free optimum) the gradient is the prior's pull; L-BFGS-B (scipy's default
    # tolerances) stopped where it is 180 times smaller: measured 0.0044 against 0.79.
    u0, v0 = bb.balanced_factors(start.theta, 2)
    at_start = np.hypot(*map(np.linalg.norm, _hand_gradient(tied, u0, v0, 1.5)[:2]))
    print(f"gradient norm at the start {at_start:.3g}, at the MAP {at_map:.3g}")
    assert at_map < 1e-2 * at_start
    same = bb.fit_posterior(expanded(tied), 2, method="map", start=start, prior={"scale": 1.5},
                            progressbar=False, map={"draws": 50})
    assert "ties" not in same.settings
    np.testing.assert_allclose(post.theta, same.theta, atol=1e-4 * np.abs(same.theta).max())
    # The weights matter: without them the MAP moves.
    unweighted = bl.PreferenceData(tied.contexts, tied.differences, tied.labels)
    other = bb.fit_posterior(unweighted, 2, method="map", start=start, prior={"scale": 1.5},
                             progressbar=False, map={"draws": 50})
    assert np.abs(other.theta - post.theta).max() > 1e-2


def _log_nu_se(data, theta, nu):
    """The s.e. of log ν̂ at the truth, Θ known: √(Σ w_t² v_t)/Σ w_t v_t, v_t = P_t(tie)(1 − P_t(tie)).

    The score of log ν is Σ w_t (1{tie} − P_t(tie)); unweighted this is 1/√(Σ v_t), 1/√(Fisher information).
    """
    v = outcome_probabilities(_margins(theta, data), nu)[:, 1]
    v = v * (1 - v)
    w = data.sample_weights
    return float(np.sqrt(np.sum(w**2 * v)) / np.sum(w * v))


def test_davidson_map_recovers_nu_within_its_standard_error():
    """N = 3,000 Davidson comparisons at ν = 0.6: the MAP's log ν is within 4 s.e. of log 0.6, the s.e. from
    the Fisher information of log ν at the truth, Σ_t P_t(tie)(1 − P_t(tie)) (Θ known)."""
    nu = 0.6
    data, theta = davidson_data(3000, nu, seed=11)
    post = bb.fit_posterior(data, RANK, method="map", ties="davidson", progressbar=False, map={"draws": 200})
    se = _log_nu_se(data, theta, nu)
    assert post.ties == "davidson" and post.settings["prior"]["nu_scale"] == bl.get_config()["nu_scale"]
    assert abs(np.log(post.nu) - np.log(nu)) < 4 * se, (post.nu, se)
    assert float(post.tree[D.POINT_ESTIMATE][T.NU]) == post.nu
    # The tie share alone (the start) is further off than the fit: ties are rarer where |η| is large.
    assert abs(np.log(post.nu) - np.log(nu)) < abs(T.log_nu_start(data) - np.log(nu))


@pytest.fixture(scope="module")
def davidson_nuts():
    data, theta = davidson_data(400, 1.0, seed=4, weights=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        post = bb.fit_posterior(data, RANK, ties="davidson", random_seed=3, progressbar=False,
                                nuts={"draws": 250, "tune": 250, "chains": 2, "cores": 1, "sampler": "pymc"},
                                predictive_draws=100)
    return post, theta


def test_davidson_nuts_posterior_holds_nu_and_replicates_ties(davidson_nuts):
    post, theta = davidson_nuts
    tree = post.tree
    nu = tree[D.POSTERIOR][T.NU]
    # 250 draws, or 500 where the factored model's chains disagreed and it ran again lengthened.
    draws = post.settings["nuts"]["draws"]
    assert nu.dims == ("chain", "draw") and nu.shape == (2, draws) and draws in (250, 500)
    assert (draws == 500) == bool(post.settings["geometry"].get("fallbacks"))
    assert post.nu == pytest.approx(float(nu.mean()), rel=1e-12)
    # The truth ν = 1 (N = 400, weighted): within 4 s.e. of log ν, and inside the draws' 99 % interval.
    se = _log_nu_se(post.data, theta, 1.0)
    assert abs(np.log(post.nu)) < 4 * se
    assert np.quantile(nu.values, 0.005) < 1.0 < np.quantile(nu.values, 0.995)
    assert T.NU_SHIFT not in tree[D.POSTERIOR].data_vars and T.NU_SHIFT not in tree[D.FACTORS].data_vars
    assert post.settings["ties"] == "davidson" and post.diagnostics.divergences == 0
    assert T.NU in tree[D.PRIOR].data_vars
    # The replicated labels are Davidson's three outcomes at the draws' probabilities: their tie share
    # matches the mean P(tie) within 4 binomial s.e. of the replicates' count.
    y = tree[D.POSTERIOR_PREDICTIVE][D.OBSERVED].values
    p_tie = tree[D.PREFERENCE_PROBABILITY]["p_tie"].values
    assert set(np.unique(y)) <= {0.0, 0.5, 1.0}
    assert abs((y == 0.5).mean() - p_tie.mean()) < 4 * np.sqrt(p_tie.mean() * (1 - p_tie.mean()) / y.size)
    p = tree[D.PREFERENCE_PROBABILITY][D.PROBABILITY].values
    assert abs(y.mean() - p.mean()) < 4 * 0.5 / np.sqrt(y.size)
    np.testing.assert_array_equal(tree[D.OBSERVED_DATA][D.OBSERVED].values, post.data.labels)


def test_a_saved_davidson_posterior_keeps_its_tie_model_and_nu(davidson_nuts, tmp_path):
    post, _ = davidson_nuts
    back = bl.load(bl.save(post, tmp_path / "davidson.nc"))
    assert back.ties == "davidson" and back.nu == post.nu
    assert back.settings == post.settings
    rng = np.random.default_rng(0)
    point = _point(post.model, rng)
    assert back.model.compile_logp()(point) == pytest.approx(post.model.compile_logp()(point), rel=1e-12)
    np.testing.assert_array_equal(back.with_log_likelihood()["log_likelihood"][D.OBSERVED].values,
                                  post.with_log_likelihood()["log_likelihood"][D.OBSERVED].values)


@pytest.mark.parametrize("vi_method", ["advi", "fullrank_advi"])
def test_davidson_vi_fits_nu_too(vi_method):
    """Mean-field and full-rank ADVI (whose initial spread covers log ν's coordinate too)."""
    nu = 1.5
    data, theta = davidson_data(600, nu, seed=8)
    post = bb.fit_posterior(data, RANK, method="vi", ties="davidson", progressbar=False,
                            vi={"iterations": 3000, "draws": 200, "method": vi_method})
    assert post.tree[D.POSTERIOR][T.NU].shape == (1, 200)
    assert abs(np.log(post.nu) - np.log(nu)) < 4 * _log_nu_se(data, theta, nu)


def test_davidson_posterior_starts_from_davidsons_fit(monkeypatch):
    """``ties="davidson"`` reaches the start: the default start is the rank-r fit under Davidson's model
    (its ν̂ fitted), the fit ``fit_low_rank(..., ties="davidson")`` gives; ``"half"`` starts from
    the "half" fit."""
    from bayes_loco.bayes import geometry

    data, _ = davidson_data(600, 0.8, seed=12)
    seen = []
    real = geometry.fit_low_rank

    def spy(*args, **kwargs):
        fit = real(*args, **kwargs)
        seen.append(fit)
        return fit

    monkeypatch.setattr(geometry, "fit_low_rank", spy)
    for ties in ("davidson", "half"):
        seen.clear()
        post = bb.fit_posterior(data, RANK, method="map", ties=ties, progressbar=False, map={"draws": 50})
        assert post.ties == ties
        assert seen and {fit.ties for fit in seen} == {ties}
    start, _, _ = geometry.default_start(data, RANK, 0.0, 1.0, "davidson")
    direct = bl.fit_low_rank(data, RANK, ties="davidson")
    assert start.ties == "davidson" and start.nu is not None and start.nu > 0
    np.testing.assert_allclose(start.theta, direct.theta, rtol=1e-10, atol=1e-12)
    half, _, _ = geometry.default_start(data, RANK, 0.0, 1.0)
    assert half.ties == "half" and not np.allclose(half.theta, start.theta, rtol=1e-3)
