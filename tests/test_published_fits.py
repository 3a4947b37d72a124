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
