"""Readers of downloaded files: the committed Arena and PRISM fixtures through their documented mappings.

The fixtures (tests/fixtures/arena, tests/fixtures/prism) were written by scripts that do
not import bayes_loco; the expectations below are parsed from the raw files with json
and pandas, or computed by hand.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

import bayes_loco as bl
from bayes_loco.datasets import Dataset, read_arena, read_prism, write_prism

FIXTURES = Path(__file__).parent / "fixtures"
ARENA = FIXTURES / "arena"
PRISM = FIXTURES / "prism"
WINNER_Y = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def one_hot_difference(dataset: Dataset, name_1: str, name_0: str) -> np.ndarray:
    """e(name_1) − e(name_0) over the model columns (the reference model has none)."""
    out = np.zeros(dataset.data.d_phi)
    for name, sign in ((name_1, 1.0), (name_0, -1.0)):
        column = f"model={name}"
        if column in dataset.feature_names:
            out[dataset.feature_names.index(column)] += sign
    return out


# ------------------------------------------------------------------------------------------ Arena


def test_arena_conversations_map_rows_as_documented():
    dataset = read_arena(ARENA / "conversations.jsonl")
    raw = lines(ARENA / "conversations.jsonl")
    assert dataset.data.n == len(raw) == 60
    # by hand: row 0 vicuna beats koala; row 1 vicuna (model_b) beats alpaca; rows 2, 3 the two tie kinds
    assert list(dataset.data.labels[:4]) == [1.0, 0.0, 0.5, 0.5]
    assert dataset.comparisons.loc[0, ["action_1", "action_0"]].tolist() == ["vicuna-13b", "koala-13b"]
    reference = dataset.actions["name"].iloc[0]
    assert dataset.actions["reference"].tolist() == [True] + [False] * (dataset.n_actions - 1)
    assert f"model={reference}" not in dataset.feature_names
    assert dataset.data.d_phi == dataset.n_actions - 1 == 4
    assert dataset.data.d_x == 1 and np.all(dataset.data.contexts == 1)  # plain Bradley–Terry
    for t, row in enumerate(raw):
        assert dataset.data.labels[t] == WINNER_Y[row["winner"]]
        expected = one_hot_difference(dataset, row["model_a"], row["model_b"])
        assert np.array_equal(dataset.data.differences[t], expected)
        names = dataset.actions["name"].to_numpy()
        assert [names[i] for i in dataset.data.actions[t]] == [row["model_b"], row["model_a"]]
    assert list(dataset.groups) == [row["judge"] for row in raw]
    assert dataset.users.set_index("user_id")["n_comparisons"].to_dict() == pd.Series(
        [row["judge"] for row in raw]).value_counts().to_dict()
    assert dataset.data.ties.sum() == sum(row["winner"].startswith("tie") for row in raw)
    # the default reference is the model in most battles
    counts = pd.Series([r["model_a"] for r in raw] + [r["model_b"] for r in raw]).value_counts()
    assert counts[reference] == counts.max()
    assert "ties=" in repr(dataset) and "users=8" in repr(dataset)


def test_arena_55k_one_hot_winners():
    dataset = read_arena(ARENA / "hp55k.csv")
    raw = pd.read_csv(ARENA / "hp55k.csv")
    expected = raw["winner_model_a"] + 0.5 * raw["winner_tie"]
    assert np.array_equal(dataset.data.labels, expected.to_numpy())
    assert list(dataset.data.labels[:4]) == [1.0, 0.0, 0.5, 0.5]
    for t, row in raw.iterrows():
        expected = one_hot_difference(dataset, row["model_a"], row["model_b"])
        assert np.array_equal(dataset.data.differences[t], expected)
    assert len(set(dataset.groups)) == len(raw)  # no judge: each battle its own user
    assert "no judge column" in repr(dataset)
    assert dataset.comparisons["id"].tolist() == raw["id"].tolist()


def test_arena_style_columns_follow_arenas_formula():
    dataset = read_arena(ARENA / "hp100k.parquet", style=True)
    raw = pd.read_parquet(ARENA / "hp100k.parquet")
    assert dataset.feature_names[-4:] == ("style_length", "style_headers", "style_lists", "style_bold")
    assert dataset.data.d_phi == dataset.n_actions - 1 + 4

    def total(value):
        return sum(value.values()) if isinstance(value, dict) else value

    keys = ("sum_assistant_{}_tokens", "header_count_{}", "list_count_{}", "bold_count_{}")
    raw_ratio = np.array([[(total(m[k.format("a")]) - total(m[k.format("b")]))
                           / (total(m[k.format("a")]) + total(m[k.format("b")]) + 1) for k in keys]
                          for m in raw["conv_metadata"]])
    # row 0 by hand: 300 vs 100 tokens, 2 vs 0 headers, 3 ordered + 1 unordered vs no list items, 4 vs 0 bold
    assert np.allclose(raw_ratio[0], [200 / 401, 2 / 3, 4 / 5, 4 / 5])
    standardised = (raw_ratio - raw_ratio.mean(axis=0)) / raw_ratio.std(axis=0)
    assert np.allclose(dataset.data.differences[:, -4:], standardised, rtol=0, atol=1e-12)
    # the model columns are untouched by style
    plain = read_arena(ARENA / "hp100k.parquet")
    assert np.array_equal(dataset.data.differences[:, :-4], plain.data.differences)
    # style is antisymmetric: swapping a and b (and the winner) flips every difference column
    swapped = raw.rename(columns={"model_a": "model_b", "model_b": "model_a"})
    swapped["winner"] = raw["winner"].map({"model_a": "model_b", "model_b": "model_a"}).fillna(raw["winner"])
    swapped["conv_metadata"] = [{re.sub(r"_([ab])(_|$)", lambda g: f"_{'ba'['ab'.index(g[1])]}{g[2]}", k): v
                                 for k, v in m.items()} for m in raw["conv_metadata"]]
    flipped = read_arena(swapped, style=True, reference_model=dataset.actions["name"].iloc[0])
    assert np.allclose(flipped.data.differences, -dataset.data.differences, atol=1e-12)
    assert np.array_equal(flipped.data.labels, 1 - dataset.data.labels)


def test_arena_language_contexts_and_population():
    dataset = read_arena(ARENA / "conversations.jsonl", contexts=("language",))
    raw = lines(ARENA / "conversations.jsonl")
    languages = sorted({r["language"] for r in raw})
    assert dataset.context_names == ("intercept", *(f"language={v}" for v in languages if v != "English"))
    assert np.array_equal(dataset.data.contexts[1], [1.0, 1.0, 0.0])  # row 1 is Chinese
    assert np.array_equal(dataset.data.contexts[0], [1.0, 0.0, 0.0])  # English is the reference level
    with pytest.raises(ValueError, match=r"contexts of users .* vary"):
        dataset.population()
    population = read_arena(ARENA / "conversations.jsonl").population()
    assert population.n == 8 and population.n_actions == 5
    assert np.array_equal(population.features[0], np.vstack([np.zeros(4), np.eye(4)]))
    pooled = read_arena(ARENA / "conversations.jsonl", contexts=("language",), min_count=10)
    assert "language=(other)" in pooled.context_names


def test_arena_140k_sessions_and_both_bad():
    """arena-human-preference-140k: no judge, evaluation_session_id for the user, winner 'both_bad'."""
    reference = read_arena(ARENA / "conversations.jsonl")
    frame = pd.DataFrame(lines(ARENA / "conversations.jsonl")).drop(columns=["judge", "question_id"])
    frame.insert(0, "id", [f"v{i}" for i in range(len(frame))])
    frame["evaluation_session_id"] = [f"s{i // 3}" for i in range(len(frame))]
    frame["winner"] = frame["winner"].replace({"tie (bothbad)": "both_bad"})
    dataset = read_arena(frame)
    assert np.array_equal(dataset.data.labels, reference.data.labels)
    assert list(dataset.groups) == list(frame["evaluation_session_id"]) and len(dataset.users) == 20
    assert dataset.comparisons["id"].tolist() == frame["id"].tolist() and "the frame" in dataset.source


@pytest.mark.parametrize("suffix", [".json", ".csv", ".parquet", ".jsonl-as-json"])
def test_arena_formats_read_alike(tmp_path, suffix):
    reference = read_arena(ARENA / "conversations.jsonl")
    frame = pd.DataFrame(lines(ARENA / "conversations.jsonl"))
    if suffix == ".json":
        path = tmp_path / "battles.json"
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    elif suffix == ".jsonl-as-json":  # Hugging Face writes JSON lines under .json
        path = tmp_path / "battles.json"
        shutil.copy(ARENA / "conversations.jsonl", path)
    elif suffix == ".csv":
        path = tmp_path / "battles.csv"
        frame.to_csv(path, index=False)
    else:
        path = tmp_path / "battles.parquet"
        frame.drop(columns=["toxic_chat_tag"]).to_parquet(path)
    dataset = read_arena(path)
    assert np.array_equal(dataset.data.labels, reference.data.labels)
    assert np.array_equal(dataset.data.differences, reference.data.differences)
    assert np.array_equal(dataset.groups, reference.groups)


def test_arena_style_from_a_csv_holding_dicts(tmp_path):
    frame = pd.read_parquet(ARENA / "hp100k.parquet")
    frame["conv_metadata"] = [{k: (dict(v) if isinstance(v, dict) else v) for k, v in m.items()}
                              for m in frame["conv_metadata"]]
    path = tmp_path / "hp100k.csv"
    frame.to_csv(path, index=False)  # pandas writes the dicts' repr
    assert np.allclose(read_arena(path, style=True).data.differences,
                       read_arena(ARENA / "hp100k.parquet", style=True).data.differences)


def test_arena_refuses_other_files(tmp_path):
    lacks = "not a Chatbot Arena file: it lacks 'model_a', 'model_b', 'winner'"
    with pytest.raises(ValueError, match=lacks) as err:
        read_arena(PRISM / "utterances.jsonl")
    assert str(PRISM / "utterances.jsonl") in str(err.value)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_arena(empty)
    blank = tmp_path / "blank.csv"
    blank.write_text("model_a,model_b,winner\n")
    with pytest.raises(ValueError, match="has no rows"):
        read_arena(blank)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_arena(tmp_path / "missing.parquet")
    text = tmp_path / "battles.txt"
    text.write_text("x")
    with pytest.raises(ValueError, match=r"cannot read \.txt"):
        read_arena(text)
    frame = pd.DataFrame(lines(ARENA / "conversations.jsonl"))
    frame.loc[7, "winner"] = "model_c"
    with pytest.raises(ValueError, match=r"winner in row 7 is 'model_c'"):
        read_arena(frame)
    frame = pd.read_csv(ARENA / "hp55k.csv")
    frame.loc[4, "winner_tie"] = 1 - frame.loc[4, "winner_tie"]
    with pytest.raises(ValueError, match=r"row 4 .* exactly one of them must be 1"):
        read_arena(frame)
    with pytest.raises(ValueError, match="lacks 'conv_metadata'"):
        read_arena(ARENA / "hp55k.csv", style=True)
    with pytest.raises(ValueError, match="lacks 'judge'"):
        read_arena(ARENA / "hp55k.csv", contexts=("judge",))
    with pytest.raises(ValueError, match="reference_model = 'gpt-5' is not an action"):
        read_arena(ARENA / "hp55k.csv", reference_model="gpt-5")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model_a": "x"}\n{not json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        read_arena(bad)


def test_arena_plain_bt_fit_equals_an_independent_solve():
    """fit_mle on the read data = Bradley–Terry with ties as half a win, solved from the raw file by scipy."""
    dataset = read_arena(ARENA / "conversations.jsonl")
    raw = lines(ARENA / "conversations.jsonl")
    names = list(dataset.actions["name"])
    a = np.array([names.index(r["model_a"]) for r in raw])
    b = np.array([names.index(r["model_b"]) for r in raw])
    y = np.array([WINNER_Y[r["winner"]] for r in raw])

    def loss(free):
        beta = np.concatenate([[0.0], free])  # the reference model's rating is 0
        eta = beta[a] - beta[b]
        return -np.sum(y * log_expit(eta) + (1 - y) * log_expit(-eta))

    solve = minimize(loss, np.zeros(len(names) - 1), method="BFGS", options={"gtol": 1e-10})
    fit = bl.fit_mle(dataset.data)
    assert np.allclose(fit.theta[0], solve.x, atol=1e-5)


# ------------------------------------------------------------------------------------------ PRISM


def scored_turns(path: Path) -> dict:
    """(conversation, turn) → scored responses [(within_turn_id, model, score, text)], from the raw file."""
    turns = {}
    for row in lines(path):
        if row["score"] is not None:
            turns.setdefault((row["conversation_id"], row["turn"]), []).append(
                (row["within_turn_id"], row["model_name"], row["score"], row["model_response"]))
    return turns


def test_prism_opening_turn_by_hand():
    dataset = read_prism(PRISM)
    c0 = dataset.comparisons[dataset.comparisons["conversation_id"] == "c0"]
    # scores 70, 55, 70, 20 for claude-2.1, gpt-4, command, palm-2: pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
    assert c0["y"].tolist() == [0.0, 0.5, 0.0, 1.0, 0.0, 0.0]
    pairs = list(zip(c0["within_turn_id_0"], c0["within_turn_id_1"], strict=True))
    assert pairs == list(combinations(range(4), 2))
    assert c0["action_0"].tolist()[:3] == ["claude-2.1"] * 3
    assert dataset.actions["name"].iloc[0] == "gpt-4"  # in most comparisons here: the reference
    assert "model=gpt-4" not in dataset.feature_names and dataset.data.d_phi == dataset.n_actions - 1
    expected = np.zeros(dataset.data.d_phi)
    expected[dataset.feature_names.index("model=claude-2.1")] = -1.0  # e(gpt-4) − e(claude-2.1), no gpt-4
    assert np.array_equal(dataset.data.differences[0], expected)
    assert np.array_equal(dataset.data.labels[c0.index], c0["y"].to_numpy())


def test_prism_pairs_per_turn_and_ties_match_the_raw_file():
    for turns in ("first", "all"):
        dataset = read_prism(PRISM, turns=turns)
        raw = scored_turns(PRISM / "utterances.jsonl")
        if turns == "first":
            raw = {key: value for key, value in raw.items() if key[1] == 0}
        formed = dataset.comparisons.groupby(["conversation_id", "turn"]).size()
        assert {key: math.comb(len(v), 2) for key, v in raw.items()} == formed.to_dict()
        assert dataset.data.n == sum(math.comb(len(v), 2) for v in raw.values())
        # every pair, with y from its scores and a tie exactly where they are equal
        expected = {}
        for (cid, turn), responses in raw.items():
            for (w0, _, s0, _), (w1, _, s1, _) in combinations(sorted(responses), 2):
                expected[cid, turn, w0, w1] = 1.0 if s1 > s0 else 0.0 if s1 < s0 else 0.5
        got = {(r.conversation_id, r.turn, r.within_turn_id_0, r.within_turn_id_1): r.y
               for r in dataset.comparisons.itertuples()}
        assert got == expected
        equal = dataset.comparisons["score_0"] == dataset.comparisons["score_1"]
        assert np.array_equal(dataset.data.ties, equal)
    assert read_prism(PRISM).data.n == 6 + 3 + 3 + 15 * 6  # c1 shows 3 models, c2 has one unscored response
    assert read_prism(PRISM, turns="all").data.n == 102 + 18
    assert read_prism(PRISM).data.has_ties


def test_prism_contexts_are_the_survey_one_hots():
    dataset = read_prism(PRISM)
    x = pd.DataFrame(dataset.data.contexts, columns=dataset.context_names)
    assert dataset.context_names[0] == "intercept"
    by_user = x.groupby(dataset.groups).agg(["min", "max"])
    assert all((by_user.xs("min", axis=1, level=1) == by_user.xs("max", axis=1, level=1)).all())
    first = {u: i for i, u in reversed(list(enumerate(dataset.groups)))}
    # user0 gave the most common answer to every question (gender: Female and Male tie 4–4, Female first)
    assert x.iloc[first["user0"]].tolist() == [1.0] + [0.0] * (dataset.data.d_x - 1)
    row9 = x.iloc[first["user9"]]
    assert set(row9.index[row9 == 1]) == {"intercept", "age=35-44 years old", "gender=Male",
                                          "english_proficiency=Fluent", "lm_familiarity=Not familiar at all",
                                          "lm_frequency_use=(missing)"}
    # user8 answered the survey only
    assert list(dataset.users["user_id"]) == [f"user{i}" for i in (0, 1, 2, 3, 4, 5, 6, 7, 9)]
    assert "surveyed users without comparisons left out: 1" in repr(dataset)
    assert dataset.users["n_comparisons"].sum() == dataset.data.n
    assert list(np.unique(dataset.groups)) == sorted(dataset.users["user_id"])
    # a chosen reference level, and a nested answer named with a dot
    other = read_prism(PRISM, survey_columns=("gender", "location.special_region"),
                       reference_levels={"gender": "Male"})
    assert other.context_names == ("intercept", "gender=Female", "gender=Non-binary / third gender")
    population = dataset.population()
    assert population.n == 9 and np.array_equal(population.contexts[0], x.iloc[first["user0"]])


def test_prism_conversations_and_utterances_give_the_same_data():
    a = read_prism(PRISM, source="utterances", turns="all")
    b = read_prism(PRISM, source="conversations", turns="all")
    for name in ("contexts", "differences", "labels", "actions"):
        assert np.array_equal(getattr(a.data, name), getattr(b.data, name))
    pd.testing.assert_frame_equal(a.comparisons, b.comparisons)
    assert "conversations.jsonl" in b.source and "utterances.jsonl" in a.source


def test_prism_response_length_column():
    dataset = read_prism(PRISM, response_features=True)
    assert dataset.feature_names[-1] == "log_chars"
    texts = {(cid, turn, w): text for (cid, turn), rs in scored_turns(PRISM / "utterances.jsonl").items()
             for w, _, _, text in rs}
    for r, row in zip(dataset.data.differences, dataset.comparisons.itertuples(), strict=True):
        t1 = texts[row.conversation_id, row.turn, row.within_turn_id_1]
        t0 = texts[row.conversation_id, row.turn, row.within_turn_id_0]
        assert r[-1] == pytest.approx(math.log(1 + len(t1)) - math.log(1 + len(t0)), abs=1e-12)


def test_prism_refusals(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"PRISM folder .* does not exist"):
        read_prism(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="is a file; read_prism takes the folder"):
        read_prism(PRISM / "survey.jsonl")
    folder = tmp_path / "prism"
    folder.mkdir()
    shutil.copy(PRISM / "utterances.jsonl", folder)
    with pytest.raises(FileNotFoundError, match=r"survey\.jsonl"):
        read_prism(folder)
    shutil.copy(PRISM / "survey.jsonl", folder)
    with pytest.raises(FileNotFoundError, match=r"conversations\.jsonl"):
        read_prism(folder, source="conversations")
    shutil.copy(ARENA / "conversations.jsonl", folder / "conversations.jsonl")
    lacks = "not a PRISM conversations file: it lacks 'conversation_id', 'user_id', 'conversation_history'"
    with pytest.raises(ValueError, match=lacks):
        read_prism(folder, source="conversations")
    with pytest.raises(ValueError, match=r"not a PRISM survey: it lacks 'religion'"):
        read_prism(folder, survey_columns=("age", "religion"))
    (folder / "utterances.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_prism(folder)
    rows = lines(PRISM / "utterances.jsonl")
    for broken, match in (({"score": "high"}, "score of rated response 0 is 'high'"),
                          ({"user_id": "stranger"}, r"users \['stranger'\] rated responses but have no row"),
                          ({"within_turn_id": 1}, "has two responses with within_turn_id 1")):
        with (folder / "utterances.jsonl").open("w") as handle:
            for i, row in enumerate(rows):
                handle.write(json.dumps({**row, **broken} if i == 0 else row) + "\n")
        with pytest.raises(ValueError, match=match):
            read_prism(folder)
    with (folder / "utterances.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps({k: v for k, v in row.items() if k != "within_turn_id"}) + "\n")
    with pytest.raises(ValueError, match=r"not a PRISM utterances file: it lacks 'within_turn_id'"):
        read_prism(folder)
    with pytest.raises(ValueError, match=r"reference_levels\['gender'\] = 'Robot' is not an answer"):
        read_prism(PRISM, reference_levels={"gender": "Robot"})
    with pytest.raises(ValueError, match="turns must be one of"):
        read_prism(PRISM, turns="last")


def test_prism_first_turn_is_the_opening_turn_even_unscored(tmp_path):
    folder = tmp_path / "prism"
    shutil.copytree(PRISM, folder)
    rows = lines(PRISM / "utterances.jsonl")
    with (folder / "utterances.jsonl").open("w") as handle:
        for row in rows:  # c0's opening responses lose their scores: c0 gives no comparison, not its turn 1
            unscored = row["conversation_id"] == "c0" and row["turn"] == 0
            handle.write(json.dumps({**row, "score": None} if unscored else row) + "\n")
    dataset = read_prism(folder)
    assert "c0" not in set(dataset.comparisons["conversation_id"]) and dataset.data.n == 102 - 6
    assert "responses without a score left out: 5" in repr(dataset)  # c0's four and c2's one


@pytest.mark.parametrize("reader", ["arena-100k-style", "arena-55k", "prism"])
def test_fit_mle_runs_on_every_fixture(reader):
    dataset = {"arena-100k-style": lambda: read_arena(ARENA / "hp100k.parquet", style=True),
               "arena-55k": lambda: read_arena(ARENA / "hp55k.csv"),
               "prism": lambda: read_prism(PRISM, response_features=True)}[reader]()
    # PRISM's fixture has d_x·d_φ = 23·6 = 138 parameters for 102 comparisons: separable, so a ridge
    ridge = 1.0 if reader == "prism" else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        fit = bl.fit_mle(dataset.data, ridge=ridge)
    assert fit.theta.shape == (dataset.data.d_x, dataset.data.d_phi) and np.isfinite(fit.theta).all()
    assert np.isfinite(fit.loglik)


# ---------------------------------------------------------------------------------- the generator


def test_generated_prism_round_trips_with_its_truth(tmp_path):
    truth = write_prism(tmp_path / "generated", 40, seed=3, n_models=8, rank=2, length_effect=0.3)
    dataset = truth.read()
    assert dataset.context_names == truth.context_names and dataset.feature_names == truth.feature_names
    assert truth.theta.shape == (dataset.data.d_x, dataset.data.d_phi)
    assert np.linalg.matrix_rank(truth.theta) == 2
    assert "GENERATED" in repr(dataset) and "GENERATED" in (tmp_path / "generated" / "README.txt").read_text()
    survey = lines(tmp_path / "generated" / "survey.jsonl")
    assert all(row["study_id"].startswith("GENERATED") for row in survey)
    # the truth's rewards are its Θ* in the coordinates read back, user by user
    population = dataset.population()
    rewards = truth.rewards.loc[dataset.users["user_id"], list(dataset.actions["name"])].to_numpy()
    assert np.allclose(population.contexts @ truth.theta @ population.features[0].T, rewards, atol=1e-12)
    assert np.allclose(rewards[:, 0], 0.0)
    assert truth.theta_response.shape == (dataset.data.d_x, dataset.data.d_phi + 1)
    assert truth.read(response_features=True).feature_names[-1] == "log_chars"
    # both rating files and the documented counts: 40 users × 3 conversations × 6 opening pairs
    assert dataset.data.n == 40 * 3 * 6
    assert truth.read(turns="all", source="conversations").data.n == 40 * 3 * 7
    again = write_prism(tmp_path / "again", 40, seed=3, n_models=8, rank=2, length_effect=0.3)
    assert (tmp_path / "again" / "utterances.jsonl").read_text() == (
        tmp_path / "generated" / "utterances.jsonl").read_text()
    assert np.array_equal(again.theta, truth.theta)


def test_generated_labels_follow_bradley_terry_in_the_truth(tmp_path):
    """E[y | η*] = σ(η*) up to the rounding of scores to integers.

    Rounding moves each utility by at most 0.5/score_scale = 0.05, so a margin by at
    most 0.1 and σ by at most 0.025; pairs of one turn share responses, so the standard
    error is clustered by conversation.
    """
    truth = write_prism(tmp_path, 400, seed=11, n_models=10, rank=2, conversations=3)
    dataset = truth.read()
    eta = np.einsum("ij,jk,ik->i", dataset.data.contexts, truth.theta, dataset.data.differences)
    residual = dataset.data.labels - expit(eta)
    conversation = dataset.comparisons["conversation_id"].to_numpy()
    assert dataset.data.n == 400 * 3 * 6
    for selected in (eta < -1, np.abs(eta) <= 1, eta > 1):
        sums = pd.Series(residual[selected]).groupby(conversation[selected]).sum()
        se = math.sqrt(float((sums**2).sum())) / selected.sum()
        assert abs(residual[selected].mean()) < 4 * se + 0.025, (selected.sum(), se)
    assert np.corrcoef(eta, dataset.data.labels)[0, 1] > 0.3  # the labels carry the truth's signal


def test_generator_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="n_models"):
        write_prism(tmp_path, 10, seed=0, n_models=13)
    with pytest.raises(ValueError, match="rank"):
        write_prism(tmp_path, 10, seed=0, n_models=4, rank=4)
    with pytest.raises(ValueError, match="seed must be given"):
        write_prism(tmp_path, 10, seed=None)
