"""PersonalLLM: the loader on generated files in the benchmark's layout, and the study end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayes_loco as bl
import bayes_loco.datasets.personalllm as moved
from bayes_loco import cli
from bayes_loco.datasets import (
    N_RESPONSES,
    REWARD_MODELS,
    expected_columns,
    load_personalllm,
    personalllm_problem,
    score_tensor,
    write_standin,
)
from bayes_loco.experiments import STUDIES, run_task
from bayes_loco.problems import Problem


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("personalllm")
    return write_standin(folder / "train.csv", 3000, seed=1), write_standin(folder / "test.csv", 400, seed=2)


def test_layout_has_the_benchmark_columns(files):
    frame = load_personalllm(files[0])
    assert list(frame.columns) == expected_columns()
    assert len(expected_columns()) == 1 + N_RESPONSES + N_RESPONSES * len(REWARD_MODELS)
    assert "response_8_oasst_pythia_1b" in frame.columns


def test_standin_keeps_the_published_moments_and_agreement(files):
    scores = score_tensor(load_personalllm(files[0])).reshape(-1, len(REWARD_MODELS))
    n = scores.shape[0]
    means, sds = np.array(list(REWARD_MODELS.values())).T
    # sample mean within 4 standard errors; sample sd within 4 of its standard errors sd/sqrt(2n)
    assert np.all(np.abs(scores.mean(axis=0) - means) < 4 * sds / np.sqrt(n))
    assert np.all(np.abs(scores.std(axis=0) - sds) < 4 * sds / np.sqrt(2 * n))
    corr = np.corrcoef(scores.T)[np.triu_indices(len(REWARD_MODELS), 1)]
    assert np.all(np.abs(corr - 0.8) < 4 * (1 - 0.8**2) / np.sqrt(n))


def test_missing_file_names_the_expected_columns(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"response_\{i\}_\{model\}.*gemma_2b"):
        load_personalllm(tmp_path / "nope.csv")


def test_malformed_file_names_the_missing_columns(files, tmp_path):
    frame = pd.read_csv(files[1]).drop(columns=["response_3_beaver_7b", "prompt"])
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    with pytest.raises(ValueError, match="prompt, response_3_beaver_7b"):
        load_personalllm(bad)
    frame = pd.read_csv(files[1])
    frame.loc[5, "response_2_gemma_7b"] = np.nan
    frame.to_csv(bad, index=False)
    with pytest.raises(ValueError, match="not finite"):
        load_personalllm(bad)


def test_parquet_is_read_like_csv(files, tmp_path):
    pytest.importorskip("pyarrow")
    path = write_standin(tmp_path / "small.parquet", 20, seed=3)
    assert score_tensor(load_personalllm(path)).shape == (20, N_RESPONSES, len(REWARD_MODELS))


def test_problem_standardises_with_train_moments(files):
    problem = personalllm_problem(*files, d_x=6, rank=2, noise_dims=3, seed=0)
    flat = problem.train_features.reshape(-1, problem.train_features.shape[-1])[:, : len(REWARD_MODELS)]
    assert np.allclose(flat.mean(axis=0), 0.0, atol=1e-12)
    assert np.allclose(flat.std(axis=0), 1.0)
    assert problem.theta.shape == (6, len(REWARD_MODELS) + 3)
    assert np.linalg.matrix_rank(problem.theta) == 2
    assert np.all(problem.theta[:, len(REWARD_MODELS):] == 0)  # noise dimensions carry no reward
    assert "train.csv" in problem.source


def test_problem_samples_btl_labels_and_a_test_population(files):
    problem = personalllm_problem(*files, d_x=5, rank=2, seed=0)
    data = problem.sample(4000, seed=1)
    assert data.d_phi == len(REWARD_MODELS)
    assert (data.actions[:, 0] != data.actions[:, 1]).all()
    eta = np.einsum("ij,ij->i", data.contexts @ problem.theta, data.differences)
    p = 1 / (1 + np.exp(-eta))
    assert abs(data.labels.mean() - p.mean()) < 4 * np.sqrt(np.mean(p * (1 - p)) / data.n)
    pop = problem.population(50, seed=2)
    assert pop.features.shape == (50, N_RESPONSES, len(REWARD_MODELS))
    assert problem.rewards(pop).shape == (50, N_RESPONSES)


def test_study_task_runs_end_to_end(files):
    settings = {"n": 1500, "d_x": 5, "rank": 2, "population": 100, "global_states": 0,
                "personalllm_train": str(files[0]), "personalllm_test": str(files[1])}
    rows = run_task("personalllm", 0, settings, 0, 0, ("MLE-Greedy", "PRS", "PRS-exact-Wald"),
                    problem=STUDIES["personalllm"].problem)
    frame = pd.DataFrame(rows)
    assert set(frame["scope"]) == {"personalised"}
    assert (frame["suboptimality"] >= -1e-12).all()
    assert frame.set_index("method").loc["PRS-exact-Wald", "relative_gap"] <= 1e-4
    # The problem is the study's choice, not the settings': with global states asked for, a problem
    # without global populations still gets the personalised policy only.
    rows = run_task("personalllm", 0, {**settings, "global_states": 5}, 0, 0, ("MLE-Greedy",),
                    problem="personalllm")
    assert {r["scope"] for r in rows} == {"personalised"}
    with pytest.raises(ValueError, match="personalllm_train"):
        run_task("personalllm", 0, {"n": 100, "d_x": 5, "rank": 2}, 0, 0, ("MLE-Greedy",),
                 problem="personalllm")


def test_problem_draws_its_data_with_the_model_functions(files):
    from bayes_loco.model import margins, rewards

    problem = personalllm_problem(*files, d_x=5, rank=2, seed=0)
    assert isinstance(problem, Problem) and not problem.has_global_populations
    assert (problem.d_x, problem.d_phi) == (5, len(REWARD_MODELS))
    pop = problem.population(20, seed=2)
    assert np.array_equal(problem.rewards(pop), rewards(problem.theta, pop.contexts, pop.features))
    data = problem.sample(300, seed=1)
    eta = margins(problem.theta, data.contexts, data.differences)
    assert np.corrcoef(eta, data.labels)[0, 1] > 0.2  # labels follow the margins under Θ*
    with pytest.raises(TypeError, match="no options"):
        problem.population(20, seed=2, contexts_per_state=4)


def test_cli_needs_both_split_files(tmp_path, files, capsys):
    code = cli.main(["run", "personalllm", "--train", str(files[0]), "--out", str(tmp_path), "--quiet"])
    assert code == cli.EXIT_USAGE  # a missing argument, not a bad file
    assert "--train and --test: give both" in capsys.readouterr().err
    code = cli.main(["run", "demo", "--train", str(files[0]), "--test", str(files[1]), "--out",
                     str(tmp_path), "--quiet"])
    assert code == cli.EXIT_USAGE  # options the study does not take are argument errors
    assert "'paper' problem" in capsys.readouterr().err


def test_a_saved_problem_loads_from_the_new_location(files, tmp_path):
    problem = personalllm_problem(*files, d_x=4, rank=2, seed=0)
    bl.save(problem, tmp_path / "problem.nc")
    loaded = bl.load(tmp_path / "problem.nc")
    assert type(loaded) is moved.PersonalLLMProblem
    assert np.array_equal(loaded.theta, problem.theta) and loaded.source == problem.source
    assert np.array_equal(loaded.test_features, problem.test_features)


def test_a_format_1_file_naming_the_old_module_loads(files, tmp_path):
    h5py = pytest.importorskip("h5py")
    problem = personalllm_problem(*files, d_x=4, rank=2, seed=0)
    path = tmp_path / "problem.nc"
    bl.save(problem, path)
    with h5py.File(path, "r+") as handle:  # the root's header as format 1 wrote it
        handle.attrs["bayes_loco_format"] = np.array([1])
        handle.attrs["bayes_loco_type"] = "bayes_loco.personalllm:PersonalLLMProblem"
    assert np.array_equal(bl.load(path).theta, problem.theta)
