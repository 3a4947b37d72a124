"""The default posterior's choices: its start, its coordinates, its fall-back and its advice.

The choices are checked where they are decided (``choose_geometry``, ``default_start``,
``_advice``) and end to end on a reported case, where the old default (the chart)
diverged and the factored model did not.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import warnings

import numpy as np
import pytest
import xarray as xr
from conftest import repeated_rows
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import diagnostics as diagnostics_module
from bayes_loco.bayes import fit as fit_module
from bayes_loco.bayes import geometry
from bayes_loco.bayes import watch as watch_module
from bayes_loco.bayes.chart import chart_frame
from bayes_loco.bayes.diagnostics import leapfrog_steps, ranking
from bayes_loco.model import margins


def setting(name: str):
    """The current value of a tuning setting (bayes_loco.config)."""
    return bl.get_config()[name]


ISSUE = {"d_x": 8, "d_a": 6, "d_s": 5, "rank": 2, "imbalance": 3, "seed": 11}


@pytest.fixture(scope="module")
def issue_data():
    """The reported case: ``paper_problem(8, 6, 5, rank 2, q = 3, seed 11).sample(1000, seed=12)``."""
    return bl.simulate.paper_problem(**ISSUE).sample(1000, seed=12)


def separable_data(n: int = 200, seed: int = 0) -> bl.PreferenceData:
    """Labels given by the sign of one feature: the unpenalised MLE runs off to infinity."""
    rng = np.random.default_rng(seed)
    x = np.ones((n, 1)) + 0.1 * rng.standard_normal((n, 1))
    dphi = rng.standard_normal((n, 3))
    y = (dphi[:, 0] > 0).astype(np.int8)
    return bl.PreferenceData(x, dphi, y)


def strong_data(n: int, seed: int) -> bl.PreferenceData:
    """A rank-1 Θ* of norm 3 that the data determine well."""
    rng = np.random.default_rng(seed)
    theta = 3.0 * np.outer(rng.standard_normal(4), rng.standard_normal(5)) / np.sqrt(20)
    x, dphi = rng.standard_normal((n, 4)), rng.standard_normal((n, 5))
    y = (rng.random(n) < expit(np.einsum("ij,ij->i", x @ theta, dphi))).astype(np.int8)
    return bl.PreferenceData(x, dphi, y)


# ------------------------------------------------------------------------------------ the start


def test_a_separated_start_is_replaced_by_the_ridge_fit_and_said_so():
    data = separable_data()
    with pytest.warns(bl.SeparationWarning):
        plain = bl.fit_low_rank(data, 1)
    assert plain.initial.separated
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the plain fit's separation warning is not passed on
        start, ridge, note = geometry.default_start(data, 1, 0.0, scale=2.0)
    assert ridge == pytest.approx(setting("start_ridge") / 4.0)
    np.testing.assert_allclose(start.theta, bl.fit_low_rank(data, 1, ridge=0.25).theta)
    # The plain fit ran off (its MLE's margins grow without bound); the ridge holds the start finite.
    held = np.abs(margins(start.theta, data.contexts, data.differences)).max()
    assert held < 0.1 * plain.initial.max_abs_margin
    assert "ridge fit (λ = 0.25)" in note and geometry.separated_start(note)


def test_a_start_replaced_for_another_reason_is_not_read_as_separated():
    note = ("started from the ridge fit (λ = 1): the unpenalised start was unusable (FGD did not converge, "
            "largest singular value 3)")
    assert not geometry.separated_start(note)


@pytest.mark.parametrize("separable", [True, False])
def test_chains_that_disagree_on_separable_data_are_told_why_more_draws_may_not_help(separable):
    # Any R-hat misses 1 + 1e-7: the warning names separation only where the plain start was separated.
    data = separable_data() if separable else strong_data(400, seed=1)
    nuts = {"draws": 100, "tune": 100, "chains": 2, "rhat_max": 1.0000001,
            "plan": [{"parametrization": "factored"}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = bb.fit_posterior(data, 1, nuts=nuts, progressbar=False, predictive_draws=0, random_seed=1)
    told = [str(w.message) for w in caught if "look separable" in str(w.message)]
    assert any("chains disagree" in str(w.message) for w in caught)
    start_note = post.settings["geometry"].get("start", "")
    assert len(told) == int(separable) and geometry.separated_start(start_note) == separable
    assert all("prior={'scale': ...}" in t for t in told)
    assert len([m for m in post.diagnostics.warnings if "look separable" in m]) == int(separable)


def test_a_separated_start_the_user_gives_is_kept_and_warned_about():
    data = separable_data()
    with pytest.warns(bl.SeparationWarning):
        plain = bl.fit_low_rank(data, 1)
    with pytest.warns(bl.SeparationWarning, match=r"start predicts .* ridge=0.25\)") as caught:
        post = bb.fit_posterior(data, 1, method="map", start=plain, prior={"scale": 2.0}, progressbar=False,
                                predictive_draws=0)
    # Named in the user's own call (the warning points at this file), and the start is the one given.
    assert any(w.filename == __file__ for w in caught)
    assert post.settings["ridge"] == 0.0  # the default would have started from the ridge fit (λ = 0.25)
    # A usable start passes without a word.
    strong = strong_data(400, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.SeparationWarning)
        geometry.check_user_start(bl.fit_low_rank(strong, 1), strong, 1.0)


def test_a_usable_start_is_the_plain_fit():
    data = strong_data(400, seed=1)
    start, ridge, note = geometry.default_start(data, 1, 0.0, scale=1.0)
    assert (ridge, note) == (0.0, "") and not geometry.separated_start(note)
    np.testing.assert_allclose(start.theta, bl.fit_low_rank(data, 1).theta)
    # A ridge the user asked for is used as given.
    start, ridge, note = geometry.default_start(data, 1, 3.0, scale=1.0)
    assert (ridge, note) == (3.0, "")
    np.testing.assert_allclose(start.theta, bl.fit_low_rank(data, 1, ridge=3.0).theta)


# ------------------------------------------------------------------------------- the coordinates


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("n", [150, 600, 3000, 5000])
def test_auto_charts_only_where_the_ridge_is_long(n, rank):
    data = strong_data(n, seed=2)
    start = bl.fit_low_rank(data, rank)
    frame = chart_frame(data, start.theta, rank)
    chosen = geometry.choose_geometry(data, rank, start.theta, 1.0, "auto", None)
    assert chosen.automatic
    long_ridge = frame.leading_snr >= setting("snr_chart") and rank > 1
    if (long_ridge or n >= setting("n_chart")) and frame.chartable_rank:
        assert (chosen.parametrization, chosen.chart_rank) == ("chart", frame.chartable_rank)
        assert "determined" in chosen.reason
    else:
        assert (chosen.parametrization, chosen.chart_rank) == ("factored", None)
        if frame.leading_snr < setting("snr_chart"):
            assert f"{frame.leading_snr:.1f} < {setting("snr_chart"):g} and N = {n}" in chosen.reason
        else:  # rank 1 below config["n_chart"]: a ratio above the threshold is not enough (no rotation ridge)
            assert f"rank 1 and N = {n} < {setting("n_chart")}" in chosen.reason


@pytest.mark.parametrize("rank", [1, 2])
def test_auto_judges_counted_rows_by_the_comparisons_they_stand_for(rank):
    # 1,800 rows each counted 3 times: N = 5,400 comparisons reach config["n_chart"] where 1,800 rows do not.
    data = strong_data(1800, seed=2)
    expanded = repeated_rows(data, 3)
    counted = expanded.aggregate()
    assert counted.n == data.n < setting("n_chart") <= counted.n_comparisons
    chosen = [geometry.choose_geometry(d, rank, bl.fit_low_rank(d, rank).theta, 1.0, "auto", None)
              for d in (counted, expanded)]
    assert [(c.parametrization, c.chart_rank, c.reason) for c in chosen] == \
        [(chosen[1].parametrization, chosen[1].chart_rank, chosen[1].reason)] * 2
    if rank == 1:  # at rank 1 only N decides
        assert chosen[0].parametrization == "chart"


def test_auto_does_not_chart_a_determined_component_near_zero(monkeypatch):
    # Θ* of rank 1 fitted at rank 2 on 4 x 5 features: the noise component's column space looks
    # determined (a small space), but its singular value is within a few standard deviations of 0.
    data = strong_data(3000, seed=2)
    start = bl.fit_low_rank(data, 2)
    frame = chart_frame(data, start.theta, 2)
    assert frame.determined_rank == 2 and frame.snr[1] < setting("snr_charted_min") <= frame.snr[0]
    assert frame.chartable_rank == 1
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert (chosen.parametrization, chosen.chart_rank) == ("chart", 1)
    # The chartable components are a leading run: determined, and each snr_charted_min from 0.
    for angles, snr, expected in [((0.1, 0.1, 0.1), (30, 4.9, 30), 1), ((0.1, 0.1, 0.1), (30, 5, 30), 3),
                                  ((0.1, 0.6, 0.1), (30, 30, 30), 1), ((0.1, 0.1, 0.1), (4, 30, 30), 0)]:
        stand_in = dataclasses.replace(frame, angles=np.array(angles), snr=np.array(snr, dtype=float),
                                       singular_values=np.ones(3), chart_rank=3)
        assert stand_in.chartable_rank == expected, (angles, snr)

    # None chartable (N large enough to chart at all): the factored model, the reason names both measures.
    weak = dataclasses.replace(frame, snr=np.array([4.0, 3.0]))
    monkeypatch.setattr(geometry, "chart_frame", lambda *args, **kwargs: weak)
    bl.set_config(n_chart=data.n)
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored"
    assert "signal-to-noise ratios [4. 3.] (at least 5)" in chosen.reason and "angles" in chosen.reason


def test_auto_keeps_the_factored_model_where_the_rank_fills_the_contexts_span():
    # q = 10, d_x = r = 2, N = 6,000 (charted before by N alone): the partial chart drew 0.41x the
    # factored model's ESS per second (docs/results.md, "Problems outside the grid's span").
    data = bl.simulate.paper_problem(2, 11, 2, 2, 10.0, 2225).sample(6000, seed=168)
    start = bl.fit_low_rank(data, 2, ridge=1.0)
    frame = chart_frame(data, start.theta, 2)
    assert frame.chartable_rank == 1 and frame.left.shape[1] == 2
    assert frame.leading_snr < setting("snr_chart") and data.n >= setting("n_chart")
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored" and chosen.automatic
    assert "the rank 2 fills the contexts' span (2 dimensions)" in chosen.reason
    # A chart rank the user names is kept.
    named = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", 1)
    assert (named.parametrization, named.chart_rank) == ("chart", 1)


def test_the_block_snr_adds_the_components_inverse_squares():
    frame = chart_frame(strong_data(3000, seed=2), bl.fit_low_rank(strong_data(3000, seed=2), 2).theta, 2)
    stand_in = dataclasses.replace(frame, snr=np.array([20.0, 5.0, 7.5]))
    # By hand: 1 / sqrt(1/400 + 1/25) and 1 / sqrt(1/400 + 1/25 + 1/56.25).
    assert [geometry.block_snr(stand_in, r) for r in (1, 2, 3)] == pytest.approx([20.0, 4.8507, 4.0730],
                                                                                 abs=1e-4)
    # r equal components: the block's SNR is theirs over √r.
    assert geometry.block_snr(dataclasses.replace(frame, snr=np.full(4, 6.0)), 4) == pytest.approx(3.0)


def test_auto_does_not_chart_a_block_of_weak_components():
    # q = 10, diagonal Θ* of rank 4 fitted at 6, N = 10,000 (unseen): "auto" charted r₁ = 4 (SNRs 5.8-7.4,
    # the block's 3.2); it diverged 5 times, twice at 0.95, and the factored model ran third: 0.52x its ESS
    # per second alone (docs/results.md, "Problems outside the grid's span").
    problem = bl.simulate.paper_problem(20, 10, 20, 4, 10.0, 1384, theta_kind="diagonal")
    data = problem.sample(10000, seed=1797)
    start, _, _ = geometry.default_start(data, 6, 0.0, 1.0)
    frame = chart_frame(data, start.theta, 6)
    assert frame.chartable_rank == 4 and geometry.block_snr(frame, 4) < setting("snr_block_min")
    chosen = geometry.choose_geometry(data, 6, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored" and chosen.automatic
    assert "the block of 4 determined components has a signal-to-noise ratio 3.2 < 5" in chosen.reason
    assert "its ratio coordinates bend together" in chosen.reason
    assert chosen.short_ridge_frame is None  # refused at the floor of a long ridge: not watched
    # A chart rank the user names is kept.
    named = geometry.choose_geometry(data, 6, start.theta, 1.0, "auto", 4)
    assert (named.parametrization, named.chart_rank) == ("chart", 4)


def test_auto_does_not_chart_several_components_where_the_ridge_is_short():
    # N = 3,000, q = 1, rank 2 fitted at 3 (unseen): "auto" charted r₁ = 2 (SNRs 23.2 and 5.6, the block's
    # 5.5); it diverged 12 times, 24 at 0.95, the chart of r₁ = 1 missed R-hat, and the factored model ran
    # fourth: 0.49x its ESS per second alone (docs/results.md, "Several components where the ridge is short").
    data = bl.simulate.paper_problem(9, 8, 12, 2, 1.0, 8655).sample(3000, seed=8043)
    start, _, _ = geometry.default_start(data, 3, 0.0, 1.0)
    frame = chart_frame(data, start.theta, 3)
    assert frame.leading_snr >= setting("snr_chart") and data.n < setting("n_chart") < setting("n_block")
    block = geometry.block_snr(frame, frame.chartable_rank)
    assert frame.chartable_rank == 2 and setting("snr_block_min") <= block < setting("snr_block_few")
    chosen = geometry.choose_geometry(data, 3, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored" and chosen.automatic
    assert f"has a signal-to-noise ratio {block:.1f} < 10 (N = 3000 < 6000)" in chosen.reason
    # Its factored model is watched: on deep trees the block (5.5 >= config["snr_block_min"]) takes its place
    # (strangers 9615 #6, rank 4, block 5.4, took 517 steps per draw unwatched).
    np.testing.assert_allclose(chosen.short_ridge_frame.snr, frame.snr)
    assert geometry.ridge_chart(chosen, data, 1.0, "").chart_rank == 2
    # From config["n_block"] on the same block is charted (the floor is config["snr_block_min"] there).
    with bl.config_context(n_block=data.n):
        many = geometry.choose_geometry(data, 3, start.theta, 1.0, "auto", None)
    assert (many.parametrization, many.chart_rank) == ("chart", 2)
    named = geometry.choose_geometry(data, 3, start.theta, 1.0, "auto", 2)
    assert (named.parametrization, named.chart_rank) == ("chart", 2)
    # A chart of one component below config["n_block"] keeps the floor of 5: §5.1 at q = 10, N = 5,000
    # (charted by N alone, its leading SNR 8.3 < config["snr_block_few"]).
    sim = bl.simulate.paper_problem(rank=3, imbalance=10).sample(5000, seed=1)
    start, _, _ = geometry.default_start(sim, 3, 0.0, 1.0)
    one = geometry.choose_geometry(sim, 3, start.theta, 1.0, "auto", None)
    assert sim.n < setting("n_block") and one.frame.leading_snr < setting("snr_block_few")
    assert (one.parametrization, one.chart_rank) == ("chart", 1)


# Each component stands snr_charted_min from 0 in all four; by hand, the blocks' SNRs are 5.88,
# 3.84, 4.93 (1 / sqrt(1/25 + 1/900): one component at the floor pulls the block below it) and 14.1.
@pytest.mark.parametrize(("snr", "charted"), [((30.0, 6.0), True), ((6.0, 5.0), False), ((5.0, 30.0), False),
                                              ((20.0, 20.0), True)])
def test_auto_charts_a_block_only_where_its_own_snr_reaches_the_floor(monkeypatch, snr, charted):
    data = strong_data(3000, seed=2)
    start = bl.fit_low_rank(data, 2)
    frame = chart_frame(data, start.theta, 2)
    stand_in = dataclasses.replace(frame, snr=np.array(snr), angles=np.array([0.1, 0.1]))
    assert stand_in.chartable_rank == 2
    monkeypatch.setattr(geometry, "chart_frame", lambda *args, **kwargs: stand_in)
    bl.set_config(n_chart=data.n)
    bl.set_config(n_block=data.n)
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert (chosen.parametrization, chosen.chart_rank) == (("chart", 2) if charted else ("factored", None))
    if not charted:
        block = geometry.block_snr(stand_in, 2)
        assert f"2 determined components has a signal-to-noise ratio {block:.1f} < 5" in chosen.reason


def test_n_alone_does_not_chart_a_partial_chart_about_a_noise_component(monkeypatch):
    # N = 20,000, d_x = 3, q = 30, rank 2 (unseen): the chart of r₁ = 1 (leading SNR 12.5 < 20, the weak
    # component's 2.0) diverged 21 and 3 times before 0.99, 0.33x the factored model's ESS per second.
    data = bl.simulate.paper_problem(10, 4, 3, 2, 30.0, 8898).sample(20000, seed=9321)
    start, _, _ = geometry.default_start(data, 2, 0.0, 1.0)
    frame = chart_frame(data, start.theta, 2)
    assert frame.chartable_rank == 1 and frame.leading_snr < setting("snr_chart") and frame.left.shape[1] == 3
    assert frame.snr[1] < setting("snr_weak_noise")
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored" and chosen.automatic
    assert f"the weak block holds a component {frame.snr[1]:.1f} standard deviations from 0" in chosen.reason
    # Where the weak component stands 3 or more from 0, and where the leading SNR reaches config["snr_chart"],
    # N charts whatever the weak block holds.
    # Its weak block is sampled as Z (d_x' − r + 1 = 2 < m), so the chart starts at the retry's target and
    # no retry at 0.95 follows a divergence (the frame here, kept whole, is not steady): the factored model.
    monkeypatch.setattr(geometry, "partial_frame", lambda frame, data, r, scale: frame)
    retry = setting("retry_target_accept")
    ladder = [(None, None), (None, 0.95), (None, 0.99)]
    for snr in ([12.5, 3.5], [25.0, 2.0]):
        replaced = dataclasses.replace(frame, snr=np.array(snr))
        monkeypatch.setattr(geometry, "chart_frame", lambda *args, replaced=replaced, **kwargs: replaced)
        chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
        assert (chosen.parametrization, chosen.chart_rank) == ("chart", replaced.chart_rank), snr
        assert not chosen.frame.weak_product and chosen.target_accept == retry == 0.95
        assert chosen.target(AT_90) == 0.95 and "its weak block is sampled as Z" in chosen.reason
        assert chosen.target(bb.NUTS(target_accept=0.99)) == 0.99  # never below the user's
        steps = geometry.fallbacks(chosen, data, 1.0, AT_90, _ran(1))
        assert [(g.chart_rank, g.target_accept) for g in steps] == ladder, snr
    monkeypatch.undo()
    named = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", 1)
    assert (named.parametrization, named.chart_rank) == ("chart", 1)


def test_the_leading_snr_grows_like_root_n_across_the_threshold():
    # The sizes above straddle both thresholds (3,000: a ratio above config["snr_chart"] below
    # config["n_chart"]), so every branch is exercised.
    snrs = [chart_frame(d, bl.fit_low_rank(d, 1).theta, 1).leading_snr
            for d in (strong_data(n, seed=2) for n in (150, 3000, 5000))]
    assert snrs[0] < setting("snr_chart") <= snrs[1] and 3000 < setting("n_chart") <= 5000
    assert 0.5 * np.sqrt(5000 / 150) < snrs[2] / snrs[0] < 2 * np.sqrt(5000 / 150)


def test_named_parametrizations_are_taken_as_named(issue_data):
    start = bl.fit_low_rank(issue_data, 2)
    chart = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "chart", 1)
    assert (chart.parametrization, chart.chart_rank, chart.automatic) == ("chart", 1, False)
    factored = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "factored", None)
    assert (factored.parametrization, factored.automatic) == ("factored", False)
    with pytest.raises(ValueError, match="chart_rank must be at most the rank 2, got 3"):
        geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "auto", 3)


def test_the_issue_case_is_factored_because_its_ridge_is_short(issue_data):
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)
    # The old rule charted both components here (determined), and NUTS diverged 11-23 times.
    assert frame.determined_rank == 2 and frame.leading_snr < setting("snr_chart")
    chosen = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "auto", None)
    assert chosen.parametrization == "factored"


# ------------------------------------------------------------------------------------ the advice


def _nuts(**kw):
    return bb.NUTS(**({"parametrization": "factored"} | kw))


def test_advice_for_divergences_in_the_chart_is_the_factored_model():
    advice = diagnostics_module._advice(_nuts(parametrization="chart"), 5, False, False)
    assert advice == {"parametrization": "factored"}


def test_advice_for_a_named_chart_on_a_long_ridge_is_its_retry_first():
    # Where the factored model's ridge is long, the chart at target_accept 0.95 (3 of 3 divergent charts
    # of the robustness grid had none there, in a third of the factored model's time), then the factored.
    chart = _nuts(parametrization="chart", target_accept=0.9, draws=400)
    assert diagnostics_module._advice(chart, 5, False, False, 0.95) == {"target_accept": 0.95, "draws": 800}
    ran = bb.NUTS(**(chart.__dict__ | {"target_accept": 0.95, "draws": 800}))
    assert diagnostics_module._advice(ran, 5, False, False, 0.95) == {"parametrization": "factored"}
    # A named chart_rank goes with the chart: the advice drops it, so that it can be followed as given.
    ranked = bb.NUTS(**(ran.__dict__ | {"chart_rank": 1}))
    advice = diagnostics_module._advice(ranked, 5, False, False, 0.95)
    assert advice == {"parametrization": "factored", "chart_rank": None}
    assert bb.NUTS(**(ranked.__dict__ | advice)).parametrization == "factored"
    # Followed to the end, no step is advised twice in a row.
    steps = []
    for _ in range(6):
        advice = diagnostics_module._advice(chart, 3, False, False, 0.95)
        if not advice:
            break
        assert not steps or advice != steps[-1]
        steps.append(advice)
        chart = bb.NUTS(**(chart.__dict__ | advice))
    assert [a.get("target_accept", a.get("parametrization")) for a in steps] == [0.95, "factored", 0.99]


def test_the_advised_target_is_for_named_charts_on_a_long_ridge(issue_data):
    start = bl.fit_low_rank(issue_data, 2)
    named = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "chart", None)
    assert not geometry.long_ridge(named.frame, issue_data.n)  # the reported case: 142 divergences at 0.95
    assert geometry.advised_target(named, issue_data.n) is None
    assert geometry.long_ridge(named.frame, setting("n_chart"))
    assert geometry.advised_target(named, setting("n_chart")) == setting("retry_target_accept")
    # An automatic chart's retry is a fall-back already, and the factored model has no chart to retry.
    automatic = geometry.Geometry(named.frame, "charted", True)
    assert geometry.advised_target(automatic, setting("n_chart")) is None
    assert geometry.advised_target(geometry.Geometry(None, "factored", False), setting("n_chart")) is None


@pytest.mark.parametrize(("ran", "expected"), [(0.8, 0.95), (0.9, 0.95), (0.95, 0.99), (0.99, None)])
def test_advice_for_divergences_in_the_factored_model_steps_target_accept_up(ran, expected):
    advice = diagnostics_module._advice(_nuts(target_accept=ran), 3, False, False)
    assert advice.get("target_accept") == expected
    # Smaller steps cost ESS per draw, so more draws come with them; nothing at all past the last step.
    assert ("draws" in advice) == (expected is not None)


def test_advice_for_short_chains_doubles_what_ran_and_never_repeats():
    nuts = _nuts(draws=300, tune=200)
    assert diagnostics_module._advice(nuts, 0, False, True) == {"draws": 600}
    assert diagnostics_module._advice(nuts, 0, True, False) == {"draws": 600, "tune": 600}
    assert diagnostics_module._advice(nuts, 0, False, False) == {}
    # Followed, the advice is never the same again: each step is computed from what ran.
    for divergences, rhat_bad, ess_bad in [(2, True, True), (1, False, True), (0, True, False)]:
        ran = _nuts(target_accept=0.9, draws=300, tune=200)
        for _ in range(4):
            advice = diagnostics_module._advice(ran, divergences, rhat_bad, ess_bad)
            if not advice:
                break
            followed = bb.NUTS(**(ran.__dict__ | advice))
            assert diagnostics_module._advice(followed, divergences, rhat_bad, ess_bad) != advice
            ran = followed


def test_advice_on_a_run_of_scaled_draws_is_in_the_draws_asked():
    # A partial chart ran 450 of the 300 asked: re-run with the advice, it runs twice what ran (900).
    ran = _nuts(draws=450, tune=200)
    assert diagnostics_module._advice(ran, 0, False, True, draws_scale=1.5) == {"draws": 600}
    assert diagnostics_module._advice(ran, 0, True, False, draws_scale=1.5) == {"draws": 600, "tune": 900}
    assert diagnostics_module._advice(ran, 0, True, False) == {"draws": 900, "tune": 900}
    # The factored model the advice names draws what is asked: twice what ran, unscaled.
    chart = _nuts(parametrization="chart", draws=450)
    advice = diagnostics_module._advice(chart, 2, True, False, draws_scale=1.5)
    assert advice["parametrization"] == "factored" and advice["draws"] == 900
    # Followed through the scale, each run draws twice the one before, never the same advice twice.
    asked, advised = 300, []
    for _ in range(3):
        ran = _nuts(draws=round(1.5 * asked), tune=200)
        advice = diagnostics_module._advice(ran, 0, False, True, draws_scale=1.5)
        assert advice["draws"] * 1.5 == 2 * ran.draws and advice not in advised
        advised.append(advice)
        asked = advice["draws"]


def test_a_lengthened_run_doubles_the_draws_and_tunes_at_least_as_long():
    # What the advice gives chains that disagree, and what "auto"'s factored retry runs.
    assert diagnostics_module.lengthened(_nuts(draws=300, tune=200)) == {"draws": 600, "tune": 600}
    assert diagnostics_module.lengthened(_nuts(draws=100, tune=500)) == {"draws": 200, "tune": 1000}
    lengthened = bb.NUTS(**(_nuts().__dict__ | diagnostics_module.lengthened(_nuts())))
    assert (lengthened.draws, lengthened.tune) == (2000, 2000)


# ------------------------------------------------------------------------------------ end to end


def test_the_issue_case_converges_and_its_advice_works(issue_data):
    # Half the default length first: where that falls short, the warning's advice (computed from what ran)
    # must give a fit without warnings and with more ESS; the fit it leads to is the default length.
    short_nuts = {"draws": 500, "tune": 500}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = bb.fit_posterior(issue_data, 2, nuts=short_nuts, progressbar=False, predictive_draws=0)
    assert bool(short.advice) == any(issubclass(w.category, bl.SamplerWarning) for w in caught)
    post = short
    if short.advice:
        assert all(f"re-run with nuts={short.advice}" in m for m in short.diagnostics.warnings)
        with warnings.catch_warnings():
            warnings.simplefilter("error", bl.SamplerWarning)
            post = bb.fit_posterior(issue_data, 2, nuts=short_nuts | short.advice, progressbar=False,
                                    predictive_draws=0)
        assert post.diagnostics.min_ess_bulk > short.diagnostics.min_ess_bulk
        assert post.diagnostics.divergences <= short.diagnostics.divergences
    d = post.diagnostics
    assert d.converged and d.divergences == 0 and d.max_rhat <= 1.01 and not post.advice
    record = post.settings["geometry"]
    assert record["parametrization"] == "factored" and not record["fell_back"]
    assert "signal-to-noise ratio" in record["reason"]
    # The record travels with the tree, and the summary says it.
    assert json.loads(post.tree.attrs["settings"])["geometry"] == record
    assert any("signal-to-noise" in note for note in post.summary().notes)


def test_a_troubled_auto_chart_falls_back_to_a_smaller_chart_then_the_factored_model(issue_data, monkeypatch):
    # Chart the reported case (as the old default did, whatever its block's SNR), and hold R-hat to a
    # bar no finite run meets, so every run is troubled whatever its divergences: the chart of the
    # leading component runs next (after the same chart at a higher target_accept where the first
    # run diverged), then the factored model.
    bl.set_config(snr_chart=0.0)
    bl.set_config(snr_block_min=0.0)
    bl.set_config(snr_block_few=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        post = bb.fit_posterior(issue_data, 2, nuts={"draws": 150, "tune": 300, "chains": 2,
                                                     "rhat_max": 1.0}, progressbar=False, predictive_draws=0)
    record = post.settings["geometry"]
    runs = [record["first"], *record["fallbacks"]]
    # A first run that diverged is retried in the same chart at target_accept 0.95 before the others;
    # the factored model then follows its own advice: 0.95 where it diverged, else twice the length.
    retried = [("chart", 2, 0.95, 150)] if record["first"]["divergences"] else []
    # The smaller chart starts at the retry's target where the first run was retried, else it is retried
    # at 0.95 where it diverged (its SNR is below config["snr_steady"]).
    smaller_target = 0.95 if retried else 0.9
    # The smaller chart is partial: it draws config["partial_draws"] times the draws.
    smaller = [("chart", 1, 0.95, 225)] if not retried and runs[1]["divergences"] else []
    at = len(retried) + len(smaller) + 2
    factored = runs[at]
    tail = [("factored", None, 0.95, 150)] if factored["divergences"] else []
    advised = runs[at + len(tail)]  # the factored run whose advice is followed, if any
    if not advised["divergences"] and 2 * min(advised["min_ess_bulk"], advised["min_ess_tail"]) >= 400:
        tail.append(("factored", None, advised["target_accept"], 300))
    ran = [(run["parametrization"], run["chart_rank"], run["target_accept"], run["draws"]) for run in runs]
    assert ran == [("chart", 2, 0.9, 150), *retried, ("chart", 1, smaller_target, 225), *smaller,
                   ("factored", None, 0.9, 150), *tail]
    assert runs[-1]["tune"] == (600 if runs[-1]["draws"] == 300 else 300)

    def name(run):
        targets = len({r["target_accept"] for r in runs}) > 1
        lengths = len({r["draws"] for r in runs}) > 1
        coordinates = "factored model" if run["chart_rank"] is None else f"chart (r₁ = {run['chart_rank']})"
        return (coordinates + (f" at target_accept {run['target_accept']:g}" if targets else "")
                + (f" ({run['tune']} tuning steps + {run['draws']} draws)" if lengths else ""))

    def told(run):  # a run stopped at its first divergence has no R-hat, and the record says it stopped
        return "was stopped at its first divergence" if np.isnan(run["max_rhat"]) else "gave"

    verbs = ("gave", told({"max_rhat": np.nan}))
    assert sum(record["reason"].count(f" {verb} ") for verb in verbs) == len(runs)
    for before, after in itertools.pairwise(runs):
        assert f"the {name(before)} {told(before)}" in record["reason"]
        assert f"so the {name(after)} {told(after)}" in record["reason"]
    ours = [run for run in runs if (run["parametrization"], run["chart_rank"], run["target_accept"],
                                    run["draws"]) == (record["parametrization"], record["chart_rank"],
                                                      post.settings["nuts"]["target_accept"],
                                                      post.settings["nuts"]["draws"])]
    assert len(ours) == 1
    assert f"the run of the {name(ours[0])} was kept, as the best of the {len(runs)}" in record["reason"]
    assert record["fell_back"] == (record["chart_rank"] != 2)
    # The kept fit is the best by the ranking (divergence-free first, then R-hat, then ESS per
    # leapfrog step, which reads no clock), and its facts are the fit's own.
    kept = post.diagnostics
    steps = leapfrog_steps(post.tree)
    assert steps == post.tree["sample_stats"]["n_steps"].sum() and steps >= 2 * 150
    assert ours[0]["leapfrog_steps"] == steps
    assert ours[0]["divergences"] == kept.divergences
    for other in runs:
        ess = min(other["min_ess_bulk"], other["min_ess_tail"])
        replaced = _diagnostics(other["divergences"], other["max_rhat"], ess)
        assert ranking(kept, 1.0, steps) >= ranking(replaced, 1.0, other["leapfrog_steps"])
    assert post.settings["nuts"]["parametrization"] == record["parametrization"]
    assert post.settings["nuts"]["chart_rank"] == record["chart_rank"]


# The user's settings passed to ``fallbacks``: the default, and the default at target_accept 0.95.
AT_90, AT_95 = bb.NUTS(), bb.NUTS(target_accept=0.95)


def _diagnostics(divergences: int = 0, rhat: float = 1.001, ess: float = 900.0,
                 depth: float | None = None) -> bl.Diagnostics:
    """A NUTS run's diagnostics with these divergences, R-hat, (bulk and tail) ESS and mean tree depth."""
    return bl.Diagnostics("nuts", False, None, bl.FitStatus.SAMPLER_WARNINGS, seconds=1.0,
                          divergences=divergences, max_rhat=rhat, min_ess_bulk=ess, min_ess_tail=ess,
                          mean_tree_depth=depth)


def _ran(divergences: int = 0, rhat: float = 1.001, ess: float = 900.0, depth: float | None = None):
    """``fallbacks``'s ``latest``: the diagnostics of a run with these divergences, R-hat, ESS and depth."""
    d = _diagnostics(divergences, rhat, ess, depth)
    return lambda: d


def test_fallbacks_are_lazy_and_none_for_named_coordinates(issue_data, monkeypatch):
    start = bl.fit_low_rank(issue_data, 2)
    named = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "chart", None)
    assert list(geometry.fallbacks(named, issue_data, 1.0, AT_90, latest=_ran())) == []
    # A block "auto" charts (SNR 6.0 >= config["snr_block_min"]; the reported case's is 3.7), its components
    # not steady.
    frame = dataclasses.replace(chart_frame(issue_data, start.theta, 2), snr=np.array([9.0, 8.0]))
    auto = geometry.Geometry(frame, "charted", True)
    # The smaller chart's frame (a Fisher information over the data) is built only when it is reached.
    built = []
    monkeypatch.setattr(geometry, "partial_frame", lambda *args: built.append(args) or frame)
    pending = geometry.fallbacks(auto, issue_data, 1.0, AT_90, latest=_ran())
    assert built == []
    next(pending)
    assert len(built) == 1
    monkeypatch.undo()
    following = list(geometry.fallbacks(auto, issue_data, 1.0, AT_90, latest=_ran()))
    assert [(g.parametrization, g.chart_rank, g.automatic, g.target_accept) for g in following] == [
        ("chart", 1, True, None), ("factored", None, True, None)]
    # A chart that diverged is first retried as it was at target_accept 0.95, unless it ran at 0.95 or more.
    retried = list(geometry.fallbacks(auto, issue_data, 1.0, AT_90, latest=_ran(1)))
    assert retried[0].frame is frame and retried[0].target_accept == 0.95
    # The smaller chart starts at the retry's target (in five of five unseen fall-backs past a divergent
    # retry it diverged again at 0.9), and is retried only above it.
    assert [(g.chart_rank, g.target_accept) for g in retried[1:]] == [
        (1, 0.95), (None, None), (None, 0.95), (None, 0.99)]
    steady = geometry.Geometry(dataclasses.replace(frame, snr=np.array([44.0, 30.0])), "charted", True)
    ladder = geometry.fallbacks(steady, issue_data, 1.0, AT_90, latest=_ran(1))
    assert [(g.chart_rank, g.target_accept) for g in ladder] == [
        (2, 0.95), (2, 0.99), (1, 0.99), (None, None), (None, 0.95), (None, 0.99)]
    assert [(g.chart_rank, g.target_accept) for g in geometry.fallbacks(auto, issue_data, 1.0, AT_95,
                                                                        latest=_ran(1))] == [
        (1, None), (None, None), (None, 0.99)]
    assert list(geometry.fallbacks(named, issue_data, 1.0, AT_90, latest=_ran(1))) == []
    # The smaller chart keeps the frame's spans and start, and whitens only the leading component (one weak
    # component, a line: never Θᵀ's, whatever config["snr_transpose"]).
    smaller = following[0].frame
    assert not smaller.transposed and smaller.dim == frame.left.shape[1] + frame.right.shape[1] - 1
    np.testing.assert_array_equal(smaller.left, frame.left)
    with bl.config_context(snr_transpose=0.0):
        assert not next(geometry.fallbacks(auto, issue_data, 1.0, AT_90, latest=_ran())).frame.transposed
    # An automatic chart of one component is followed by the factored model alone.
    one = geometry.Geometry(smaller, "charted", True)
    following_one = geometry.fallbacks(one, issue_data, 1.0, AT_90, latest=_ran())
    assert [g.parametrization for g in following_one] == ["factored"]


@pytest.mark.parametrize("target", [0.8, 0.9, 0.95, 0.99])
def test_a_run_is_stopped_at_a_divergence_exactly_where_another_run_follows_it(issue_data, target):
    """Along a ladder of runs that all diverge, every run but the last is stopped at its first divergence:
    a stopped run is never kept, so the last must have run to its end."""
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)
    nuts = bb.NUTS(target_accept=target)
    firsts = [geometry.Geometry(dataclasses.replace(frame, snr=np.array(snr)), "charted", True)
              for snr in ([9.0, 8.0], [44.0, 12.0], [44.0, 2.1])]
    firsts += [geometry.Geometry(None, "short ridge", True), geometry.Geometry(None, "short", True, 0.95),
               geometry.Geometry(None, "lengthened", True, None, lengthened=True),
               geometry.Geometry(frame, "partial chart at large N", True, 0.95)]
    for first in firsts:
        ladder = [first, *geometry.fallbacks(first, issue_data, 1.0, nuts, latest=_ran(1))]
        stopped = [geometry.divergence_has_fallback(g, nuts) for g in ladder]
        assert stopped == [True] * (len(ladder) - 1) + [False], (first.reason, ladder)
    # The user's coordinates have no fall-back, so their runs draw to the end.
    for named in ("chart", "factored"):
        geom = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, named, None)
        assert not geometry.divergence_has_fallback(geom, nuts)


def test_an_automatic_factored_model_follows_its_own_advice_once_per_cause(issue_data):
    """Chosen first or reached by the fall-back: diverged → again at 0.95, then at 0.99; R-hat missed →
    lengthened."""
    def following(geom, target, latest):
        return [(g.parametrization, g.target_accept, g.lengthened, g.automatic)
                for g in geometry.fallbacks(geom, issue_data, 1.0, bb.NUTS(target_accept=target), latest)]

    factored = geometry.Geometry(None, "short ridge", True)
    assert following(factored, 0.9, _ran(1)) == [("factored", 0.95, False, True),
                                                 ("factored", 0.99, False, True)]
    assert following(factored, 0.9, _ran()) == []
    assert following(factored, 0.95, _ran(1)) == [("factored", 0.99, False, True)]
    assert following(factored, 0.99, _ran(1)) == []
    assert following(factored, 0.9, _ran(0, 1.0185)) == [("factored", None, True, True)]
    assert following(factored, 0.95, _ran(0, 1.0185)) == [("factored", None, True, True)]
    # Lengthened only where twice the ESS reaches ess_min (400): a run the user kept short stays so.
    assert following(factored, 0.9, _ran(0, 1.05, ess=200.0)) == [("factored", None, True, True)]
    assert following(factored, 0.9, _ran(0, 1.05, ess=199.0)) == []
    # A lengthened run that diverged (stranger 9603 #2: R-hat 1.014, then 7 divergences lengthened) is
    # retried lengthened at 0.95, then 0.99, each while the run before diverged.
    runs = iter([_diagnostics(0, 1.014), _diagnostics(7, 1.006), _diagnostics(1, 1.004), _diagnostics(0)])
    latest = {"run": next(runs)}
    ladder = []
    for g in geometry.fallbacks(factored, issue_data, 1.0, AT_90, lambda: latest["run"]):
        ladder.append((g.target_accept, g.lengthened))
        latest["run"] = next(runs)
    assert ladder == [(None, True), (0.95, True), (0.99, True)]
    # R-hat after divergences: the target first; a divergent run is not lengthened.
    assert following(factored, 0.99, _ran(2, 1.05)) == []
    named = geometry.Geometry(None, "named", False)
    assert following(named, 0.9, _ran(1)) == following(named, 0.9, _ran(0, 1.05)) == []
    # Each retry asks about the run before it: a chart that diverged, its retry too, then the
    # factored model without a divergence but with chains that disagree, then its lengthened run.
    start = bl.fit_low_rank(issue_data, 2)
    one = geometry.Geometry(chart_frame(issue_data, start.theta, 1), "charted", True)
    latest = {"run": _ran(1)()}
    pending = geometry.fallbacks(one, issue_data, 1.0, AT_90, lambda: latest["run"])
    assert (next(pending).parametrization, next(pending).parametrization) == ("chart", "factored")
    latest["run"] = _ran(0, 1.02)()
    last = next(pending)
    assert (last.parametrization, last.target_accept, last.lengthened) == ("factored", None, True)
    assert next(pending, None) is None


def test_a_chart_of_steady_components_is_retried_at_0_99_too(issue_data):
    """Charted components all ``config["snr_steady"]`` sd from 0 or more: a chart that diverged at 0.95 runs
    at 0.99."""
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2, chart_rank=1)

    def following(snr, target=0.9):
        latest = _ran(1)
        chart = geometry.Geometry(dataclasses.replace(frame, snr=np.array(snr)), "charted", True)
        return [(g.chart_rank, g.target_accept)
                for g in geometry.fallbacks(chart, issue_data, 1.0, bb.NUTS(target_accept=target), latest)]

    # The unseen N = 20,000 problem's start: its charted component 44 sd from 0, the weak one 2.1.
    assert following([44.0, 2.1]) == [(1, 0.95), (1, 0.99), (None, None), (None, 0.95), (None, 0.99)]
    assert following([9.9, 2.1]) == [(1, 0.95), (None, None), (None, 0.95), (None, 0.99)]
    # Paper grid 2091 #15 (N = 10,000, q = 10): charted 15.2 sd from 0, its run at 0.99 drew 0.31x the
    # factored model's ESS per second.
    assert following([15.2, 3.6]) == following([9.9, 2.1])
    assert following([setting("snr_steady"), 2.1]) == following([44.0, 2.1])
    assert following([44.0, 2.1], target=0.95) == [(1, 0.99), (None, None), (None, 0.99)]
    assert following([44.0, 2.1], target=0.99) == [(None, None)]
    assert following([44.0, 9.0]) == following([44.0, 2.1])  # the weak block's SNR does not enter
    # Each step only while the run before it diverged: a clean retry at 0.95 ends the chart's ladder.
    latest = {"run": _ran(1)()}
    chart = geometry.Geometry(dataclasses.replace(frame, snr=np.array([44.0, 2.1])), "charted", True)
    pending = geometry.fallbacks(chart, issue_data, 1.0, AT_90, lambda: latest["run"])
    assert next(pending).target_accept == 0.95
    latest["run"] = _ran(0, 1.05)()
    assert next(pending).parametrization == "factored"
    # The frame's SNRs are σ̂_k over the sd of A_kk; the leading one is leading_snr, and a partial
    # frame keeps the full chart's.
    full = chart_frame(issue_data, start.theta, 2)
    assert full.snr.shape == (2,) and full.leading_snr == full.snr[0] and np.all(full.snr > 0)
    np.testing.assert_array_equal(frame.snr, full.snr)


def test_a_partial_chart_starts_at_the_users_target_and_draws_more():
    # N = 20,000, q = 1, diagonal Θ* of rank 1 fitted at 2 (unseen; SNRs 43.7, 2.1): a partial chart with a
    # noise component in its weak block, which diverged 4 times at 0.9 while the weak block was sampled as
    # (W, Z), and has not since M = Z L.
    data = bl.simulate.paper_problem(10, 3, 5, 1, 1.0, 3346, theta_kind="diagonal").sample(20000, seed=9591)
    start, _, _ = geometry.default_start(data, 2, 0.0, 1.0)
    chosen = geometry.choose_geometry(data, 2, start.theta, 1.0, "auto", None)
    assert (chosen.parametrization, chosen.chart_rank, chosen.automatic) == ("chart", 1, True)
    assert chosen.target_accept is None and chosen.target(AT_90) == 0.9
    # It draws config["partial_draws"] times the draws (the §5.1 q = 10 chart at N = 10,000: R-hat 1.012 at
    # 1,000 draws a chain on one sampler seed, 1.0036-1.0045 at 1,500 on four); a full chart and the factored
    # model draw as many as asked.
    assert chosen.draws_scale == setting("partial_draws") == 1.5 and "1.5 × the draws" in chosen.reason
    # Where it diverges: the retry target, then (charted SNR 43.7 >= config["snr_steady"]) the steady one,
    # then the factored model at the user's target and its own retries.
    latest = _ran(1)
    ladder = [(g.chart_rank, g.target_accept) for g in geometry.fallbacks(chosen, data, 1.0, AT_90, latest)]
    assert ladder == [(1, 0.95), (1, 0.99), (None, None), (None, 0.95), (None, 0.99)]
    full = geometry.choose_geometry(data, 1, bl.fit_low_rank(data, 1).theta, 1.0, "auto", None)
    assert (full.parametrization, full.chart_rank, full.target_accept) == ("chart", 1, None)
    assert full.draws_scale == 1.0
    factored = geometry.choose_geometry(data, 2, start.theta, 1.0, "factored", None)
    assert factored.draws_scale == 1.0


def test_a_partial_chart_draws_its_scale_of_the_draws_and_its_smaller_chart_too(issue_data, monkeypatch):
    """A fit: an automatic partial chart's run draws ``draws_scale`` × ``nuts.draws`` (the tuning as set), the
    tree and the settings say so; the smaller chart of a fall-back scales too (partial_draws)."""
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)
    partial = geometry.Geometry(geometry.partial_frame(frame, issue_data, 1, 1.0), "charted", True,
                                draws_scale=setting("partial_draws"))
    monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: partial)
    nuts = {"draws": 100, "tune": 100, "chains": 2, "rhat_max": 10.0, "ess_min": 1e9}
    with pytest.warns(bl.SamplerWarning, match=r"re-run with nuts=\{'draws': 200\}"):
        post = bb.fit_posterior(issue_data, 2, nuts=nuts, progressbar=False, predictive_draws=0)
    assert post.tree["posterior"].sizes["draw"] == 150 and post.settings["nuts"]["draws"] == 150
    assert post.settings["nuts"]["tune"] == 100 and post.settings["nuts"]["chart_rank"] == 1
    # ESS short of an unreachable bar: the advice is twice the draws asked, which this chart runs as 300,
    # twice the 150 that ran (advised as 300 it would run 450).
    assert post.advice == {"draws": 200}
    # The full chart's fall-back to a smaller chart (here at a gap: r' = 1) at N = 1,000.
    auto = geometry.Geometry(dataclasses.replace(frame, snr=np.array([9.0, 8.0])), "charted", True)
    smaller = [g for g in geometry.fallbacks(auto, issue_data, 1.0, AT_90, _ran(1)) if g.chart_rank == 1]
    assert smaller and all(g.draws_scale == setting("partial_draws") for g in smaller)
    with bl.config_context(partial_draws=1.0):
        smaller = [g for g in geometry.fallbacks(auto, issue_data, 1.0, AT_90, _ran(1)) if g.chart_rank == 1]
    assert smaller and all(g.draws_scale == 1.0 for g in smaller)


def test_a_run_stopped_at_its_first_divergence_is_told_and_never_kept(issue_data, monkeypatch, tmp_path):
    """A stand-in sampler stops the chart's first run (as nutpie's watch does at a divergence); its retry
    runs for real. The record tells the stop; the fit keeps the retry and saves and loads."""
    frame = chart_frame(issue_data, bl.fit_low_rank(issue_data, 1).theta, 1)
    chart = geometry.Geometry(frame, "charted", True)
    monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: chart)
    sample, watches = fit_module.sample_nuts, []

    def stopped_once(model, nuts, draw_start, seed, progressbar, key, watch, complete):
        watches.append((nuts.target_accept, watch))
        if len(watches) == 1:
            raise watch_module.Diverged(2, 236, 4.1, 9.0)
        return sample(model, nuts, draw_start, seed, progressbar, key, watch, complete)

    monkeypatch.setattr(fit_module, "sample_nuts", stopped_once)
    nuts = {"draws": 100, "tune": 100, "chains": 2, "rhat_max": 10.0, "ess_min": 0.0}
    post = bb.fit_posterior(issue_data, 1, nuts=nuts, progressbar=False, predictive_draws=0)
    # Both runs were watched for a divergence: after the retry at 0.95 the factored model would follow.
    assert [(target, watch.divergence) for target, watch in watches] == [(0.9, True), (0.95, True)]
    record = post.settings["geometry"]
    assert ("the chart (r₁ = 1) at target_accept 0.9 was stopped at its first divergence after the warm-up "
            "(2 divergent draws by 9 s), so the chart (r₁ = 1) at target_accept 0.95 gave"
            ) in record["reason"]
    assert record["first"]["divergences"] == 2 and np.isnan(record["first"]["max_rhat"])
    assert post.settings["nuts"]["target_accept"] == 0.95 and post.tree["posterior"].sizes["draw"] == 100
    assert post.diagnostics.status is not bl.FitStatus.STOPPED
    again = bl.load(post.save(tmp_path / "stopped.nc"))
    assert again.settings["geometry"]["reason"] == record["reason"]


def test_the_fit_asks_about_the_latest_run_and_keeps_the_retry(issue_data, monkeypatch):
    """``_nuts``, a stand-in sampler: the chart mixes badly, the factored model diverges, its retry not."""
    script = [(0, 1.05), (1, 1.001), (0, 1.001)]  # (divergences, R-hat) of each run in turn
    ran = []

    def attempt(run, geom, nuts, watch=None):
        div, rhat = script[len(ran)]
        ran.append((geom.parametrization, geom.target_accept))
        d = _diagnostics(div, rhat)
        group = dataclasses.replace(nuts, parametrization=geom.parametrization, chart_rank=geom.chart_rank,
                                    target_accept=geom.target(nuts))
        return fit_module._Attempt(xr.DataTree(), d, None, group, ("nutpie", 4, 1000, ""), {})

    start = bl.fit_low_rank(issue_data, 2)
    chart = geometry.Geometry(chart_frame(issue_data, start.theta, 1), "charted", True)
    monkeypatch.setattr(fit_module, "_nuts_attempt", attempt)
    monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: chart)
    run = fit_module._Run(issue_data, 2, "half", bb.Prior(), None, None, 0, 0, False, start, 0.0)
    kept, record = fit_module._nuts(run, bb.NUTS(), "")
    assert ran == [("chart", None), ("factored", None), ("factored", 0.95)]
    assert kept.group.target_accept == 0.95 and kept.diagnostics.divergences == 0
    assert record["geometry"]["first"]["max_rhat"] == 1.05
    assert [r["target_accept"] for r in record["geometry"]["fallbacks"]] == [0.9, 0.95]
    assert "the run of the factored model at target_accept 0.95 was kept" in record["geometry"]["reason"]


def test_advice_skips_what_the_fall_back_ran():
    # Kept: the chart at 0.9 whose fall-back ran the factored model at 0.9 and 0.95, all divergent.
    chart = _nuts(parametrization="chart", chart_rank=1)
    tried = (chart, bb.NUTS(**(chart.__dict__ | {"target_accept": 0.95})),
             _nuts(chart_rank=None), _nuts(target_accept=0.95))
    assert diagnostics_module._advice(chart, 2, False, False) == {"parametrization": "factored",
                                                                 "chart_rank": None}
    assert diagnostics_module._advice(chart, 2, False, False, tried=tried) == {
        "parametrization": "factored", "chart_rank": None, "target_accept": 0.99, "draws": 2000}
    # Past the last step nothing is left to advise on the coordinates; a factored retry at 0.99 ran too.
    assert diagnostics_module._advice(chart, 2, False, False, tried=(*tried, _nuts(target_accept=0.99))) == {}
    # A lengthened run that ran is not advised again; twice the draws for a short ESS still is.
    factored = _nuts(draws=300, tune=200)
    longer = bb.NUTS(**(factored.__dict__ | diagnostics_module.lengthened(factored)))
    assert diagnostics_module._advice(factored, 0, True, False) == {"draws": 600, "tune": 600}
    assert diagnostics_module._advice(factored, 0, True, False, tried=(factored, longer)) == {"draws": 600}
    # Runs with other coordinates or another length change nothing.
    assert diagnostics_module._advice(factored, 3, False, False, tried=(chart, longer)) == {
        "target_accept": 0.95, "draws": 600}


def test_the_kept_run_is_not_advised_a_setting_its_fall_back_ran(issue_data, monkeypatch):
    """``_nuts``, stand-ins: every run diverges, the first (a chart) is kept, and its advice is re-made."""
    ran = []

    def attempt(run, geom, nuts, watch=None):
        ran.append((geom.parametrization, geom.target(nuts)))
        group = dataclasses.replace(nuts, parametrization=geom.parametrization, chart_rank=geom.chart_rank,
                                    target_accept=geom.target(nuts))
        # A real tree is not needed: no run has leapfrog steps, so the ranking keeps the first.
        advice = diagnostics_module._advice(group, 1, False, False)
        return fit_module._Attempt(xr.DataTree(), _diagnostics(4 - len(ran) // 4), None, group,
                                   ("nutpie", 4, 1000, ""), advice)

    def diagnose(tree, nuts, seconds, chart_target=None, tried=(), table=None, draws_scale=1.0):
        return _diagnostics(1), diagnostics_module._advice(nuts, 1, False, False, chart_target, tried,
                                                           draws_scale)

    start = bl.fit_low_rank(issue_data, 2)
    chart = geometry.Geometry(chart_frame(issue_data, start.theta, 1), "charted", True)
    monkeypatch.setattr(fit_module, "_nuts_attempt", attempt)
    monkeypatch.setattr(fit_module, "nuts_diagnostics", diagnose)
    monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: chart)
    run = fit_module._Run(issue_data, 2, "half", bb.Prior(), None, None, 0, 0, False, start, 0.0)
    kept, record = fit_module._nuts(run, bb.NUTS(), "")
    assert ran == [("chart", 0.9), ("chart", 0.95), ("factored", 0.9), ("factored", 0.95), ("factored", 0.99)]
    assert (kept.group.parametrization, kept.group.target_accept) == ("chart", 0.9)
    # Advised as it ran, the chart's advice was the factored model at 0.9, then at 0.95 and 0.99: its
    # fall-back ran them all, so no setting is left to advise.
    assert kept.advice == {} and "advice" not in record


def test_a_smaller_chart_only_at_a_gap_of_the_singular_values(issue_data):
    """The fall-back charts the largest r' < r₁ with σ̂_r' ≥ ``config["gap_min"]`` σ̂_r'+1, else the factored
    model runs."""
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)

    def values(*sv, r1):
        # Components whose block "auto" charts (SNR 8.0 for r₁ = 4), not all steady.
        snr = np.array([30.0, 30.0, 30.0, 9.0, 9.0])[: len(sv)]
        return dataclasses.replace(frame, singular_values=np.array(sv), chart_rank=r1, snr=snr)

    # The unseen q = 30 problem's start (four equal singular values in Θ*): no boundary below r₁ = 4.
    no_gap = values(3.30, 2.69, 2.48, 1.71, 1.11, r1=4)
    assert geometry.smaller_chart_rank(no_gap) is None
    assert geometry.smaller_chart_rank(values(8.0, 3.0, 2.9, 2.0, 0.5, r1=4)) == 1
    assert geometry.smaller_chart_rank(values(8.0, 3.0, 2.9, 1.4, 0.5, r1=4)) == 3
    assert geometry.smaller_chart_rank(values(2.0, 1.0, r1=2)) == 1
    assert geometry.smaller_chart_rank(values(1.99, 1.0, r1=2)) is None
    assert geometry.smaller_chart_rank(values(9.0, 1.0, r1=1)) is None
    # The reported case's start has its gap (6.98 / 2.98 = 2.35): its fall-back charts r₁ = 1 as before.
    assert geometry.smaller_chart_rank(frame) == 1
    auto = geometry.Geometry(no_gap, "charted", True)
    retried = geometry.fallbacks(auto, issue_data, 1.0, AT_90, _ran(1))
    assert [(g.parametrization, g.target_accept) for g in retried] == [
        ("chart", 0.95), ("factored", None), ("factored", 0.95), ("factored", 0.99)]
    quiet = geometry.fallbacks(auto, issue_data, 1.0, AT_90, _ran())
    assert [g.parametrization for g in quiet] == ["factored"]


def test_ranking_orders_by_divergences_then_rhat_then_ess_per_leapfrog_step():
    def fit(divergences=0, rhat=1.0, ess=400.0, seconds=10.0):
        return bl.Diagnostics("nuts", True, None, bl.FitStatus.CONVERGED, seconds=seconds,
                              divergences=divergences, max_rhat=rhat, min_ess_bulk=ess, min_ess_tail=ess)

    # A divergence-free fit beats a divergent one whatever its efficiency; R-hat within the bar next.
    assert ranking(fit(), 1.01, 1e9) > ranking(fit(divergences=1, ess=4000), 1.01, 10)
    assert ranking(fit(rhat=1.005), 1.01, 1e9) > ranking(fit(rhat=1.2, ess=4000), 1.01, 10)
    # Then ESS per step: 400 in 8,000 steps beats 500 in 20,000, though the second took a tenth the time.
    assert ranking(fit(ess=400, seconds=100), 1.01, 8000) > ranking(
        fit(ess=500, seconds=10), 1.01, 20000)
    # No recorded steps or no finite ESS rank last among equals rather than dividing by zero.
    assert ranking(fit(), 1.01, 0.0)[3] == 0.0
    assert ranking(fit(ess=np.nan), 1.01, 100.0)[3] == 0.0
    # ESS reaching ess_min before the rate: a run lengthened for its ESS has about the short run's rate.
    assert ranking(fit(ess=627), 1.01, 152000, ess_min=400) > ranking(
        fit(ess=342), 1.01, 76000, ess_min=400)
    assert ranking(fit(ess=627), 1.01, 152000) < ranking(fit(ess=342), 1.01, 76000)


def test_a_run_is_short_of_ess_alone_where_twice_its_draws_would_reach_ess_min():
    def fit(divergences=0, rhat=1.0, ess=342.0):
        return _diagnostics(divergences, rhat, ess)

    assert diagnostics_module.short_of_ess(fit(), AT_90)
    assert not diagnostics_module.short_of_ess(fit(ess=400.0), AT_90)
    assert not diagnostics_module.short_of_ess(fit(ess=199.0), AT_90)  # a run the user kept short stays so
    assert not diagnostics_module.short_of_ess(fit(divergences=1), AT_90)
    assert not diagnostics_module.short_of_ess(fit(rhat=1.02), AT_90)


def test_auto_keeps_the_declined_chart_frame_where_the_ridge_looked_short(issue_data):
    start = bl.fit_low_rank(issue_data, 2)
    chosen = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "auto", None)
    assert chosen.frame is None and "ridge is short" in chosen.reason
    np.testing.assert_allclose(chosen.short_ridge_frame.snr, chart_frame(issue_data, start.theta, 2).snr)
    one = geometry.choose_geometry(issue_data, 1, bl.fit_low_rank(issue_data, 1).theta, 1.0, "auto", None)
    assert one.frame is None and one.short_ridge_frame is None  # rank 1 has no rotation to run along
    named = geometry.choose_geometry(issue_data, 2, start.theta, 1.0, "factored", None)
    assert named.short_ridge_frame is None


def test_a_short_looking_ridge_that_diverged_on_deep_trees_is_followed_by_the_chart(issue_data):
    """Strangers 9601 #10: the factored model diverged and took 1,023 steps per draw; its chart did not."""
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)
    # A block "auto" charts where the ridge is long: SNRs 30 and 12, block 11.1 >= config["snr_block_few"].
    chartable = dataclasses.replace(frame, snr=np.array([30.0, 12.0]))
    factored = geometry.Geometry(None, "short ridge", True, short_ridge_frame=chartable)

    def following(geom, latest, target=0.9):
        return [(g.parametrization, g.chart_rank, g.target_accept, g.lengthened)
                for g in geometry.fallbacks(geom, issue_data, 1.0, bb.NUTS(target_accept=target), latest)]

    deep = _ran(2, depth=setting("deep_tree") + 1.5)
    assert following(factored, deep) == [("chart", 2, None, False), ("factored", None, 0.95, False),
                                         ("factored", None, 0.99, False)]
    chart = next(geometry.fallbacks(factored, issue_data, 1.0, AT_90, deep))
    assert chart.automatic and "diverged 2 times on trees of mean depth 9.5" in chart.reason
    # The factored model's retries follow its own run: after a chart that did not diverge (R-hat missed),
    # the factored model that did is still retried.
    runs = iter([_diagnostics(2, depth=9.5), _diagnostics(0, rhat=1.05), _diagnostics(0, rhat=1.02),
                 _diagnostics(0)])
    latest = {"run": next(runs)}
    pending = geometry.fallbacks(factored, issue_data, 1.0, AT_90, lambda: latest["run"])
    ladder = []
    for g in pending:
        ladder.append((g.parametrization, g.target_accept, g.lengthened))
        latest["run"] = next(runs, None)
    assert ladder == [("chart", None, False), ("factored", 0.95, False), ("factored", 0.95, True)]
    # Not on shallow trees, without a divergence, after a retry, without a declined frame, nor where "auto"
    # refuses the chart on a long ridge too and a component is noise (SNR 2.5 < config["snr_weak_noise"]).
    noisy = dataclasses.replace(frame, snr=np.array([5.5, 2.5]))
    shallow = _ran(2, depth=setting("deep_tree") - 0.5)
    assert following(factored, shallow) == [("factored", None, 0.95, False), ("factored", None, 0.99, False)]
    assert following(factored, _ran(0, rhat=1.05, depth=9.5)) == [("factored", None, None, True)]
    assert following(dataclasses.replace(factored, target_accept=0.95), deep) == [
        ("factored", None, 0.99, False)]
    assert following(dataclasses.replace(factored, short_ridge_frame=None), deep)[0][0] == "factored"
    assert following(dataclasses.replace(factored, short_ridge_frame=noisy), deep)[0][0] == "factored"
    # The user's target 0.99: the chart, and no factored retry left to run.
    assert following(factored, deep, target=0.99) == [("chart", 2, None, False)]


def test_a_factored_run_whose_warm_up_runs_deep_is_stopped_for_the_chart(issue_data, monkeypatch):
    """``_nuts`` with a stand-in sampler: the watched factored run raises DeepWarmup, the chart runs next.

    Watched only where the chart exists ("auto" charts the declined frame) and nutpie samples.
    """
    start = bl.fit_low_rank(issue_data, 2)
    frame = chart_frame(issue_data, start.theta, 2)
    chartable = dataclasses.replace(frame, snr=np.array([30.0, 12.0]))
    ran = []
    stop = (9.3, 50.0, geometry.full_watch().why(9.3, 50.0))  # what the stand-in's watched run raises

    def attempt(run, geom, nuts, watch=None):
        ran.append((geom.parametrization, geom.chart_rank, watch))
        if watch is not None:
            raise watch_module.DeepWarmup(*stop)
        group = dataclasses.replace(nuts, parametrization=geom.parametrization, chart_rank=geom.chart_rank)
        return fit_module._Attempt(xr.DataTree(), _diagnostics(), None, group, ("nutpie", 4, 1000, ""), {})

    monkeypatch.setattr(fit_module, "_nuts_attempt", attempt)
    run = fit_module._Run(issue_data, 2, "half", bb.Prior(), None, None, 0, 0, False, start, 0.0)

    def fit(declined, sampler="nutpie"):
        ran.clear()
        factored = geometry.Geometry(None, "short ridge", True, short_ridge_frame=declined)
        monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: factored)
        return fit_module._nuts(run, bb.NUTS(sampler=sampler), "")

    kept, record = fit(chartable)
    assert ran == [("factored", None, geometry.full_watch()), ("chart", 2, None)]
    assert kept.group.parametrization == "chart"
    assert re.fullmatch(r"the factored model's warm-up drew trees of mean depth 9\.3 over its draws 50-150 "
                        r">= 8, and was stopped there after \d+ s; 2 of 2 components determined",
                        record["geometry"]["reason"])
    assert record["geometry"]["stopped"]["warmup_depth"] == pytest.approx(9.3)
    assert record["geometry"]["stopped"]["parametrization"] == "factored"
    # A shallower warm-up stopped because its run was projected to be long says so.
    stop = (7.4, 213.0, geometry.full_watch().why(7.4, 213.0))
    kept, record = fit(chartable)
    assert kept.group.parametrization == "chart"
    assert re.fullmatch(r"the factored model's warm-up drew trees of mean depth 7\.4 over its draws 50-150 "
                        r">= 7, the rest of its run projected to take 213 s >= 100 s, and was stopped there "
                        r"after \d+ s; 2 of 2 components determined", record["geometry"]["reason"])
    assert record["geometry"]["stopped"]["projected_seconds"] == 213.0
    stop = (9.3, 50.0, geometry.full_watch().why(9.3, 50.0))
    # A chart short of ESS alone runs once more lengthened, as its advice says, and that run is kept.
    ess = {False: 342.0, True: 627.0}

    def short_chart(run, geom, nuts, watch=None):
        ran.append((geom.parametrization, geom.lengthened, watch))
        if watch is not None:
            raise watch_module.DeepWarmup(8.4, 50.0, watch.why(8.4, 50.0))
        group = dataclasses.replace(nuts, parametrization=geom.parametrization, chart_rank=geom.chart_rank,
                                    **(diagnostics_module.lengthened(nuts) if geom.lengthened else {}))
        tree = xr.DataTree.from_dict({"sample_stats": xr.Dataset(
            {"n_steps": (("chain", "draw"), np.full((4, group.draws), 19.0))})})
        return fit_module._Attempt(tree, _diagnostics(ess=ess[geom.lengthened]), None, group,
                                   ("nutpie", 4, group.draws, ""), {})

    monkeypatch.setattr(fit_module, "_nuts_attempt", short_chart)
    ran.clear()
    kept, record = fit(chartable)
    assert ran == [("factored", False, geometry.full_watch()), ("chart", False, None), ("chart", True, None)]
    assert kept.group.draws == 2000 and kept.diagnostics.min_ess_bulk == 627.0
    ess[False] = 450.0  # enough ESS: no second run
    ran.clear()
    fit(chartable)
    assert ran == [("factored", False, geometry.full_watch()), ("chart", False, None)]
    monkeypatch.setattr(fit_module, "_nuts_attempt", attempt)
    # A block of SNR 5.6 (components at 9 and 7): "auto" refuses it below config["n_block"], where the ridge
    # looks short, and charts it once the factored model's own trees have measured the ridge long.
    middling = dataclasses.replace(frame, snr=np.array([9.0, 7.0]))
    assert geometry._auto_chart(middling, issue_data, 2, 1.0, None, "long").frame is None
    kept, record = fit(middling)
    assert ran == [("factored", None, geometry.full_watch()), ("chart", 2, None)]
    # A partial chart (the second component not determined) is watched for deep trees only.
    fit(dataclasses.replace(frame, snr=np.array([30.0, 4.0])))
    assert ran == [("factored", None, geometry.partial_watch()), ("chart", 1, None)]
    # Unwatched where "auto" charts nothing on that frame (a block of SNR 2.3, one component noise), or
    # where PyMC samples.
    fit(dataclasses.replace(frame, snr=np.array([5.5, 2.5])))
    assert ran == [("factored", None, None)]
    fit(None)
    assert ran == [("factored", None, None)]
    fit(chartable, sampler="pymc")
    assert ran == [("factored", None, None)]


# Both determined, their block 4.2 < 5; the reported case's frame (block 3.7); neither determined (SNR < 5)
# and neither noise (block 3.25); a noise component; a loose column space; neither noise, but a block of 2.3.
@pytest.mark.parametrize(("snr", "angles", "full"), [
    ((6.0, 6.0), (0.1, 0.1), True), ((5.46, 5.13), (0.22, 0.35), True), ((4.7, 4.5), (0.1, 0.1), True),
    ((6.0, 2.9), (0.1, 0.1), False), ((6.0, 6.0), (0.6, 0.1), False), ((3.4, 3.1), (0.1, 0.1), False)])
def test_a_measured_ridge_charts_every_component_where_none_is_noise(issue_data, snr, angles, full):
    """Strangers 9607 #6 (SNRs 6.1, 10.0, 8.9, 4.7; the block of the three determined 4.5 < 5): the factored
    model took 531 steps per draw and no chart was offered; the full chart converged at 3.9x its ESS per
    second (docs/results.md, "The full chart after a deep warm-up")."""
    start = bl.fit_low_rank(issue_data, 2)
    stand_in = dataclasses.replace(chart_frame(issue_data, start.theta, 2), snr=np.array(snr),
                                   angles=np.array(angles))
    factored = geometry.Geometry(None, "short ridge", True, short_ridge_frame=stand_in)
    # "auto" itself charts nothing on the measured ridge: a block below config["snr_block_min"], or none
    # determined.
    assert geometry._auto_chart(stand_in, issue_data, 2, 1.0, None, "", measured=True).frame is None
    chart = geometry.ridge_chart(factored, issue_data, 1.0, "")
    if not full:
        assert chart is None
        return
    assert (chart.parametrization, chart.chart_rank, chart.automatic) == ("chart", 2, True)
    assert chart.target_accept is None
    block = geometry.block_snr(stand_in, 2)
    assert chart.reason == ("; all 2 components charted, none of them noise (each 3 or more standard "
                            "deviations from 0, within 0.5 rad): the full chart has no weak block, and its "
                            f"block's SNR is {block:.1f} >= 2.5")
    assert geometry.watch_for(chart) == geometry.full_watch()
    # Not where the rank leaves fewer than config["full_span_spare"] dimensions of the differences' span (9612
    # #6).
    narrow = dataclasses.replace(stand_in, right=stand_in.right[:, : 2 + setting("full_span_spare") - 1])
    narrowed = dataclasses.replace(factored, short_ridge_frame=narrow)
    assert geometry.ridge_chart(narrowed, issue_data, 1.0, "") is None
    # A factored model at a retry's target is not replaced (as for any chart).
    retried = dataclasses.replace(factored, target_accept=0.95)
    assert geometry.ridge_chart(retried, issue_data, 1.0, "") is None
    # Troubled, it is retried at 0.95 and then falls back to the factored model without a smaller chart
    # (strangers 9612 #6: the smaller chart, block 4.9, failed too); a block at the floor gets one.
    def ladder(chart):
        return [(g.parametrization, g.chart_rank, g.target_accept)
                for g in geometry.fallbacks(chart, issue_data, 1.0, AT_90, _ran(3))]

    assert ladder(chart) == [("chart", 2, 0.95), ("factored", None, None), ("factored", None, 0.95),
                             ("factored", None, 0.99)]
    floor = dataclasses.replace(chart, frame=dataclasses.replace(stand_in, snr=np.array([12.0, 8.0]),
                                                                 singular_values=np.array([4.0, 1.0])))
    assert ladder(floor)[:2] == [("chart", 2, 0.95), ("chart", 1, 0.95)]


def test_a_partial_chart_is_watched_for_deep_trees_only(issue_data):
    """Strangers 9615 #0: stopped at depth 7.44 (projected long) for a partial chart of r₁ = 1 that mixed
    slowly, 0.40x the factored model's ESS per second; the long-run stop's gains were all full charts."""
    frame = chart_frame(issue_data, bl.fit_low_rank(issue_data, 2).theta, 2)
    full = geometry.Geometry(frame, "", True)
    partial = geometry.Geometry(dataclasses.replace(frame, chart_rank=1), "", True)
    assert geometry.watch_for(full) == geometry.full_watch()
    assert geometry.watch_for(partial) == geometry.partial_watch()
    # At 9615 #0's depth and projection only the full chart's watch stops; at config["deep_tree"] both do.
    assert geometry.full_watch().why(7.44, 150.0) is not None
    assert geometry.partial_watch().why(7.44, 150.0) is None
    assert geometry.partial_watch().why(setting("deep_tree"), 10.0) is not None
