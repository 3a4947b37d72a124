"""Compile once: a second fit of the same shape reuses nutpie's compiled log density.

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
from bayes_loco.bayes import watch as watch_module


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
                                                                  rank, monkeypatch):
    first_data, second_data, longer = two_data_sets
    samplers.clear_cache()
    compilations = []
    compile_model = samplers.nutpie.compile_pymc_model
    monkeypatch.setattr(samplers.nutpie, "compile_pymc_model",
                        lambda *args, **kwargs: compilations.append(1) or compile_model(*args, **kwargs))
    first = _fit(first_data, parametrization, backend, rank=rank)
    second = _fit(second_data, parametrization, backend, rank=rank)
    attrs = [post.tree["posterior"].attrs for post in (first, second)]
    assert [a["compiled_model_reused"] for a in attrs] == [0, 1]
    assert first.settings["nuts"]["backend"] == backend
    # The reuse only swaps inputs: nutpie compiled once for the two fits.
    assert len(compilations) == 1 and np.isfinite(attrs[1]["compile_time"])
    # The reused model drew exactly what a fresh compilation draws on the second data set...
    samplers.clear_cache()
    fresh = _fit(second_data, parametrization, backend, rank=rank)
    assert fresh.tree["posterior"].attrs["compiled_model_reused"] == 0
    np.testing.assert_array_equal(second.rtv_draws, fresh.rtv_draws)
    # ...which are not the first data set's draws (its inputs were replaced, not kept).
    assert not np.array_equal(first.rtv_draws, second.rtv_draws)
    # Another N is another shape: compiled anew, and with room for one model the cache keeps the newest.
    bl.set_config(cache_size=1)
    third = _fit(longer, parametrization, backend, rank=rank)
    assert third.tree["posterior"].attrs["compiled_model_reused"] == 0
    assert len(compilations) == 3 and len(samplers._CACHE) == 1


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


def _trace_read_while_sampling(depth: np.ndarray, drawn: np.ndarray) -> xr.DataTree:
    """nutpie's trace as read while sampling: ``drawn[c]`` warm-up draws of chain c, padded as nutpie pads
    (0 in the integer depth, NaN in the float step size)."""
    behind = np.arange(depth.shape[1]) >= drawn[:, None]
    stats = xr.Dataset({"depth": (("chain", "draw"), np.where(behind, 0, depth).astype(np.uint64)),
                        "step_size": (("chain", "draw"), np.where(behind, np.nan, 0.3))})
    return xr.DataTree.from_dict({"warmup_sample_stats": stats})


def test_the_warm_up_depth_is_read_once_every_chain_has_drawn_the_window():
    first, last = bl.get_config()["watch_draws"]
    rng = np.random.default_rng(3)
    depth = rng.integers(1, 11, size=(4, last + 40))
    depth[1, first + 3] = 0  # a draw that diverged at its first step: drawn, of depth 0
    done = np.full(4, last + 40)
    read = watch_module.warmup_depth(_trace_read_while_sampling(depth, done))
    assert read == pytest.approx(depth[:, first:last].mean())
    # On two cores the last two chains start when the first two end: the first two are read.
    two = watch_module.warmup_depth(_trace_read_while_sampling(depth, np.array([last, last + 9, 0, 0])))
    assert two == pytest.approx(depth[:2, first:last].mean())
    one = watch_module.warmup_depth(_trace_read_while_sampling(depth, np.array([last - 1, last + 9, 3, 0])))
    assert one == pytest.approx(depth[1, first:last].mean())
    assert watch_module.warmup_depth(_trace_read_while_sampling(depth, np.array([last - 1, 9, 0, 0]))) is None
    assert watch_module.warmup_depth(_trace_read_while_sampling(depth[:, : last - 1], done - 41)) is None
    assert watch_module.warmup_depth(xr.DataTree()) is None


def test_the_rest_of_a_run_is_projected_from_its_draws_so_far():
    last = bl.get_config()["watch_draws"][1]
    depth = np.full((4, last + 40), 7)
    # Two chains of four have drawn 150 and 170 of 2,000 draws in 16 s: 8,000 - 320 left at 0.05 s each.
    tree = _trace_read_while_sampling(depth, np.array([last, last + 20, 0, 0]))
    assert watch_module.remaining_seconds(tree, 16.0, 8000) == pytest.approx(16.0 * 7680 / 320)
    # Draws after the warm-up count too; a trace with no draw yet projects no end.
    after = xr.Dataset({"step_size": (("chain", "draw"), np.full((4, 10), 0.3))})
    grown = xr.DataTree.from_dict({"warmup_sample_stats": tree["warmup_sample_stats"].to_dataset(),
                                   "sample_stats": after})
    assert watch_module.remaining_seconds(grown, 18.0, 8000) == pytest.approx(18.0 * 7640 / 360)
    none_yet = _trace_read_while_sampling(depth, np.zeros(4, int))
    assert watch_module.remaining_seconds(none_yet, 1.0, 8000) == np.inf


def test_a_watch_stops_deep_trees_and_shallower_ones_in_long_runs():
    watch = watch_module.Watch(8.0, 7.0, 100.0)
    assert watch.why(7.9, 99.0) is None and watch.why(6.9, 1e6) is None
    assert watch.why(8.0, 0.0).endswith("mean depth 8.0 over its draws 50-150 >= 8")
    assert watch.why(7.2, 213.0).endswith(">= 7, the rest of its run projected to take 213 s >= 100 s")
    assert watch_module.Watch(8.0).why(7.9, np.inf) is None


def test_a_watched_run_draws_what_an_unwatched_one_draws_and_stops_on_deep_trees(two_data_sets):
    data = two_data_sets[0]
    model = bb.build_model(data, 1)
    start = samplers.factor_start(*bb.balanced_factors(bl.fit_low_rank(data, 1).theta, 1), 0.1,
                                  np.random.default_rng(0))
    key = ("watched", data.n)

    def sample(watch):
        return samplers.sample_nutpie(model, key, start, draws=50, tune=200, chains=2, cores=1, seed=7,
                                      target_accept=0.9, progressbar=False, watch=watch)

    # Never stopped: no depth reaches 30, and no run of 600 comparisons is projected to take a day.
    plain, watched = sample(None), sample(watch_module.Watch(30.0, 1.0, 86_400.0))
    assert set(watched.children) == set(plain.children)  # no warm-up groups left behind
    for name in ("U", "V"):
        np.testing.assert_array_equal(watched["posterior"][name].values, plain["posterior"][name].values)
    with pytest.raises(watch_module.DeepWarmup, match="mean depth") as stop:
        sample(watch_module.Watch(1.0))  # every tree is at least one level deep
    # The rank-1 factored model on 600 comparisons takes shallow trees (2^2-2^4 leapfrog steps).
    assert 1.0 <= stop.value.depth <= 5.0
    assert plain["sample_stats"]["depth"].mean() == pytest.approx(stop.value.depth, abs=1.0)
    # A shallower depth stops it where the rest of the run is projected to take long enough.
    with pytest.raises(watch_module.DeepWarmup, match=r"projected to take \d+ s >= 0 s") as long_run:
        sample(watch_module.Watch(30.0, 1.0, 0.0))
    assert 0.0 <= long_run.value.remaining < 600.0  # 0 where the chains ended before the first read


def _cliff():
    """A standard normal with a cliff: the log density drops by 10⁴ past x = 1.

    The gradient does not see the cliff, so no step size the warm-up adapts avoids it, and
    every leapfrog step over it changes the energy by 10⁴, past nutpie's divergence threshold
    (1,000). A trajectory's orbit reaches x > 1 with probability about 0.3 whatever the step
    (about 30 % of draws diverged under six seeds), so 1,000 draws without a divergence have
    probability below 0.7¹⁰⁰⁰ ≈ 10⁻¹⁵⁰: a run without one is a defect, not luck.
    """
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("cliff", pt.switch(x > 1.0, -1e4, 0.0))
    return model, {"x": np.array(0.1)}  # nutpie refuses a start of zero gradient


def test_a_run_watched_for_divergences_stops_at_its_first():
    model, start = _cliff()

    def sample(watch, draws):
        return samplers.sample_nutpie(model, "cliff", start, draws=draws, tune=200, chains=1, cores=1,
                                      seed=3, target_accept=0.8, progressbar=False, watch=watch)

    plain = sample(None, 1000)
    diverging = np.flatnonzero(plain["sample_stats"]["diverging"].values[0])
    assert diverging.size  # the cliff makes divergences after the warm-up certain (_cliff)
    with pytest.raises(watch_module.Diverged, match=r"divergent draws? of the first") as stop:
        sample(watch_module.Watch(divergence=True), 200_000)
    # Stopped early: nutpie tells the first divergence within a tenth of a second, the watch reads it within
    # a few seconds; the 200,000 draws would take minutes.
    assert 1 <= stop.value.divergences <= stop.value.draws < 100_000
    assert stop.value.depth is not None and 0.0 < stop.value.depth < 10.0
    # Without the flag the watch lets the run draw to its end, divergences and all, as unwatched.
    whole = sample(watch_module.Watch(30.0), 1000)
    np.testing.assert_array_equal(whole["posterior"]["x"].values, plain["posterior"]["x"].values)


def test_the_divergences_told_are_those_after_the_warm_up_and_the_end_is_told_at_once():
    class Chain:
        def __init__(self, draws, finished=10, total=300):
            self.divergent_draws, self.finished_draws, self.total_draws = draws, finished, total

    told = watch_module._Progress(tune=100, divergence=True)
    told([Chain([3, 99]), Chain([])])
    assert told.count == 0 and not told.told.is_set()  # warm-up divergences steer the adaptation only
    told([Chain([3, 99, 100]), Chain([250, 400])])
    assert told.count == 3 and told.told.is_set()
    # A watch of the warm-up's depth alone is woken by the run's end, not by a divergence.
    depth_only = watch_module._Progress(tune=100, divergence=False)
    depth_only([Chain([150], finished=300), Chain([], finished=299)])
    assert depth_only.count == 1 and not depth_only.told.is_set()
    depth_only([Chain([150], finished=300), Chain([], finished=300)])
    assert depth_only.told.is_set()


def test_a_stop_counts_its_divergences_and_draws_from_one_source():
    import xarray as xr

    class Chain:
        def __init__(self, draws, finished):
            self.divergent_draws, self.finished_draws, self.total_draws = draws, finished, 10_000

    told = watch_module._Progress(tune=100, divergence=True)
    told([Chain(list(range(100, 3100)), 3200)])  # nutpie's report, later than the trace read below
    assert (told.count, told.drawn) == (3000, 3100)

    def read(diverging):
        n = len(diverging)
        stats = xr.Dataset({"step_size": (("chain", "draw"), np.full((1, n), 0.5)),
                            "diverging": (("chain", "draw"), np.array([diverging])),
                            "depth": (("chain", "draw"), np.full((1, n), 2))})
        return xr.DataTree.from_dict({"sample_stats": stats})

    # The trace shows divergences: its own pair, never the later report's count over the trace's draws.
    stop = watch_module._stopped_at_divergence(read([False, True, True, False]), told, 1.0)
    assert (stop.divergences, stop.draws) == (2, 4)
    # The trace was read before the first divergence: the report's own pair.
    stop = watch_module._stopped_at_divergence(read([False] * 5), told, 1.0)
    assert (stop.divergences, stop.draws) == (3000, 3100)
    assert stop.divergences <= stop.draws
