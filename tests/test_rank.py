"""GIC rank selection: the criterion's arithmetic and recovery of the true rank."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import simulate


@pytest.fixture(scope="module")
def selection():
    problem = simulate.paper_problem(d_s=4, d_a=6, d_x=6, rank=2, imbalance=1, theta_kind="diagonal", seed=0)
    data = problem.sample(6000, seed=1)
    return problem, data, bl.select_rank(data, ranks=[1, 2, 3, 4])


def test_gic_is_mean_nll_plus_penalty_times_k(selection):
    problem, data, sel = selection
    assert sel.penalty == pytest.approx(0.1 * np.log(data.n) / data.n)
    d_x, d_phi = problem.d_x, problem.d_phi
    assert list(sel.n_params) == [(d_x + d_phi) * r - r * r for r in (1, 2, 3, 4)]
    for fit, nll, gic, k in zip(sel.fits, sel.mean_nll, sel.gic, sel.n_params, strict=True):
        eta = np.einsum("ij,ij->i", data.contexts @ fit.theta, data.differences)
        direct = np.mean(np.logaddexp(0, eta) - data.labels * eta)
        assert nll == pytest.approx(direct, rel=1e-10)
        assert gic == pytest.approx(direct + sel.penalty * k, rel=1e-10)


def test_gic_recovers_a_strong_rank(selection):
    *_, sel = selection
    assert sel.rank == 2
    frame = sel.to_frame()
    assert frame.loc[frame["selected"], "rank"].item() == 2
    assert sel.best.rank == 2
    # the likelihood never gets worse with rank; the penalty is what stops it
    assert np.all(np.diff(sel.mean_nll) <= 1e-9)


def test_penalty_zero_picks_the_largest_rank(selection):
    problem, *_ = selection
    sel = bl.select_rank(problem.sample(2000, seed=3), ranks=[1, 3], penalty=0.0)
    assert sel.rank == 3


@pytest.mark.parametrize(("kwargs", "match"), [({"ranks": [0]}, "rank"), ({"ranks": [99]}, "rank"),
                                               ({"ranks": []}, "empty"), ({"penalty": -1.0}, "penalty")])
def test_bad_arguments_name_themselves(selection, kwargs, match):
    problem, *_ = selection
    with pytest.raises(ValueError, match=match):
        bl.select_rank(problem.sample(300, seed=4), **kwargs)


@pytest.mark.slow
def test_gic_picks_rank_three_in_most_seeds_at_n_10000():
    """Issue #2: GIC picks the true rank r = 3 in >= 80% of seeds at N = 10,000 (Θ_ii = 2, q = 1)."""
    picks = []
    for seed in range(10):
        problem = simulate.paper_problem(rank=3, imbalance=1, theta_kind="diagonal", seed=seed)
        picks.append(bl.select_rank(problem.sample(10000, seed=100 + seed), ranks=range(1, 6)).rank)
    assert np.mean(np.array(picks) == 3) >= 0.8, picks
