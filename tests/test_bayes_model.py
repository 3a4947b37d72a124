"""The PyMC model builder: dims, data containers, the two-GEMM likelihood, priors."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.model import margins, neg_log_likelihood


@pytest.fixture(scope="module")
def tiny(random_problem_factory):
    return random_problem_factory(4, 5, 60, seed=5, rank=2, scale=0.6)


def _point(data, rank, seed):
    rng = np.random.default_rng(seed)
    return {D.LEFT: rng.standard_normal((data.d_x, rank)), D.RIGHT: rng.standard_normal((data.d_phi, rank))}


def _reference_logp(point, data, prior_scale=1.0):
    theta = point[D.LEFT] @ point[D.RIGHT].T
    loglik = -neg_log_likelihood(margins(theta, data.contexts, data.differences), data.labels)
    prior = sum(stats.norm.logpdf(point[k], scale=prior_scale).sum() for k in (D.LEFT, D.RIGHT))
    return loglik + prior


def test_coords_and_dims(tiny):
    model = bb.build_model(tiny.data, 2)
    assert set(model.coords) == {D.COMPARISON, D.CONTEXT, D.FEATURE, D.RANK}
    assert len(model.coords[D.COMPARISON]) == 60 and len(model.coords[D.RANK]) == 2
    assert model.named_vars_to_dims[D.LEFT] == (D.CONTEXT, D.RANK)
    assert model.named_vars_to_dims[D.RIGHT] == (D.FEATURE, D.RANK)
    assert model.named_vars_to_dims[D.THETA] == (D.CONTEXT, D.FEATURE)
    assert model.named_vars_to_dims[D.DATA_CONTEXTS] == (D.COMPARISON, D.CONTEXT)
    assert {v.name for v in model.deterministics} == {D.THETA}
    assert [v.name for v in model.free_RVs] == [D.LEFT, D.RIGHT]


def test_logp_matches_numpy_likelihood_and_prior(tiny):
    model = bb.build_model(tiny.data, 2, prior={"scale": 0.7})
    point = _point(tiny.data, 2, 0)
    assert model.compile_logp()(point) == pytest.approx(_reference_logp(point, tiny.data, 0.7), rel=1e-10)
    # The group as an instance builds the same model; None is the default prior (scale 1).
    same = bb.build_model(tiny.data, 2, prior=bb.Prior(scale=0.7))
    assert same.compile_logp()(point) == pytest.approx(_reference_logp(point, tiny.data, 0.7), rel=1e-10)
    default = bb.build_model(tiny.data, 2, prior=None)
    assert default.compile_logp()(point) == pytest.approx(_reference_logp(point, tiny.data, 1.0), rel=1e-10)


def test_theta_deterministic_is_product(tiny):
    model = bb.build_model(tiny.data, 2)
    point = _point(tiny.data, 2, 1)
    theta = model.compile_fn(model[D.THETA], inputs=[model[D.LEFT], model[D.RIGHT]])(point)
    np.testing.assert_allclose(theta, point[D.LEFT] @ point[D.RIGHT].T)


def test_balance_potential_value(tiny):
    point = _point(tiny.data, 2, 2)
    free = bb.build_model(tiny.data, 2).compile_logp()(point)
    balanced = bb.build_model(tiny.data, 2, prior={"balance": 2.0}).compile_logp()(point)
    gap = point[D.LEFT].T @ point[D.LEFT] - point[D.RIGHT].T @ point[D.RIGHT]
    assert balanced - free == pytest.approx(-(2.0 / 8) * np.sum(gap * gap), rel=1e-10)


def test_set_data_reuses_the_model_on_new_data(tiny, random_problem_factory):
    other = random_problem_factory(4, 5, 23, seed=9, rank=2)
    model = bb.build_model(tiny.data, 2)
    point = _point(tiny.data, 2, 3)
    with model:
        pm.set_data({D.DATA_CONTEXTS: other.data.contexts, D.DATA_DIFFERENCES: other.data.differences,
                     D.DATA_LABELS: other.data.labels.astype(np.int64)},
                    coords={D.COMPARISON: np.arange(other.data.n)})
    assert model.compile_logp()(point) == pytest.approx(_reference_logp(point, other.data), rel=1e-10)


def test_scale_prior_and_margins(tiny):
    model = bb.build_model(tiny.data, 2, prior={"hyper": True}, store_margins=True)
    assert {v.name for v in model.free_RVs} == {D.LEFT, D.RIGHT, D.LEFT_SCALE, D.RIGHT_SCALE}
    assert model.named_vars_to_dims[D.MARGINS] == (D.COMPARISON,)
    point = _point(tiny.data, 2, 4)
    eta = model.compile_fn(model[D.MARGINS], inputs=[model[D.LEFT], model[D.RIGHT]])(point)
    theta = point[D.LEFT] @ point[D.RIGHT].T
    np.testing.assert_allclose(eta, margins(theta, tiny.data.contexts, tiny.data.differences))


def test_named_coordinates(tiny):
    model = bb.build_model(tiny.data, 2, context_names=list("abcd"), feature_names=list("pqrst"))
    assert list(model.coords[D.CONTEXT]) == list("abcd")
    with pytest.raises(ValueError, match="feature_names"):
        bb.build_model(tiny.data, 2, feature_names=list("pq"))


@pytest.mark.parametrize(("kwargs", "name"), [
    (dict(rank=0), "rank"), (dict(rank=5), "rank"), (dict(prior={"scale": 0.0}), r"prior\.scale"),
    (dict(prior={"balance": -1.0}), r"prior\.balance"), (dict(prior={"scale_prior": True}), "scale_prior")])
def test_bad_arguments_name_themselves(tiny, kwargs, name):
    args = {"rank": 2, **kwargs}
    with pytest.raises(ValueError, match=name):
        bb.build_model(tiny.data, args.pop("rank"), **args)


def test_bad_data_type():
    with pytest.raises(TypeError, match="data"):
        bb.build_model(np.zeros((3, 3)), 1)
    tiny_data = bl.PreferenceData(np.ones((2, 2)), np.ones((2, 2)), [0, 1])
    with pytest.raises(TypeError, match=r"prior\.hyper"):
        bb.build_model(tiny_data, 1, prior={"hyper": 1})
    with pytest.raises(TypeError, match="store_margins"):
        bb.build_model(tiny_data, 1, store_margins="yes")
    with pytest.raises(TypeError, match="scale_prior"):  # the old keywords are gone
        bb.build_model(tiny_data, 1, scale_prior=True)


def test_balanced_factors(random_problem_factory):
    theta = random_problem_factory(5, 6, 10, seed=1, rank=3).theta
    u, v = bb.balanced_factors(theta, 2)
    np.testing.assert_allclose(u.T @ u, v.T @ v, atol=1e-12)
    p, s, qt = np.linalg.svd(theta)
    np.testing.assert_allclose(u @ v.T, (p[:, :2] * s[:2]) @ qt[:2], atol=1e-12)


def test_prior_draw_is_reproducible_and_has_the_implied_variance():
    theta, u, v = bb.prior_draw(3, 4, 2, seed=0, scale=0.8)
    np.testing.assert_allclose(theta, u @ v.T)
    np.testing.assert_array_equal(theta, bb.prior_draw(3, 4, 2, seed=0, scale=0.8)[0])
    # Var(Θ_ij) = r s⁴ under independent N(0, s²) factors; over 4000 draws the sample
    # variance of one entry has relative sd sqrt(Var(Θ²))/(r s⁴ sqrt n) < 0.1.
    draws = np.array([bb.prior_draw(3, 4, 2, seed=i, scale=0.8)[0][1, 2] for i in range(4000)])
    assert draws.var() == pytest.approx(2 * 0.8**4, rel=0.12)
    assert abs(draws.mean()) < 4 * np.sqrt(2 * 0.8**4 / 4000)
