"""Compile once (issue #32): a second fit of the same shape reuses nutpie's compiled log density.

The reused model must draw exactly what a freshly compiled one draws (the data and
the chart's frame are inputs, not constants baked into the compiled code), and a
model of another shape must not be reused.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import xarray as xr

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import samplers


@pytest.fixture(scope="module")
def two_data_sets():
    problem = bl.simulate.paper_problem(d_x=5, d_a=4, d_s=3, rank=1, seed=4)
    return problem.sample(600, seed=1), problem.sample(600, seed=2), problem.sample(700, seed=3)


def _fit(data, parametrization, backend="numba", draws=60, seed=5, rank=1):
    nuts = {"draws": draws, "tune": draws, "chains": 2, "sampler": "nutpie", "backend": backend,
            "parametrization": parametrization, "ess_min": 0.0, "rhat_max": 10.0,
            "chart_rank": 1 if parametrization == "chart" else None}
    return bb.fit_posterior(data, rank, nuts=nuts, progressbar=False, predictive_draws=0, random_seed=seed)


needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")


# The chart compiles in 20-30 s against the factored model's 10: its case runs with the slow tests.
# JAX builds its graph in about a second and jits at the first gradient, within sampling.
# At rank 2 the chart of one component has a weak block, whose whitening (M_k, M_W) is an input too.
@pytest.mark.parametrize(("parametrization", "backend", "rank"), [
    ("factored", "numba", 1), pytest.param("chart", "numba", 1, marks=pytest.mark.slow),
    pytest.param("chart", "numba", 2, marks=pytest.mark.slow),
    pytest.param("factored", "jax", 1, marks=needs_jax), pytest.param("chart", "jax", 1, marks=needs_jax),
    pytest.param("chart", "jax", 2, marks=needs_jax)])
def test_a_second_fit_of_the_same_shape_reuses_the_compiled_model(two_data_sets, parametrization, backend,
                                                                  rank):
    first_data, second_data, longer = two_data_sets
    samplers.clear_cache()
    first = _fit(first_data, parametrization, backend, rank=rank)
    second = _fit(second_data, parametrization, backend, rank=rank)
    attrs = [post.tree["posterior"].attrs for post in (first, second)]
    assert [a["compiled_model_reused"] for a in attrs] == [0, 1]
    assert first.settings["nuts"]["backend"] == backend
    # The reuse only swaps inputs (issue #32's bar: under one second); numba's compilation took seconds.
    assert attrs[1]["compile_time"] < 1.0
    assert backend == "jax" or attrs[0]["compile_time"] > 1.0
    # The reused model drew exactly what a fresh compilation draws on the second data set...
    samplers.clear_cache()
    fresh = _fit(second_data, parametrization, backend, rank=rank)
    assert fresh.tree["posterior"].attrs["compiled_model_reused"] == 0
    np.testing.assert_array_equal(second.rtv_draws, fresh.rtv_draws)
    # ...which are not the first data set's draws (its inputs were replaced, not kept).
    assert not np.array_equal(first.rtv_draws, second.rtv_draws)
    # Another N is another shape: compiled anew.
    third = _fit(longer, parametrization, backend, rank=rank)
    assert third.tree["posterior"].attrs["compiled_model_reused"] == 0


@needs_jax
def test_nutpie_over_jax_draws_the_posterior_that_numba_does(two_data_sets):
    """One sampler, two compilations of one log density: the means agree within their Monte Carlo error,
    and nutpie's adaptation makes the same number of leapfrog steps per draw."""
    data = two_data_sets[0]
    fits = [_fit(data, "chart", backend, draws=400, seed=7) for backend in ("numba", "jax")]
    moments = []
    for fit in fits:
        draws = fit.rtv_draws.reshape(-1, fit.rtv_draws.shape[-1])
        moments.append((draws.mean(0), draws.std(0), fit.diagnostics.min_ess_bulk))
    (m1, s1, e1), (m2, s2, e2) = moments
    z = np.abs(m1 - m2) / np.sqrt(s1**2 / e1 + s2**2 / e2)
    assert z.max() < 4.0, z
    steps = [float(fit.tree["sample_stats"]["n_steps"].mean()) for fit in fits]
    assert abs(np.log(steps[1] / steps[0])) < np.log(1.3), steps


def test_the_cache_keeps_the_most_recent_models(two_data_sets, monkeypatch):
    first_data, _, longer = two_data_sets
    monkeypatch.setattr(samplers, "CACHE_SIZE", 1)
    samplers.clear_cache()
    _fit(first_data, "factored")
    _fit(longer, "factored")  # evicts the first shape
    assert len(samplers._CACHE) == 1
    assert _fit(first_data, "factored").tree["posterior"].attrs["compiled_model_reused"] == 0


def _trace_read_while_sampling(depth: np.ndarray, drawn: np.ndarray) -> xr.DataTree:
    """nutpie's trace as read while sampling: ``drawn[c]`` warm-up draws of chain c, padded as nutpie pads
    (0 in the integer depth, NaN in the float step size)."""
    behind = np.arange(depth.shape[1]) >= drawn[:, None]
    stats = xr.Dataset({"depth": (("chain", "draw"), np.where(behind, 0, depth).astype(np.uint64)),
                        "step_size": (("chain", "draw"), np.where(behind, np.nan, 0.3))})
    return xr.DataTree.from_dict({"warmup_sample_stats": stats})


def test_the_warm_up_depth_is_read_once_every_chain_has_drawn_the_window():
    first, last = samplers.WATCH_DRAWS
    rng = np.random.default_rng(3)
    depth = rng.integers(1, 11, size=(4, last + 40))
    depth[1, first + 3] = 0  # a draw that diverged at its first step: drawn, of depth 0
    done = np.full(4, last + 40)
    read = samplers.warmup_depth(_trace_read_while_sampling(depth, done))
    assert read == pytest.approx(depth[:, first:last].mean())
    # On two cores the last two chains start when the first two end: the first two are read.
    two = samplers.warmup_depth(_trace_read_while_sampling(depth, np.array([last, last + 9, 0, 0])))
    assert two == pytest.approx(depth[:2, first:last].mean())
    assert samplers.warmup_depth(_trace_read_while_sampling(depth, np.array([last - 1, last + 9, 3, 0]))) == (
        pytest.approx(depth[1, first:last].mean()))
    assert samplers.warmup_depth(_trace_read_while_sampling(depth, np.array([last - 1, 9, 0, 0]))) is None
    assert samplers.warmup_depth(_trace_read_while_sampling(depth[:, : last - 1], done - 41)) is None
    assert samplers.warmup_depth(xr.DataTree()) is None


def test_a_watched_run_draws_what_an_unwatched_one_draws_and_stops_on_deep_trees(two_data_sets):
    data = two_data_sets[0]
    model = bb.build_model(data, 1)
    start = samplers.factor_start(*bb.balanced_factors(bl.fit_low_rank(data, 1).theta, 1), 0.1,
                                  np.random.default_rng(0))
    key = ("watched", data.n)

    def sample(deep_tree):
        return samplers.sample_nutpie(model, key, start, draws=50, tune=200, chains=2, cores=1, seed=7,
                                      target_accept=0.9, progressbar=False, deep_tree=deep_tree)

    plain, watched = sample(None), sample(30.0)
    assert set(watched.children) == set(plain.children)  # no warm-up groups left behind
    for name in ("U", "V"):
        np.testing.assert_array_equal(watched["posterior"][name].values, plain["posterior"][name].values)
    with pytest.raises(samplers.DeepWarmup, match="mean depth") as stop:
        sample(1.0)  # every tree is at least one level deep
    # The rank-1 factored model on 600 comparisons takes shallow trees (2^2-2^4 leapfrog steps).
    assert 1.0 <= stop.value.depth <= 5.0
    assert plain["sample_stats"]["depth"].mean() == pytest.approx(stop.value.depth, abs=1.0)
