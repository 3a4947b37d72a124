"""The bad-input catalogue for the Bayesian road: bad settings of ``fit_posterior`` and its methods.

Each case is refused before any sampling, in bayes_loco's words naming the setting
(``refused`` checks the raising frame is inside the package), or runs and says what
is wrong with the result (a fit that cannot be checked is never called converged).
"""

from __future__ import annotations

import numpy as np
import pytest
from catalogue import refused, warned

import bayes_loco as bl
from bayes_loco import bayes as bb

pytestmark = pytest.mark.catalogue


@pytest.fixture(scope="module")
def data():
    return bl.simulate.paper_problem(d_x=4, d_a=3, d_s=2, rank=1, seed=1).sample(200, seed=1)


@pytest.fixture(scope="module")
def posterior(data):
    return bb.fit_posterior(data, 1, method="map", map={"draws": 50}, progressbar=False, predictive_draws=0)


BAD_SETTINGS = [
    # (keyword arguments, what the message must say)
    ({"method": "gibbs"}, r"method must be one of 'nuts', 'map', 'vi'; got 'gibbs'"),
    ({"method": None}, r"method must be one of"),
    ({"prior": {"scael": 1.0}}, r"prior has no setting 'scael'; the prior settings are scale, hyper, "
                                r"balance"),
    ({"prior": {"scale": -1.0}}, r"prior\.scale must be in \(0"),
    ({"prior": {"scale": 0.0}}, r"prior\.scale must be in \(0"),
    ({"prior": {"scale": np.nan}}, r"prior\.scale must be in"),
    ({"prior": {"scale": "1"}}, r"prior\.scale must be a real number, got '1'"),
    ({"prior": {"hyper": "yes"}}, r"prior\.hyper must be a bool, got 'yes'"),
    ({"prior": {"balance": -0.5}}, r"prior\.balance must be in \[0"),
    ({"prior": 5}, r"prior must be a Prior, a dict of its settings or None, got int"),
    ({"prior": [1.0]}, r"prior must be a Prior, a dict of its settings or None, got list"),
    ({"nuts": {"drawz": 10}}, r"nuts has no setting 'drawz'"),
    ({"nuts": {"draws": 0}}, r"nuts\.draws must be >= 1, got 0"),
    ({"nuts": {"draws": -5}}, r"nuts\.draws must be >= 1, got -5"),
    ({"nuts": {"draws": 10.5}}, r"nuts\.draws must be an integer, got 10\.5"),
    ({"nuts": {"draws": "100"}}, r"nuts\.draws must be an integer, got '100'"),
    ({"nuts": {"draws": True}}, r"nuts\.draws must be an integer, got True"),
    ({"nuts": {"tune": -1}}, r"nuts\.tune must be >= 0, got -1"),
    ({"nuts": {"chains": 0}}, r"nuts\.chains must be >= 1, got 0"),
    ({"nuts": {"cores": 0}}, r"nuts\.cores must be >= 1, got 0"),
    ({"nuts": {"sampler": "stan"}}, r"nuts\.sampler must be one of 'pymc', 'nutpie', 'numpyro'; got 'stan'"),
    ({"nuts": {"target_accept": 0.0}}, r"nuts\.target_accept must be in \(0\.0, 1\.0\)"),
    ({"nuts": {"target_accept": 1.0}}, r"nuts\.target_accept must be in \(0\.0, 1\.0\)"),
    ({"nuts": {"target_accept": 1.5}}, r"nuts\.target_accept must be in \(0\.0, 1\.0\)"),
    ({"nuts": {"target_accept": np.nan}}, r"nuts\.target_accept must be in"),
    ({"nuts": {"init_jitter": -0.1}}, r"nuts\.init_jitter must be in \[0"),
    ({"nuts": {"rhat_max": 0.9}}, r"nuts\.rhat_max must be in \[1"),
    ({"nuts": {"ess_min": -1}}, r"nuts\.ess_min must be in \[0"),
    ({"nuts": {"parametrization": "polar"}},
     r"nuts\.parametrization must be one of 'auto', 'chart', 'factored'"),
    ({"nuts": {"chart_rank": 0}}, r"nuts\.chart_rank must be >= 1, got 0"),
    ({"nuts": {"chart_rank": 2}}, r"nuts\.chart_rank must be at most the rank 1, got 2"),
    ({"nuts": {"chart_rank": 1, "parametrization": "factored"}},
     r"nuts\.chart_rank is for nuts\.parametrization"),
    ({"nuts": {"blas_threads": 0}}, r"nuts\.blas_threads must be >= 1, got 0"),
    ({"nuts": "fast"}, r"nuts must be a NUTS, a dict of its settings or None, got str"),
    ({"method": "vi", "vi": {"method": "svgd"}}, r"vi\.method must be one of 'advi', 'fullrank_advi'"),
    ({"method": "vi", "vi": {"iterations": 0}}, r"vi\.iterations must be >= 1, got 0"),
    ({"method": "vi", "vi": {"learning_rate": 0.0}}, r"vi\.learning_rate must be in \(0"),
    ({"method": "vi", "vi": {"learning_rate": -0.01}}, r"vi\.learning_rate must be in \(0"),
    ({"method": "vi", "vi": {"learning_rate": np.inf}}, r"vi\.learning_rate must be in \(0"),
    ({"method": "vi", "vi": {"draws": 0}}, r"vi\.draws must be >= 1, got 0"),
    ({"method": "vi", "vi": {"lr": 0.1}}, r"vi has no setting 'lr'"),
    ({"method": "map", "map": {"draws": 0}}, r"map\.draws must be >= 1, got 0"),
    ({"method": "map", "map": {"draw": 10}}, r"map has no setting 'draw'"),
    ({"ridge": -1.0}, r"ridge must be in \[0"),
    ({"ridge": np.nan}, r"ridge must be in"),
    ({"ridge": "small"}, r"ridge must be a real number, got 'small'"),
    ({"random_seed": -1}, r"random_seed must be >= 0, got -1"),
    ({"random_seed": "a"}, r"random_seed must be an integer, got 'a'"),
    ({"random_seed": 1.5}, r"random_seed must be an integer, got 1\.5"),
    ({"random_seed": None}, r"random_seed must be an integer, got None"),
    ({"predictive_draws": -1}, r"predictive_draws must be >= 0, got -1"),
    ({"predictive_draws": 2.5}, r"predictive_draws must be an integer"),
    ({"progressbar": "yes"}, r"progressbar must be a bool, got 'yes'"),
    ({"progressbar": 1}, r"progressbar must be a bool, got 1"),
    ({"start": "mle"}, r"start must be a LowRankResult, got str"),
    ({"basis": "rtv"}, r"basis must be an RTVBasis, a LowRankResult or None, got str"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_SETTINGS, ids=[str(k) for k, _ in BAD_SETTINGS])
def test_a_bad_setting_is_refused_naming_it(data, kwargs, message):
    refused(lambda: bb.fit_posterior(data, 1, **({"progressbar": False} | kwargs)), match=message)


@pytest.mark.parametrize(("rank", "message"), [
    (0, r"rank must be in \[1, 4\], got 0"), (5, r"rank must be in \[1, 4\], got 5"),
    (1.0, r"rank must be an integer, got 1\.0"), ("2", r"rank must be an integer, got '2'"),
    (None, r"rank must be an integer, got None")])
def test_a_bad_rank_is_refused(data, rank, message):
    refused(lambda: bb.fit_posterior(data, rank, progressbar=False), match=message)


@pytest.mark.parametrize("bad", [None, np.zeros((3, 3)), "data.csv", [1, 0, 1]])
def test_data_that_are_not_preference_data_are_refused(bad):
    refused(lambda: bb.fit_posterior(bad, 1, progressbar=False), match=r"data must be a PreferenceData")


def test_a_start_or_basis_of_other_dimensions_is_refused(data):
    other = bl.simulate.paper_problem(d_x=5, d_a=3, d_s=2, rank=1, seed=1).sample(200, seed=1)
    start = bl.fit_low_rank(other, 1)
    refused(lambda: bb.fit_posterior(data, 1, start=start, progressbar=False),
            match=r"start has rank 1 and Θ of shape \(5, 4\); expected rank 1 and \(4, 4\)")
    refused(lambda: bb.fit_posterior(data, 1, basis=bl.rtv_basis(start.theta, 1), progressbar=False),
            match=r"basis has rank 1 and \(d_x, d_phi\) = \(5, 4\); expected rank 1 and \(4, 4\)")


def test_a_diverging_vi_names_its_learning_rate(data):
    refused(lambda: bb.fit_posterior(data, 1, method="vi", vi={"learning_rate": 1e6, "iterations": 200},
                                     progressbar=False, predictive_draws=0),
            match=r"ADVI diverged: its parameters became NaN with vi\.learning_rate=1e\+06; lower "
                  r"vi\.learning_rate \(the default is 0\.01\)")


def test_one_draw_of_one_chain_is_never_called_converged(data):
    post = warned(lambda: bb.fit_posterior(data, 1, nuts={"draws": 1, "chains": 1, "tune": 10,
                                                          "sampler": "pymc"},
                                           progressbar=False, predictive_draws=0),
                  match=r"ESS cannot be estimated from 1 chain\(s\) × 1 draw\(s\), so this fit is not "
                        r"checked",
                  category=bl.SamplerWarning)
    assert not post.diagnostics.converged
    assert post.advice == {"draws": 2}


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.summary(level=1.0), r"level must be in \(0, 1\), got 1\.0"),
    (lambda p: p.summary(level="95%"), r"level must be a real number, got '95%'"),
    (lambda p: p.calibrated_set(level=0.0), r"level must be in \(0, 1\)"),
    (lambda p: p.calibrated_set(level=0.9, kind="box"), r"kind must be one of"),
    (lambda p: p.calibrated_set(level=np.nan), r"level must be finite"),
])
def test_a_posterior_refuses_bad_arguments_to_its_methods(posterior, call, message):
    refused(lambda: call(posterior), match=message)
