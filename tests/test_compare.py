"""The comparison harness: every method through the one solver, with truth and coverage."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BAYES_RANK as RANK

from bayes_loco import bayes as bb


def test_compare_policies_table(bayes_nuts, bayes_problem):
    nuts = bayes_nuts
    truth, data, _ = bayes_problem
    pop = truth.population(80, seed=5)
    table = bb.compare_policies(data, pop, rank=RANK, truth=truth, posterior=nuts, levels=(0.9,))
    assert list(table.columns) == bb.compare.COLUMNS
    posterior = table[table.method == "Posterior"]
    assert set(zip(posterior.set_kind, posterior.objective, strict=True)) == {
        ("ellipsoid", "relaxed"), ("ellipsoid", "exact"), ("draws", "relaxed"), ("draws", "exact"),
        ("quantile", "relaxed")}
    assert {"PRS", "PRS-Wald", "LowRank-Greedy", "Posterior-mean-Greedy"} <= set(table.method)
    assert (table.suboptimality >= -1e-9).all()
    sets = table.set_kind.isin(["gram", "wald", "ellipsoid", "draws"])
    assert table.loc[sets, "covered"].isin([0, 1]).all()
    assert table.loc[table.set_kind == "quantile", "covered"].isna().all()
    blind = bb.compare_policies(data, pop, rank=RANK, posterior=nuts, kinds=("ellipsoid",),
                                objectives=("exact",), include_greedy=False)
    assert blind.suboptimality.isna().all() and len(blind) == 3
    with pytest.raises(ValueError, match="kinds"):
        bb.compare_policies(data, pop, rank=RANK, posterior=nuts, kinds=("box",))
    with pytest.raises(ValueError, match="truth"):
        bb.compare_policies(data, pop, rank=RANK, posterior=nuts, truth=np.zeros((2, 2)))
