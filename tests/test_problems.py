"""The Problem protocol: the paper's simulation and PersonalLLM implement it, and their truths agree."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_loco import simulate
from bayes_loco.datasets.personalllm import personalllm_problem, write_standin
from bayes_loco.evaluate import truth_rewards
from bayes_loco.experiments import PROBLEMS, Study, build_problem
from bayes_loco.experiments.runner import DEFAULTS
from bayes_loco.problems import Problem


@pytest.fixture(scope="module")
def personalllm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("personalllm")
    train = write_standin(folder / "train.csv", 200, seed=1)
    test = write_standin(folder / "test.csv", 50, seed=2)
    return personalllm_problem(train, test, d_x=5, rank=2, noise_dims=2, seed=0)


@pytest.fixture(scope="module")
def paper():
    return simulate.paper_problem(d_s=3, d_a=4, d_x=5, rank=2, imbalance=3, noise_dims=1, seed=0)


def explicit_rewards(theta, population):
    """r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a), one row and action at a time."""
    n, n_actions = population.features.shape[:2]
    return np.array([[population.contexts[i] @ theta @ population.features[i, a] for a in range(n_actions)]
                     for i in range(n)])


@pytest.mark.parametrize("name", ["paper", "personalllm"])
def test_problems_satisfy_the_protocol(name, paper, personalllm):
    problem = {"paper": paper, "personalllm": personalllm}[name]
    assert isinstance(problem, Problem)
    assert problem.theta.shape == (problem.d_x, problem.d_phi)
    data = problem.sample(60, seed=1)
    assert (data.d_x, data.d_phi) == (problem.d_x, problem.d_phi)
    population = problem.population(30, seed=2)
    assert (population.d_x, population.d_phi) == (problem.d_x, problem.d_phi)
    assert problem.has_global_populations == (name == "paper")


@pytest.mark.parametrize("name", ["paper", "personalllm"])
def test_rewards_are_the_truths_bilinear_form(name, paper, personalllm):
    problem = {"paper": paper, "personalllm": personalllm}[name]
    population = problem.population(25, seed=3)
    expected = explicit_rewards(problem.theta, population)
    assert np.allclose(problem.rewards(population), expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(truth_rewards(problem, population), expected, rtol=1e-12, atol=1e-12)


def test_global_populations_only_where_the_problem_has_them(paper, personalllm):
    pop = paper.population(4, seed=1, contexts_per_state=3, context_law="shifted")
    assert pop.n == 12 and pop.n_states == 4
    with pytest.raises(TypeError, match="contexts_per_state"):
        personalllm.population(4, seed=1, contexts_per_state=3)


def test_something_else_is_not_a_problem():
    assert not isinstance(np.zeros((2, 2)), Problem)
    assert not isinstance(object(), Problem)


def test_problems_are_built_by_name_from_settings(tmp_path):
    paper = build_problem("paper", DEFAULTS | {"d_x": 4, "d_s": 3, "d_a": 4, "rank": 1}, seed=0)
    assert isinstance(paper, simulate.PaperProblem) and paper.theta.shape == (4, 3 + 3)
    train, test = write_standin(tmp_path / "a.csv", 20, seed=1), write_standin(tmp_path / "b.csv", 10, seed=2)
    settings = DEFAULTS | {"d_x": 4, "rank": 2, "personalllm_train": str(train),
                           "personalllm_test": str(test)}
    assert build_problem("personalllm", settings, seed=0).d_x == 4
    assert set(PROBLEMS) >= {"paper", "personalllm"}
    with pytest.raises(ValueError, match="personalllm_train"):
        build_problem("personalllm", DEFAULTS, seed=0)
    with pytest.raises(ValueError, match=r"problem: unknown problem 'nope'"):
        build_problem("nope", DEFAULTS, seed=0)
    with pytest.raises(ValueError, match="unknown problem"):
        Study("s", ({"n": 100},), problem="nope")
    with pytest.raises(ValueError, match="unknown methods"):
        Study("s", ({"n": 100},), methods=("PRS-Wald",))
