"""One vocabulary: one level convention (one check, one default) and one name table of the tie models."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import _validation, model, predict
from bayes_loco import bayes as bb
from bayes_loco.bayes import ties as bayes_ties

# Every public callable that takes a ``level``, by the path a user reaches it.
LEVEL_TAKERS = {
    "bayes_loco.predict.predict_interval": predict.predict_interval,
    "bayes_loco.best_actions": bl.best_actions,
    "bayes_loco.bayes.credible_ellipsoid": bb.credible_ellipsoid,
    "bayes_loco.bayes.credible_draws": bb.credible_draws,
    "bayes_loco.bayes.credible_cvar": bb.credible_cvar,
    "bayes_loco.bayes.credible_quantile": bb.credible_quantile,
    "bayes_loco.bayes.credible_set": bb.credible_set,
    "Posterior.calibrated_set": bb.Posterior.calibrated_set,
    "Posterior.summary": bb.Posterior.summary,
    "MLEResult.summary": bl.MLEResult.summary,
    "MLEResult.calibrated_set": bl.MLEResult.calibrated_set,
    "LowRankResult.summary": bl.LowRankResult.summary,
    "PRSResult.summary": bl.PRSResult.summary,
    "BradleyTerryFit.summary": bl.BradleyTerryFit.summary,
    "BradleyTerryFit.leaderboard": bl.BradleyTerryFit.leaderboard,
    "BradleyTerryFit.predict_interval": bl.BradleyTerryFit.predict_interval,
    "BradleyTerryFit.calibrated_set": bl.BradleyTerryFit.calibrated_set,
}


@pytest.mark.parametrize("name", sorted(LEVEL_TAKERS))
def test_every_level_defaults_to_the_one_level(name):
    """Sets, predictions, summaries and decisions share one default (None: the set's own level)."""
    default = inspect.signature(LEVEL_TAKERS[name]).parameters["level"].default
    assert default == _validation.LEVEL or (name == "bayes_loco.best_actions" and default is None), default


@pytest.mark.parametrize("bad, error, message", [
    (1.0, ValueError, r"^level must be in \(0, 1\), got 1.0$"),
    (0.0, ValueError, r"^level must be in \(0, 1\), got 0.0$"),
    (float("nan"), ValueError, "^level must be finite"),
    ("95%", TypeError, "^level must be a real number"),
    (True, TypeError, "^level must be a real number"),
])
def test_one_level_check(bad, error, message):
    with pytest.raises(error, match=message):
        _validation.check_level(bad)
    assert _validation.check_level(None, allow_none=True) is None
    assert _validation.check_level(np.float32(0.5)) == 0.5


@pytest.fixture(scope="module")
def draws_and_basis(random_low_rank_problem):
    fit = bl.fit_low_rank(random_low_rank_problem.data, 2)
    basis = bl.rtv_basis(fit.theta, rank=2)
    draws = np.random.default_rng(0).standard_normal((200, basis.dim))
    return draws, basis


@pytest.mark.parametrize("builder", ["credible_draws", "credible_cvar", "credible_quantile",
                                     "credible_ellipsoid", "credible_set"])
def test_credible_sets_refuse_level_one_at_the_call(builder, draws_and_basis):
    """``level=1.0`` is refused by the function the user called, not later by the set it would build."""
    draws, basis = draws_and_basis
    with pytest.raises(ValueError, match=r"^level must be in \(0, 1\), got 1.0$") as info:
        getattr(bb, builder)(draws, basis, level=1.0)
    assert any(frame.name == builder for frame in info.traceback)


def test_summaries_print_the_default_level(random_low_rank_problem):
    fit = bl.fit_mle(random_low_rank_problem.data)
    assert fit.summary().header["interval"] == f"{_validation.LEVEL:.0%} Wald"


def test_one_table_of_tie_models():
    """Both roads read ``ties`` against one table and raise one error."""
    assert bayes_ties.HALF is model.HALF and bayes_ties.DAVIDSON is model.DAVIDSON
    assert not hasattr(bayes_ties, "TIES")
    assert model.TIE_MODELS == ("half", "davidson")
    for call in (lambda d: bl.fit_mle(d, ties="davidsen"),
                 lambda d: bb.fit_posterior(d, 1, method="map", ties="davidsen", progressbar=False)):
        with pytest.raises(ValueError, match=r"^ties must be one of 'half', 'davidson'; got 'davidsen'$"):
            call(bl.PreferenceData(np.ones((4, 2)), np.eye(4, 3), np.array([0, 1, 0, 1])))
