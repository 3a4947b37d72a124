"""calibrated_policy: the exact Wald policy or the row-space certificate, chosen by k / N alone."""

import numpy as np
import pytest
from conftest import repeated_rows

import bayes_loco as bl

LEVEL = 0.9


@pytest.fixture(scope="module")
def problem():
    # d_x = 3, d_φ = 7, r = 2: k = 2 · 10 − 4 = 16 coordinates
    return bl.simulate.paper_problem(d_s=4, d_a=4, d_x=3, rank=2, imbalance=3, seed=0)


def test_few_coordinates_per_comparison_give_the_exact_policy_of_prs_wald_set(problem):
    data, population = problem.sample(2_000, seed=1), problem.population(40, seed=2)  # k / N = 0.008
    policy = bl.calibrated_policy(data, 2, population, LEVEL)
    exact = bl.pessimistic_policy(bl.fit_prs(data, 2, ridge=1.0).calibrated_set(LEVEL), population,
                                  objective="exact")
    np.testing.assert_array_equal(policy.actions, exact.actions)
    assert policy.pessimistic_value == pytest.approx(exact.pessimistic_value, rel=1e-9, abs=1e-12)
    assert policy.level == LEVEL and policy.objective == "exact"
    assert policy.level_meaning.startswith("k / N = 16 / 2,000 = 0.008 ≤ 0.05: the exact policy")
    assert policy.level_meaning.endswith(exact.level_meaning)


def test_many_coordinates_per_comparison_give_the_row_space_certificate(problem):
    data, population = problem.sample(300, seed=1), problem.population(40, seed=2)  # k / N = 0.053
    policy = bl.calibrated_policy(data, 2, population, LEVEL)
    certified = bl.split_policy(data, 2, population, LEVEL, model="row-space").policy
    np.testing.assert_array_equal(policy.probabilities, certified.probabilities)
    assert policy.pessimistic_value == certified.pessimistic_value and policy.level == LEVEL
    assert policy.level_meaning.startswith("k / N = 16 / 300 = 0.053 > 0.05: certified in a row space")


def test_counted_rows_are_judged_by_the_comparisons_they_stand_for(problem):
    data, population = problem.sample(200, seed=1), problem.population(40, seed=2)
    expanded = repeated_rows(data, 2)
    counted = expanded.aggregate()  # 200 rows (k / 200 = 0.08) standing for 400 comparisons
    roads = [bl.calibrated_policy(d, 2, population, LEVEL).level_meaning.split(":")[0]
             for d in (counted, expanded)]
    assert counted.n == 200 and roads == ["k / N = 16 / 400 = 0.04 ≤ 0.05"] * 2


def test_the_road_reads_the_sizes_and_the_setting_not_the_outcomes(problem):
    """Flipping every outcome changes the fits but not the road; the threshold is the setting's."""
    data, population = problem.sample(2_000, seed=1), problem.population(40, seed=2)
    flipped = bl.PreferenceData(data.contexts, data.differences, 1.0 - data.labels)
    roads = {bl.calibrated_policy(d, 2, population).level_meaning.split(";")[0] for d in (data, flipped)}
    assert len(roads) == 1
    with bl.config_context(certify_dimension_ratio=0.005):
        assert "certified in a row space" in bl.calibrated_policy(data, 2, population).level_meaning


def test_bad_arguments_get_one_error_naming_them(problem):
    data, population = problem.sample(300, seed=1), problem.population(10, seed=2)
    with pytest.raises(TypeError, match="data must be a PreferenceData"):
        bl.calibrated_policy(data.differences, 2, population)
    with pytest.raises(ValueError, match="rank"):
        bl.calibrated_policy(data, 4, population)
    with pytest.raises(ValueError, match="level"):
        bl.calibrated_policy(data, 2, population, 1.0)
    with pytest.raises(ValueError, match="max_iter"):
        bl.calibrated_policy(data, 2, population, max_iter=0)
