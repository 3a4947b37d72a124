"""Public pairwise data with published reference fits, read through ``from_frame`` with names.

tests/fixtures/published/README.md cites each file's source and the printed fit it reproduces.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_loco as bl

PUBLISHED = Path(__file__).parent / "fixtures" / "published"

# BradleyTerry2 tests/baseball.Rout.save (Agresti 2002, Sec. 10.6): abilities relative to Baltimore.
BASEBALL = {"Boston": (1.1077, 0.3339), "Cleveland": (0.6839, 0.3319), "Detroit": (1.4364, 0.3396),
            "Milwaukee": (1.5814, 0.3433), "New York": (1.2476, 0.3359), "Toronto": (1.2945, 0.3367)}
BASEBALL_HOME = {"Boston": (1.1438, 0.3378), "Cleveland": (0.7047, 0.3350), "Detroit": (1.4754, 0.3446),
                 "Milwaukee": (1.6196, 0.3474), "New York": (1.2813, 0.3404), "Toronto": (1.3271, 0.3403)}
HOME_ADVANTAGE = (0.3023, 0.1309)


def _baseball_frame() -> pd.DataFrame:
    """One row per (home, away, outcome) with its count: the wins table as counts, as a user melts it."""
    table = pd.read_csv(PUBLISHED / "baseball.csv")
    won = table.assign(y=1, games=table["home.wins"])
    lost = table.assign(y=0, games=table["away.wins"])
    frame = pd.concat([won, lost], ignore_index=True)
    return frame.assign(at_home=1.0)[["home.team", "away.team", "y", "games", "at_home"]]


def _printed(table: pd.DataFrame, reference: str, printed: dict) -> None:
    """The summary's rows ``team − reference`` agree with the printed estimates and errors to 4 decimals."""
    for team, (estimate, se) in printed.items():
        row = table.loc[f"{team} − {reference}"]
        assert round(row["estimate"], 4) == pytest.approx(estimate, abs=1e-12), team
        assert round(row["std_err"], 4) == pytest.approx(se, abs=1e-12), team


def test_baseball_abilities_as_counts_reproduce_agresti():
    data = bl.PreferenceData.from_frame(_baseball_frame(), item_columns=("home.team", "away.team"),
                                        count_column="games")
    assert data.n_comparisons == 273 and data.counts is not None  # 21 pairs x 13 games
    fit = bl.fit_bradley_terry(data)
    assert fit.mle.covariance == "model"
    table = fit.summary().to_frame()
    _printed(table, "Baltimore", BASEBALL)
    assert fit.summary().header["N"] == 273
    # The leaderboard is named and ordered by the same abilities.
    board = fit.leaderboard()
    assert list(board.index[:2]) == ["Milwaukee", "Detroit"] and board.index[-1] == "Baltimore"
    assert board.loc["Milwaukee", "comparisons"] == 13 * 6


def test_baseball_with_home_advantage_reproduces_agresti():
    data = bl.PreferenceData.from_frame(_baseball_frame(), item_columns=("home.team", "away.team"),
                                        count_column="games", difference_columns=["at_home"])
    fit = bl.fit_bradley_terry(data)
    table = fit.summary().to_frame()
    _printed(table, "Baltimore", BASEBALL_HOME)
    home = table.loc["at_home"]
    assert (round(home["estimate"], 4), round(home["std_err"], 4)) == HOME_ADVANTAGE


def test_counts_are_not_sampling_weights():
    """The same counts read as sampling weights give the same estimates but other (sandwich) errors."""
    frame = _baseball_frame()
    counted = bl.fit_bradley_terry(bl.PreferenceData.from_frame(
        frame, item_columns=("home.team", "away.team"), count_column="games"))
    kept = frame[frame["games"] > 0]
    weighted = bl.fit_bradley_terry(bl.PreferenceData.from_frame(
        kept, item_columns=("home.team", "away.team"), weight_column="games"))
    a, b = counted.summary().to_frame(), weighted.summary().to_frame()
    np.testing.assert_allclose(a["estimate"], b["estimate"], atol=1e-7)
    assert weighted.mle.covariance == "sandwich"
    assert not np.allclose(a["std_err"], b["std_err"], rtol=0.05)


# PlackettLuce 0.4.3 (CRAN, 2023) vignette "Overview", Sec. 2.1-2.2 (Davidson 1970, Example 2): summary(mod),
# log-worths relative to brand 1 with model-based errors, and coef(mod, log = FALSE), the worths
# normalised to sum 1 and the tie parameter δ (Davidson's ν).
PUDDING = {"2": (0.2202, 0.1872), "3": (0.1530, 0.1935), "4": (0.1753, 0.1882), "5": (0.1339, 0.1927),
           "6": (0.3771, 0.1924)}
PUDDING_WORTHS = (0.1388005, 0.1729985, 0.1617420, 0.1653930, 0.1586805, 0.2023855)
PUDDING_NU, PUDDING_LOG_NU, PUDDING_DEVIANCE = 0.7468147, -0.2919, 1619.4
# The printed fit stops after 7 iterations (maxit = 7, "to obtain the same worth parameters as
# Davidson (1970)"; it warns "Iterations have not converged"): brand 4's log-worth had not settled in
# its 4th decimal (converged 0.1751, where Davidson's own iteration run to the end agrees: test below).
PUDDING_UNSETTLED = {"4": 2e-4}


def _pudding_frame() -> pd.DataFrame:
    """One row per (i, j, outcome) with its count: i preferred (y = 1), j preferred (0), no preference (½)."""
    table = pd.read_csv(PUBLISHED / "pudding.csv")
    outcomes = [table.assign(y=y, n=table[column]) for y, column in ((1.0, "w_ij"), (0.0, "w_ji"),
                                                                      (0.5, "t_ij"))]
    return pd.concat(outcomes, ignore_index=True)[["i", "j", "y", "n"]]


def _davidson_iteration(table: pd.DataFrame, iterations: int = 500) -> tuple[np.ndarray, float]:
    """Davidson's (1970) fixed-point iteration for the worths π (Σπ = 1) and ν, run to convergence."""
    i, j = table["i"].to_numpy() - 1, table["j"].to_numpy() - 1
    r, ties = table["r_ij"].to_numpy(float), table["t_ij"].to_numpy(float)
    n = int(max(i.max(), j.max())) + 1
    # s_k = 2·(wins of k) + (ties of k): the sufficient statistic of π_k.
    scores = (np.bincount(i, 2 * table["w_ij"] + ties, n) + np.bincount(j, 2 * table["w_ji"] + ties, n))
    nu = 2 * ties.sum() / (r.sum() - ties.sum())
    pi = np.full(n, 1 / n)
    for _ in range(iterations):
        root = np.sqrt(pi[i] * pi[j])
        denominator = pi[i] + pi[j] + nu * root
        load = (np.bincount(i, r * (2 + nu * np.sqrt(pi[j] / pi[i])) / denominator, n)
                + np.bincount(j, r * (2 + nu * np.sqrt(pi[i] / pi[j])) / denominator, n))
        updated = scores / load
        updated /= updated.sum()
        root = np.sqrt(updated[i] * updated[j])
        nu = ties.sum() / np.sum(r * root / (updated[i] + updated[j] + nu * root))
        if np.allclose(np.log(updated), np.log(pi), rtol=0, atol=1e-13):
            break
        pi = updated
    return updated, nu


def test_pudding_davidson_ties_reproduce_published_fit():
    data = bl.PreferenceData.from_frame(_pudding_frame(), item_columns=("i", "j"), count_column="n")
    assert data.item_names == ("1", "2", "3", "4", "5", "6") and data.n_comparisons == 745
    fit = bl.fit_bradley_terry(data, ties="davidson")
    assert fit.mle.covariance == "model" and fit.summary().header["ties"] == "davidson"
    table = fit.summary().to_frame()
    for brand, (estimate, se) in PUDDING.items():
        row = table.loc[f"{brand} − 1"]
        assert round(row["std_err"], 4) == pytest.approx(se, abs=1e-12), brand
        if brand in PUDDING_UNSETTLED:
            assert abs(row["estimate"] - estimate) < PUDDING_UNSETTLED[brand], brand
        else:
            assert round(row["estimate"], 4) == pytest.approx(estimate, abs=1e-12), brand
    # Worths on the printed scale (Σπ = 1) and ν agree to 4 decimals; −2 log L is the printed deviance.
    log_worth = np.concatenate([[0.0], table["estimate"].to_numpy()])
    worths = np.exp(log_worth) / np.exp(log_worth).sum()
    np.testing.assert_array_equal(np.round(worths, 4), np.round(PUDDING_WORTHS, 4))
    assert round(fit.mle.nu, 4) == round(PUDDING_NU, 4)
    assert round(float(np.log(fit.mle.nu)), 4) == PUDDING_LOG_NU
    assert round(-2 * fit.loglik, 1) == PUDDING_DEVIANCE


def test_pudding_davidson_fit_is_davidsons_converged_iteration():
    """Davidson's own iteration, run to convergence, lands on the package's MLE (π and ν to 1e-7)."""
    worths, nu = _davidson_iteration(pd.read_csv(PUBLISHED / "pudding.csv"))
    fit = bl.fit_bradley_terry(bl.PreferenceData.from_frame(_pudding_frame(), item_columns=("i", "j"),
                                                            count_column="n"), ties="davidson")
    log_worth = np.concatenate([[0.0], fit.summary().to_frame()["estimate"].to_numpy()])
    np.testing.assert_allclose(np.exp(log_worth) / np.exp(log_worth).sum(), worths, rtol=0, atol=1e-7)
    assert fit.mle.nu == pytest.approx(nu, abs=1e-7)
    # ... where brand 4's log-worth over brand 1 reads 0.1751 (printed after 7 iterations: 0.1753).
    assert round(float(np.log(worths[3] / worths[0])), 4) == 0.1751
