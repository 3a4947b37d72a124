"""The sampler's choices as a plan: the attempts a fit records are the ones that ran, with the settings
they ran with, and the user's own settings object is never changed."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import xarray as xr

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import fit as fit_module
from bayes_loco.bayes import geometry, plan
from bayes_loco.bayes.chart import chart_frame


@pytest.fixture(scope="module")
def issue_data():
    return bl.simulate.paper_problem(d_x=8, d_a=6, d_s=5, rank=2, imbalance=3, seed=11).sample(1000, seed=12)


def _diagnostics(divergences: int, rhat: float) -> bl.Diagnostics:
    return bl.Diagnostics("nuts", False, None, bl.FitStatus.SAMPLER_WARNINGS, seconds=1.0,
                          divergences=divergences, max_rhat=rhat, min_ess_bulk=900.0, min_ess_tail=900.0)


def _fit(issue_data, monkeypatch, first: geometry.Geometry | None, script, user: bb.NUTS):
    """``_nuts`` with a stand-in sampler whose runs have the ``script``'s (divergences, R-hat) in turn;
    returns (what each run was given, the attempt kept, the record). ``first``: the coordinates
    ``choose_geometry`` gives every call; None keeps the real ``choose_geometry`` (a user's plan)."""
    ran = []

    def sample(run, geom, nuts, watch=None):
        if user.plan is None:
            assert nuts is user  # every run is handed the user's own settings, untouched
        else:
            assert watch is None and not geom.automatic  # no watch and no fall-back: the plan is the user's
        settings = plan.attempt(geom, nuts).settings(nuts)
        ran.append(settings)
        div, rhat = script[len(ran) - 1]
        return fit_module._Attempt(xr.DataTree(), _diagnostics(div, rhat), None, settings,
                                   ("nutpie", 4, settings.draws, ""), {})

    monkeypatch.setattr(fit_module, "_nuts_attempt", sample)
    if first is not None:
        monkeypatch.setattr(fit_module, "choose_geometry", lambda *args: first)
    start = bl.fit_low_rank(issue_data, 2)
    run = fit_module._Run(issue_data, 2, "half", bb.Prior(), None, None, 0, 0, False, start, 0.0)
    kept, record = fit_module._nuts(run, user, "")
    return ran, kept, record


def _assert_plan_is_the_record(ran, kept, record):
    attempts = record["plan"]["attempts"]
    assert len(attempts) == len(ran)
    for planned, settings in zip(attempts, ran, strict=True):
        for field in ("parametrization", "chart_rank", "target_accept", "draws", "tune"):
            assert planned[field] == getattr(settings, field), field
    chosen = attempts[record["plan"]["kept"]]
    assert (chosen["parametrization"], chosen["chart_rank"], chosen["target_accept"], chosen["draws"]) == (
        kept.group.parametrization, kept.group.chart_rank, kept.group.target_accept, kept.group.draws)
    assert (record["geometry"]["parametrization"], record["geometry"]["chart_rank"]) == (
        chosen["parametrization"], chosen["chart_rank"])


def test_a_charted_problem_plans_and_keeps_its_chart(issue_data, monkeypatch):
    user = bb.NUTS(draws=300, tune=200)
    before = copy.deepcopy(user)
    frame = chart_frame(issue_data, bl.fit_low_rank(issue_data, 2).theta, 1)
    ran, kept, record = _fit(issue_data, monkeypatch, geometry.Geometry(frame, "charted", True),
                             [(0, 1.001)], user)
    _assert_plan_is_the_record(ran, kept, record)
    (only,) = record["plan"]["attempts"]
    assert (only["parametrization"], only["chart_rank"], only["when"]) == ("chart", 1, plan.FIRST)
    assert only["target_accept"] == user.target_accept and only["adaptation"] == plan.ADAPTATION
    assert user == before and user.parametrization == "auto" and user.chart_rank is None


def test_a_factored_problem_plans_the_factored_model(issue_data, monkeypatch):
    user = bb.NUTS(target_accept=0.85)
    before = copy.deepcopy(user)
    factored = geometry.Geometry(None, "no component determined", True)
    ran, kept, record = _fit(issue_data, monkeypatch, factored, [(0, 1.001)], user)
    _assert_plan_is_the_record(ran, kept, record)
    assert [(a["parametrization"], a["target_accept"]) for a in record["plan"]["attempts"]] == [
        ("factored", 0.85)]
    assert user == before


def test_a_fall_back_is_a_new_attempt_with_its_cause(issue_data, monkeypatch):
    """The chart mixes badly, the factored model diverges, its retry at 0.95 converges: three attempts, the
    last kept, each saying why it ran; the user's settings (target 0.9, 'auto') unchanged."""
    user = bb.NUTS()
    before = copy.deepcopy(user)
    frame = chart_frame(issue_data, bl.fit_low_rank(issue_data, 2).theta, 1)
    ran, kept, record = _fit(issue_data, monkeypatch, geometry.Geometry(frame, "charted", True),
                             [(0, 1.05), (1, 1.001), (0, 1.001)], user)
    _assert_plan_is_the_record(ran, kept, record)
    attempts = record["plan"]["attempts"]
    assert [(a["parametrization"], a["target_accept"], a["when"]) for a in attempts] == [
        ("chart", 0.9, plan.FIRST), ("factored", 0.9, plan.RHAT), ("factored", 0.95, plan.DIVERGED)]
    assert record["plan"]["kept"] == 2 and [a["divergences"] for a in attempts] == [0, 1, 0]
    assert user == before and dataclasses.asdict(user) == dataclasses.asdict(bb.NUTS())


def test_an_attempt_states_its_settings_and_leaves_the_users():
    user = bb.NUTS(draws=400, tune=300, target_accept=0.8)
    partial = geometry.Geometry(None, "factored", True, target_accept=0.95, lengthened=True, draws_scale=1.5)
    planned = plan.attempt(partial, user, plan.DIVERGED)
    assert (planned.draws, planned.tune, planned.target_accept) == (1200, 1200, 0.95)
    ran = planned.settings(user)
    assert (ran.draws, ran.tune, ran.target_accept, ran.parametrization) == (1200, 1200, 0.95, "factored")
    assert (user.draws, user.tune, user.target_accept, user.parametrization) == (400, 300, 0.8, "auto")


def test_the_default_fit_records_its_plan_and_prints_it(bayes_nuts):
    settings = bayes_nuts.settings
    attempts, kept = settings["plan"]["attempts"], settings["plan"]["kept"]
    chosen = attempts[kept]
    for field in ("parametrization", "chart_rank", "target_accept", "draws", "tune"):
        assert chosen[field] == settings["nuts"][field], field
    text = str(bayes_nuts.summary())
    assert f"Attempt {kept + 1} (kept): {chosen['parametrization']}" in text


# ------------------------------------------------------------------------------- the user's own plan


USERS_PLAN = ({"parametrization": "factored", "target_accept": 0.8, "draws": 100},
              {"parametrization": "factored", "target_accept": 0.95},
              {"parametrization": "chart", "chart_rank": 1, "tune": 500})


def test_a_users_plan_runs_in_order_until_a_run_passes(issue_data, monkeypatch):
    user = bb.NUTS(draws=300, plan=USERS_PLAN)
    before = copy.deepcopy(user)
    ran, kept, record = _fit(issue_data, monkeypatch, None, [(2, 1.001), (0, 1.002), (0, 1.0)], user)
    _assert_plan_is_the_record(ran, kept, record)
    attempts = record["plan"]["attempts"]
    assert [(a["parametrization"], a["target_accept"], a["draws"], a["when"]) for a in attempts] == [
        ("factored", 0.8, 100, plan.FIRST), ("factored", 0.95, 300, plan.DIVERGED)]  # the chart never ran
    assert record["plan"]["kept"] == 1 and "user's own plan" in record["geometry"]["reason"]
    assert user == before


def test_a_users_plan_that_never_passes_runs_whole_and_keeps_the_best(issue_data, monkeypatch):
    user = bb.NUTS(plan=USERS_PLAN)
    ran, kept, record = _fit(issue_data, monkeypatch, None, [(3, 1.2), (0, 1.05), (1, 1.001)], user)
    _assert_plan_is_the_record(ran, kept, record)
    attempts = record["plan"]["attempts"]
    assert [(a["parametrization"], a["chart_rank"], a["tune"]) for a in attempts] == [
        ("factored", None, 1000), ("factored", None, 1000), ("chart", 1, 500)]
    assert [a["when"] for a in attempts] == [plan.FIRST, plan.DIVERGED, plan.RHAT]
    assert record["plan"]["kept"] == 1  # no divergence beats R-hat closer to 1


@pytest.mark.parametrize(("value", "error", "match"), [
    ([], ValueError, "nuts.plan is empty"),
    ({"parametrization": "chart"}, TypeError, "nuts.plan must be a list of dicts"),
    (["chart"], TypeError, r"nuts.plan\[0\] must be a dict"),
    ([{}, {"sampler": "pymc"}], ValueError, r"nuts.plan\[1\] has no setting 'sampler'"),
    ([{"target_accept": 1.5}], ValueError, r"nuts.plan\[0\]: nuts.target_accept"),
    ([{"parametrization": "factored", "chart_rank": 2}], ValueError, r"nuts.plan\[0\]: nuts.chart_rank"),
])
def test_a_bad_plan_is_refused_naming_its_entry(value, error, match):
    with pytest.raises(error, match=match):
        bb.NUTS(plan=value)


def test_an_entry_takes_the_rest_from_the_settings():
    user = bb.NUTS(draws=500, chart_rank=2, parametrization="chart", plan=[{"parametrization": "factored"}])
    assert user.plan == ({"parametrization": "factored"},)
    made = user.attempt(user.plan[0])
    assert (made.parametrization, made.chart_rank, made.draws, made.plan) == ("factored", None, 500, None)
    assert (user.parametrization, user.chart_rank) == ("chart", 2)
