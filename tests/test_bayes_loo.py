"""The pointwise log-likelihood of posterior trees, PSIS-LOO and az.compare across ranks."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.bayes import loocv
from bayes_loco.bayes import ties as T

NUTS = {"draws": 300, "tune": 300, "chains": 2, "cores": 1, "sampler": "pymc"}


def rank_two_data(n: int = 600, seed: int = 21, d_x: int = 6, d_phi: int = 8) -> bl.PreferenceData:
    """A clear rank-2 case: x ~ N(0, I/d_x), Δφ ~ N(0, I/d_φ), Θ of singular values (8, 5)·√(d_x d_φ/20).

    E[η²] = ‖Θ‖²_F/(d_x d_φ) = 4.45, of which the second component gives 1.25.
    """
    rng = np.random.default_rng(seed)
    p, _ = np.linalg.qr(rng.standard_normal((d_x, 2)))
    q, _ = np.linalg.qr(rng.standard_normal((d_phi, 2)))
    theta = p @ np.diag([8.0, 5.0]) @ q.T * np.sqrt(d_x * d_phi / 20)
    x = rng.standard_normal((n, d_x)) / np.sqrt(d_x)
    dphi = rng.standard_normal((n, d_phi)) / np.sqrt(d_phi)
    y = (rng.random(n) < expit(np.einsum("ti,ij,tj->t", x, theta, dphi))).astype(np.int8)
    return bl.PreferenceData(x, dphi, y)


@pytest.fixture(scope="module")
def ranks():
    """Ranks 1-3 by MAP, each with 1,000 draws of its Laplace approximation (NUTS: the slow test below)."""
    return bb.compare_ranks(rank_two_data(), [1, 2, 3], method="map", map={"draws": 1000}, random_seed=5,
                            progressbar=False, predictive_draws=0)


def _hand_eta(tree, data):
    theta = tree["posterior"]["theta"].transpose("chain", "draw", "context", "feature").values
    return np.einsum("ti,cdij,tj->cdt", data.contexts, theta, data.differences)


def _check_rank_choice(ranks, draws: int):
    """az.loo and az.compare on the trees of ranks 1-3 (true rank 2): rank 2 first, rank 1 far behind."""
    table = ranks.table
    print(f"\n{table[['elpd', 'se', 'elpd_diff', 'dse', 'p', 'weight']].to_string()}\n{ranks.note}")
    assert table.index[0] == "r=2" and ranks.best == 2 and ranks.selected == 2
    # Rank 1 misses a component: its elpd is many standard errors of the difference below.
    assert table.loc["r=1", "elpd_diff"] < -4 * table.loc["r=1", "dse"]
    # ArviZ users' own route gives the same numbers: az.loo on each tree, az.compare on the trees.
    trees = {f"r={r}": post.with_log_likelihood() for r, post in ranks.posteriors.items()}
    for label, tree in trees.items():
        assert tree["log_likelihood"]["y"].sizes["draw"] * tree["log_likelihood"]["y"].sizes["chain"] == draws
        assert az.loo(tree).elpd == pytest.approx(ranks.loo[int(label[2:])].elpd_loo, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        direct = az.compare(trees, round_to="none")
    np.testing.assert_allclose(direct.loc[table.index, "elpd"], table["elpd"], rtol=1e-12)
    # p_loo grows with the rank (the parameter counts r(d_x + d_φ − r) are 13, 24 and 33).
    p = [ranks.loo[r].p_loo for r in (1, 2, 3)]
    assert p[0] < p[1] < p[2]


def test_loo_and_compare_pick_the_true_rank_on_a_clear_case(ranks):
    """MAP with Laplace draws, N = 600, d_x = 6, d_φ = 8. Measured: elpd −346.9 (r = 2), r = 3 lower by 5.8
    (s.e. 2.7), r = 1 lower by 36.3 (s.e. 7.4)."""
    _check_rank_choice(ranks, 1000)


@pytest.mark.slow
def test_nuts_loo_and_compare_pick_the_true_rank_on_a_clear_case():
    """The same case by NUTS (PyMC's sampler, 2 chains × 300 draws; 106 s here). Measured: elpd −347.7
    (r = 2), r = 3 lower by 0.8 (s.e. 1.4), r = 1 lower by 33.2 (s.e. 6.6)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        ranks = bb.compare_ranks(rank_two_data(), [1, 2, 3], nuts=NUTS, random_seed=5, progressbar=False,
                                 predictive_draws=0)
    _check_rank_choice(ranks, 600)


def test_pointwise_log_likelihood_of_the_bernoulli_model_is_pymcs():
    """Equals scipy's Bernoulli log mass at the draws' margins, and PyMC's own compute_log_likelihood
    on the draws of the factors (a VI fit, whose factors group holds U and V per draw)."""
    data = rank_two_data(200, seed=2, d_x=3, d_phi=4)
    post = bb.fit_posterior(data, 2, method="vi", vi={"iterations": 2000, "draws": 150}, progressbar=False)
    tree = post.with_log_likelihood()
    values = tree["log_likelihood"]["y"]
    assert values.dims == ("chain", "draw", "comparison") and values.shape == (1, 150, data.n)
    assert "log_likelihood" not in post.tree.children  # the fit's tree is left as it was
    expected = stats.bernoulli.logpmf(data.labels, expit(_hand_eta(post.tree, data)))
    np.testing.assert_allclose(values.values, expected, rtol=1e-9, atol=1e-12)
    factors = xr.DataTree.from_dict({"posterior": post.tree["factors"].to_dataset()[["U", "V"]]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        pymc = pm.compute_log_likelihood(factors, model=post.model, extend_inferencedata=False,
                                         progressbar=False)
    np.testing.assert_allclose(values.values, pymc["y"].values, rtol=1e-9, atol=1e-12)


def test_pointwise_log_likelihood_with_ties_and_weights_is_the_hand_formula():
    """Half: w [y log σ(η) + (1 − y) log σ(−η)]; Davidson: w log(e^{±η/2} or ν over e^{η/2} + ν + e^{−η/2}),
    from the tree's draws of Θ and ν; MAP: the Laplace draws with ν at the MAP."""
    rng = np.random.default_rng(3)
    n = 120
    x, dphi = rng.standard_normal((n, 2)), rng.standard_normal((n, 3))
    y = rng.choice([0.0, 0.5, 1.0], n)
    w = rng.uniform(0.5, 2.0, n)
    data = bl.PreferenceData(x, dphi, y, weights=w)
    for ties, method in (("half", "vi"), ("davidson", "vi"), ("davidson", "map")):
        post = bb.fit_posterior(data, 1, method=method, ties=ties, progressbar=False,
                                vi={"iterations": 1500, "draws": 100}, map={"draws": 100})
        eta = _hand_eta(post.tree, data)
        if ties == "half":
            expected = w * (y * np.log(expit(eta)) + (1 - y) * np.log(expit(-eta)))
        else:
            nu = (post.tree["posterior"]["nu"].values if method == "vi"
                  else np.full(eta.shape[:2], float(post.tree["point_estimate"]["nu"])))[..., None]
            numerator = np.where(y == 1, np.exp(eta / 2), np.where(y == 0, np.exp(-eta / 2), nu))
            expected = w * np.log(numerator / (np.exp(eta / 2) + nu + np.exp(-eta / 2)))
        values = bb.log_likelihood(post)["y"].values
        np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-12)
        result = post.loo()
        assert result.elpd.n_data_points == n and np.isfinite(result.elpd_loo)
        assert result.pareto_k.shape == (n,)


def test_the_note_counts_the_units_above_the_k_threshold():
    k = np.array([0.1, 0.69, 0.71, 1.3, 0.2])
    high, note = loocv._k_note(k, 0.7)
    assert high == 2 and "for 2 of 5 comparisons (40.0 %, max 1.30)" in note
    high, note = loocv._k_note(k[:2], 0.7)
    assert high == 0 and "for all 2 comparisons (max 0.69)" in note
    high, note = loocv._k_note(k, 0.7, "counted rows")  # a counted row is left out whole
    assert high == 2 and "for 2 of 5 counted rows" in note and "check those counted rows" in note


def test_a_plain_posteriors_ties_and_nu(ranks):
    post = ranks.posteriors[1]
    assert post.ties == "half" and post.nu is None and "ties" not in post.settings
    assert T.NU not in post.tree["posterior"].data_vars


@pytest.mark.parametrize(("ranks_arg", "kwargs", "error", "match"), [
    ([2], {}, ValueError, "at least two distinct ranks"),
    ([1, 1, 2], {}, ValueError, "at least two distinct ranks, each once"),
    (["a", 2], {}, TypeError, "ranks must be a sequence of integers"),
    ([1, 2], {"rank": 2}, ValueError, "do not pass rank="),
    ([1, 2], {"start": None}, ValueError, "do not pass start="),
])
def test_compare_ranks_refuses_bad_arguments(ranks_arg, kwargs, error, match):
    with pytest.raises(error, match=match):
        bb.compare_ranks(rank_two_data(50), ranks_arg, **kwargs)


def test_compare_ranks_refuses_what_is_not_data():
    with pytest.raises(TypeError, match="data must be a PreferenceData"):
        bb.compare_ranks(np.zeros((3, 3)), [1, 2])


def test_log_likelihood_names_the_group_as_arviz_expects(ranks):
    tree = ranks.posteriors[3].with_log_likelihood()
    assert list(tree["log_likelihood"].data_vars) == list(tree["observed_data"].data_vars) == [D.OBSERVED]
    np.testing.assert_array_equal(tree["log_likelihood"][D.OBSERVED].coords[D.COMPARISON].values,
                                  tree["observed_data"][D.OBSERVED].coords[D.COMPARISON].values)
