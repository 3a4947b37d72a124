"""U_⊥ and V_⊥ drawn exactly beside NUTS (:mod:`bayes_loco.bayes.nullspace`).

The spans' model is checked to be the whole chart model's marginal (their log densities differ
by U_⊥'s and V_⊥'s Normal densities, computed by SciPy), the draws against their N(0, s²)
law (Kolmogorov–Smirnov, lag-1 autocorrelation), and the U_⊥ and V_⊥ of a full chart's, a partial
chart's and the factored model's fit against independent draws (NUTS's own were antithetic: lag-1
autocorrelation −0.31 on the same full chart).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import chart, nullspace
from bayes_loco.bayes import dims as D
from bayes_loco.bayes.settings import Prior


def short_span_data(n: int = 1500, seed: int = 0) -> bl.PreferenceData:
    """d_x = 4 with one context coordinate always 0, d_φ = 6 with two feature coordinates never differing."""
    rng = np.random.default_rng(seed)
    theta = np.zeros((4, 6))
    theta[:3, :4] = 2.5 * np.outer(rng.standard_normal(3), rng.standard_normal(4)) / 3
    x, dphi = rng.standard_normal((n, 4)), rng.standard_normal((n, 6))
    x[:, 3] = 0.0
    dphi[:, 4:] = 0.0
    y = (rng.random(n) < expit(np.einsum("ij,ij->i", x @ theta, dphi))).astype(np.int8)
    return bl.PreferenceData(x, dphi, y)


@pytest.fixture(scope="module")
def short_span():
    data = short_span_data()
    return data, chart.chart_frame(data, bl.fit_low_rank(data, 1).theta, 1)


@pytest.mark.parametrize("hyper", [False, True])
def test_the_spans_model_is_the_whole_models_marginal(short_span, hyper):
    data, frame = short_span
    assert frame.left_null.shape[1] == 1 and frame.right_null.shape[1] == 2
    prior = Prior(scale=1.3, hyper=hyper)
    whole = chart.build_chart_model(data, 1, frame, prior=prior)
    spans = chart.build_chart_model(data, 1, frame, prior=prior, span_only=True)
    assert {v.name for v in whole.free_RVs} - {v.name for v in spans.free_RVs} == {D.LEFT_NULL, D.RIGHT_NULL}
    logp_whole, logp_spans = whole.compile_logp(), spans.compile_logp()
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = {name: value + 0.3 * rng.standard_normal(value.shape)
                 for name, value in whole.initial_point().items()}
        s_u, s_v = ((np.exp(point["sigma_U_log__"]), np.exp(point["sigma_V_log__"])) if hyper
                    else (prior.scale, prior.scale))
        normal = (stats.norm.logpdf(point[D.LEFT_NULL], scale=s_u).sum()
                  + stats.norm.logpdf(point[D.RIGHT_NULL], scale=s_v).sum())
        rest = {name: value for name, value in point.items() if name not in (D.LEFT_NULL, D.RIGHT_NULL)}
        assert logp_whole(point) - logp_spans(rest) == pytest.approx(normal, abs=1e-8)


def test_a_balancing_potential_keeps_the_null_blocks_in_the_sampler(short_span):
    data, frame = short_span
    balanced = Prior(balance=1.0)
    with pytest.raises(ValueError, match=r"prior\.balance"):
        chart.build_chart_model(data, 1, frame, prior=balanced, span_only=True)
    with pytest.raises(ValueError, match=r"prior\.balance"):
        nullspace.draw_null(xr.Dataset(coords={"chain": [0], "draw": [0]}), frame, balanced,
                            np.random.default_rng(0))
    assert not nullspace.exact_null(frame.left_null, frame.right_null, balanced)
    assert nullspace.exact_null(frame.left_null, frame.right_null, Prior())
    factors = xr.Dataset({D.LEFT: (("chain", "draw", D.CONTEXT, D.RANK), np.zeros((1, 1, 4, 1)))})
    with pytest.raises(ValueError, match=r"prior\.balance"):
        nullspace.redraw_off_spans(factors, frame.left, np.eye(6), balanced, np.random.default_rng(0))
    whole = np.zeros((3, 0))
    assert not nullspace.exact_null(whole, np.zeros((4, 0)), Prior())  # both spans whole: nothing to draw


@pytest.mark.parametrize("hyper", [False, True])
def test_the_null_blocks_are_independent_draws_of_their_prior(short_span, hyper):
    _, frame = short_span
    chains, draws = 4, 500
    rng = np.random.default_rng(5)
    posterior = xr.Dataset(coords={"chain": np.arange(chains), "draw": np.arange(draws)})
    if hyper:  # a scale that moves from draw to draw, as the hyper-prior's does
        for name in (D.LEFT_SCALE, D.RIGHT_SCALE):
            posterior[name] = (("chain", "draw"), rng.uniform(0.5, 2.0, (chains, draws)))
    prior = Prior(scale=1.7, hyper=hyper)
    out = nullspace.draw_null(posterior, frame, prior, np.random.default_rng(6))
    for name, scale in ((D.LEFT_NULL, D.LEFT_SCALE), (D.RIGHT_NULL, D.RIGHT_SCALE)):
        values = out[name].to_numpy()
        assert values.shape[:2] == (chains, draws)
        sd = out[scale].to_numpy()[..., None, None] if hyper else prior.scale
        standard = (values / sd).reshape(chains, draws, -1)
        assert stats.kstest(standard.ravel(), "norm").pvalue > 1e-3
        lag1 = np.mean(standard[:, 1:] * standard[:, :-1])  # 0 for independent draws, sd 1/√(chains·draws)
        assert abs(lag1) < 4 / np.sqrt(standard[:, 1:].size)
    again = nullspace.draw_null(posterior, frame, prior, np.random.default_rng(6))
    xr.testing.assert_identical(out, again)


def test_the_factored_models_components_off_the_spans_are_redrawn_and_the_rest_kept(short_span):
    _, frame = short_span
    rng = np.random.default_rng(7)
    dims = ("chain", "draw", D.CONTEXT, D.RANK)
    right_dims = ("chain", "draw", D.FEATURE, D.RANK)
    factors = xr.Dataset({D.LEFT: (dims, rng.standard_normal((4, 500, 4, 2)) + 3.0),
                          D.RIGHT: (right_dims, rng.standard_normal((4, 500, 6, 2)))})
    prior = Prior(scale=0.6)
    out = nullspace.redraw_off_spans(factors, frame.left, frame.right, prior, np.random.default_rng(8))
    for name, null in ((D.LEFT, frame.left_null), (D.RIGHT, frame.right_null)):
        before, after = factors[name].to_numpy(), out[name].to_numpy()
        span = np.eye(null.shape[0]) - null @ null.T
        np.testing.assert_allclose(np.einsum("ij,cdjk->cdik", span, after),
                                   np.einsum("ij,cdjk->cdik", span, before), atol=1e-12)  # NUTS's part kept
        off = np.einsum("ji,cdjk->cdik", null, after) / prior.scale  # P⊥ᵀ U / s: N(0, 1), independent
        assert stats.kstest(off.ravel(), "norm").pvalue > 1e-3
        assert abs(np.mean(off[:, 1:] * off[:, :-1])) < 4 / np.sqrt(off[:, 1:].size)


# The partial chart's nutpie compilation takes 30-50 s: its statistical run is a slow test. In the default
# run test_a_partial_charts_draws_off_the_spans_are_replaced_by_their_own_stream checks its fit's U_⊥, V_⊥
# exactly, from a short PyMC run.
@pytest.mark.parametrize("coordinates", [{"parametrization": "chart"},
                                         pytest.param({"parametrization": "chart", "chart_rank": 1,
                                                       "rank": 2}, marks=pytest.mark.slow),
                                         {"parametrization": "factored"}],
                         ids=["chart", "partial", "factored"])
def test_a_fit_draws_u_and_v_off_the_spans_independently(short_span, coordinates):
    """U_⊥, V_⊥ left out of NUTS (the full chart) or its draws of them replaced (partial chart, factored).

    The partial chart's case is slow: in the default run,
    test_a_partial_charts_draws_off_the_spans_are_replaced_by_their_own_stream makes its exact checks.
    """
    data, frame = short_span
    nuts = {"draws": 400, "tune": 400, "chains": 2} | coordinates
    rank = nuts.pop("rank", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        post = bb.fit_posterior(data, rank, progressbar=False, random_seed=2, predictive_draws=0, nuts=nuts)
    if coordinates["parametrization"] == "chart":
        assert post.model[D.RIGHT_NULL] in post.model.free_RVs  # the fitted model is the whole one
    v_null = post.tree["factors"]["V"].to_numpy()[..., 4:, :]  # chain, draw, the unreached features, rank
    u_null = post.tree["factors"]["U"].to_numpy()[..., 3:, :]  # the context coordinate always 0
    for block in (u_null, v_null):
        draws = block.reshape(block.shape[0], block.shape[1], -1)
        assert abs(draws.std() - 1.0) < 0.1  # N(0, 1), the prior
        # Independent draws: lag-1 autocorrelation 0 within sampling error. NUTS's own were antithetic.
        lag1 = np.mean(draws[:, 1:] * draws[:, :-1]) / draws.var()
        assert abs(lag1) < 4 / np.sqrt(draws[:, 1:].size), lag1
    _off_spans_come_from_their_stream(post, frame, coordinates["parametrization"], seed=2)


def _off_spans_come_from_their_stream(post, frame, parametrization, seed):
    # Whatever NUTS drew of them, U_⊥ = P⊥ᵀ U and V_⊥ come from their own seeded stream, U_⊥'s first: drawn
    # as they are (a chart's U_null, V_null), or as the part off the span of a Gaussian U, V (factored).
    stream = np.random.default_rng([seed, nullspace.NULL_STREAM])
    for factor, null in (("U", frame.left_null), ("V", frame.right_null)):
        stored = post.tree["factors"][factor].to_numpy()
        if parametrization == "chart":
            expected = stream.standard_normal((*stored.shape[:2], null.shape[1], stored.shape[3]))
        else:
            expected = np.einsum("ji,cdjk->cdik", null, stream.standard_normal(stored.shape))
        np.testing.assert_allclose(np.einsum("ji,cdjk->cdik", null, stored), expected, atol=1e-10)
    # Θ's entries within the spans are NUTS's: Θ = U Vᵀ with U, V as stored.
    u, v = (post.tree["factors"][name].to_numpy() for name in ("U", "V"))
    theta = np.einsum("cdik,cdjk->cdij", u, v)
    np.testing.assert_allclose(post.tree["posterior"]["theta"].to_numpy(), theta, atol=1e-10)


def test_a_partial_charts_draws_off_the_spans_are_replaced_by_their_own_stream(short_span):
    """The partial chart (r₁ = 1 of rank 2) samples U_⊥, V_⊥ with the spans; the fit replaces NUTS's draws.

    A short PyMC run (no nutpie compilation): the replacement is exact whatever NUTS drew, so the check
    needs no long chains. The statistical run in nutpie's partial chart is the slow case of
    test_a_fit_draws_u_and_v_off_the_spans_independently.
    """
    data, frame = short_span
    nuts = {"draws": 30, "tune": 30, "chains": 2, "cores": 1, "sampler": "pymc", "parametrization": "chart",
            "chart_rank": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        post = bb.fit_posterior(data, 2, progressbar=False, random_seed=3, predictive_draws=0, nuts=nuts)
    assert post.settings["nuts"]["chart_rank"] == 1 and post.model[D.RIGHT_NULL] in post.model.free_RVs
    _off_spans_come_from_their_stream(post, frame, "chart", seed=3)
