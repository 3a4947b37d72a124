"""bl.datasets.write_arena: a GENERATED file in Chatbot Arena's schema that read_arena reads, from a known Θ*.

The truth is checked statistically: Davidson's MLE of a large generated file contains Θ* in
its 99.9% Wald set (a calibrated set misses with probability 0.001, whatever the seed), the
share of ties at equal rewards is ν / (2 + ν) within four binomial standard errors, and the
raw file is read back with pandas alone to check the schema.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import bayes_loco as bl
from bayes_loco.datasets import GeneratedArena, read_arena, write_arena
from bayes_loco.datasets.generate import ARENA_MODELS, GENERATED_JUDGE


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".json", ".csv"])
def test_each_suffix_reads_back_in_the_truths_coordinates(tmp_path, suffix):
    truth = write_arena(tmp_path / f"battles{suffix}", 600, seed=4, n_models=6, rank=2)
    assert isinstance(truth, GeneratedArena)
    battles = truth.read(style=True)
    assert battles.data.n == 600
    assert battles.context_names == truth.context_names
    assert battles.feature_names[: truth.theta.shape[1]] == truth.feature_names
    assert battles.data.d_phi == truth.theta_style.shape[1] == truth.theta.shape[1] + 4
    assert np.linalg.matrix_rank(truth.theta, tol=1e-9) == 2
    # the rewards table is x Θ* per language, 0 for the reference model
    x = battles.data.contexts
    for language, row in truth.rewards.iterrows():
        unit = x[battles.comparisons["language"].to_numpy() == language][0]
        np.testing.assert_allclose(row.to_numpy(), np.concatenate([[0.0], unit @ truth.theta]), atol=1e-12)


def test_the_raw_file_has_arenas_columns_and_says_it_is_generated(tmp_path):
    truth = write_arena(tmp_path / "arena.jsonl", 50, seed=0, n_models=3, judges=4)
    rows = [json.loads(line) for line in truth.path.read_text().splitlines()]
    frame = pd.DataFrame(rows)
    assert {"question_id", "model_a", "model_b", "winner", "judge", "language", "turn", "anony",
            "conv_metadata", "conversation_a", "conversation_b"} <= set(frame)
    assert set(frame["winner"]) <= {"model_a", "model_b", "tie"}
    assert (frame["model_a"] != frame["model_b"]).all()
    assert set(frame["model_a"]) | set(frame["model_b"]) <= set(ARENA_MODELS[:3])
    assert frame["judge"].str.startswith(GENERATED_JUDGE).all() and frame["judge"].nunique() <= 4
    assert {"sum_assistant_a_tokens", "header_count_b", "list_count_a", "bold_count_b"} <= set(
        frame["conv_metadata"][0])
    # each judge writes in one language
    assert (frame.groupby("judge")["language"].nunique() == 1).all()
    # read_arena takes the judges as users
    users = read_arena(truth.path).users
    assert users["n_comparisons"].sum() == 50 and users["user_id"].str.startswith(GENERATED_JUDGE).all()


def test_davidsons_mle_recovers_theta_within_its_wald_set(tmp_path):
    truth = write_arena(tmp_path / "arena.parquet", 20000, seed=3, n_models=5, rank=1, length_effect=0.8)
    battles = truth.read(style=True)
    fit = bl.fit_mle(battles.data, ties="davidson")
    wald = fit.calibrated_set(level=0.999)
    theta = truth.theta_style
    assert wald.contains(fit.coordinates.to_coordinates(theta))
    # and not a set that contains anything: a truth without the length effect is far outside
    wrong = theta.copy()
    wrong[0, truth.theta.shape[1]] = 0.0
    assert not wald.contains(fit.coordinates.to_coordinates(wrong))


def test_ties_at_equal_rewards_follow_davidson(tmp_path):
    n, nu = 4000, 1.0
    truth = write_arena(tmp_path / "arena.parquet", n, seed=7, signal=0.0, tie_strength=nu)
    y = truth.read().data.labels
    share, expected = np.mean(y == 0.5), nu / (2 + nu)
    assert abs(share - expected) < 4 * np.sqrt(expected * (1 - expected) / n)
    # without ties, none
    none = write_arena(tmp_path / "none.parquet", 200, seed=7, tie_strength=0.0).read().data.labels
    assert not np.any(none == 0.5)


def test_the_same_seed_writes_the_same_file(tmp_path):
    a = write_arena(tmp_path / "a.csv", 100, seed=11)
    b = write_arena(tmp_path / "b.csv", 100, seed=11)
    assert a.path.read_bytes() == b.path.read_bytes()
    np.testing.assert_array_equal(a.theta, b.theta)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_battles": 1}, "n_battles"),
    ({"n_models": 2}, "n_models"),
    ({"n_models": 13}, "n_models"),
    ({"rank": 0}, "rank"),
    ({"judges": 0}, "judges"),
    ({"tie_strength": -0.1}, "tie_strength"),
    ({"signal": -1.0}, "signal"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, message):
    arguments = {"n_battles": 100, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=message):
        write_arena(tmp_path / "a.parquet", **arguments)


def test_an_unreadable_suffix_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"path must end in .parquet"):
        write_arena(tmp_path / "a.xlsx", 100, seed=0)
