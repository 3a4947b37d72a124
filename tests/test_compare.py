"""The comparison harness: every method through the one solver, with truth and coverage.

``compare_policies`` is the studies' own machinery (the same methods, fits, sets
and rows as :func:`bayes_loco.experiments.run_methods`) on the user's data.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BAYES_RANK as RANK

from bayes_loco.experiments import COLUMNS, METHODS, compare_policies, run_methods


def test_compare_policies_table(bayes_nuts, bayes_problem):
    nuts = bayes_nuts
    truth, data, _ = bayes_problem
    pop = truth.population(80, seed=5)
    table = compare_policies(data, pop, rank=RANK, truth=truth, fits={"posterior": nuts}, level=0.9)
    # Every column of a study's CSV, the five a reader looks at first (what the table prints).
    assert sorted(table.columns) == sorted(COLUMNS)
    assert list(table.columns[:5]) == ["method", "suboptimality", "pessimistic_value", "covered",
                                       "value_covered"]
    posterior = table[(table.fit == "posterior") & (table.set_kind != "none")]
    assert set(zip(posterior.set_kind, posterior.objective, strict=True)) == {
        ("credible", "relaxed"), ("credible", "exact"), ("sandwich", "exact"), ("draws", "relaxed"),
        ("draws", "exact"), ("quantile", "relaxed"), ("cvar", "exact")}
    assert {"PRS", "PRS-exact-Wald", "PRS-relaxed-Wald", "LowRank-Greedy", "Posterior-mean-Greedy"} <= set(
        table.method)
    assert (table.suboptimality >= -1e-9).all()
    sets = table.set_kind.isin(["gram", "wald", "credible", "sandwich", "draws"])
    assert table.loc[sets, "covered"].isin([0, 1]).all()
    assert table.loc[table.set_kind.isin(["quantile", "cvar"]), "covered"].isna().all()
    # Every pessimistic policy says whether its true value cleared its pessimistic value; greedy ones do not.
    assert table.loc[table.set_kind != "none", "value_covered"].isin([0, 1]).all()
    assert table.loc[table.set_kind == "none", "value_covered"].isna().all()
    calibrated = table.set_kind.isin(["wald", "credible", "sandwich", "draws", "quantile", "cvar"])
    assert (table.level[calibrated] == 0.9).all()
    assert table.level[table.set_kind == "gram"].isna().all()
    # The posterior passed in serves every posterior method: its diagnostics on each of their rows.
    assert (table.loc[table.fit == "posterior", "max_rhat"] == nuts.diagnostics.max_rhat).all()
    blind = compare_policies(data, pop, rank=RANK, fits={"posterior": nuts},
                             methods=("PRS-exact-Gram", "PRS-exact-Wald", "Posterior-exact-ellipsoid"))
    assert blind.suboptimality.isna().all() and len(blind) == 3
    assert blind.covered.isna().all() and blind.truth_distance.isna().all()
    assert np.isfinite(blind.pessimistic_value).all()
    with pytest.raises(ValueError, match="methods"):
        compare_policies(data, pop, rank=RANK, fits={"posterior": nuts}, methods=("Posterior-exact-box",))
    with pytest.raises(ValueError, match="truth"):
        compare_policies(data, pop, rank=RANK, fits={"posterior": nuts}, truth=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="fits"):
        compare_policies(data, pop, rank=RANK + 1, fits={"posterior": nuts})


def test_compare_policies_is_the_studies_harness(bayes_problem):
    """Frequentist methods only (no posterior fitted): the rows of run_methods, as a table."""
    truth, data, _ = bayes_problem
    pop = truth.population(60, seed=6)
    methods = ["MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald", "PRS-GIC"]
    table = compare_policies(data, pop, rank=RANK, truth=truth, methods=methods, ridge=1.0)
    rows = run_methods(truth, data, {"personalised": pop}, methods, rank=RANK, ridge=1.0)
    numeric = ["suboptimality", "pessimistic_value", "covered", "truth_distance", "radius", "theta_error"]
    assert np.array_equal(table[numeric].to_numpy(float),
                          np.array([[r[c] for c in numeric] for r in rows], dtype=float), equal_nan=True)
    assert list(table.method) == methods and set(table.method) <= set(METHODS)
    assert table.max_rhat.isna().all() and table.divergences.isna().all()
    with pytest.raises(ValueError, match="scope"):
        compare_policies(data, pop, rank=RANK, methods=methods, scope="everyone")
    with pytest.raises(ValueError, match="level"):
        compare_policies(data, pop, rank=RANK, methods=methods, level=1.5)
    with pytest.raises(TypeError, match="population"):
        compare_policies(data, data, rank=RANK, methods=methods)


def test_value_columns_match_a_direct_computation():
    """value_covered: the policy's true value relative to the reference action against its pessimistic value;
    c_star: ‖m(π*)‖_{W⁻¹} of the optimal global policy; a value-sized set's radius is the one
    size_for_values gives, and its θ-coverage is not claimed."""
    import bayes_loco as bl
    from bayes_loco.evaluate import policy_value
    from bayes_loco.policy import candidate_features

    truth = bl.simulate.paper_problem(d_s=3, d_a=5, d_x=4, rank=2, imbalance=3, seed=0)
    data = truth.sample(1500, seed=1)
    pop = truth.population(30, seed=2, contexts_per_state=5, context_law="target")
    prs = bl.fit_prs(data, 2, ridge=1.0)
    rows = {r["method"]: r for r in run_methods(truth, data, {"global": pop}, ["PRS-exact-Wald",
                                                "PRS-exact-Wald-values", "MLE-Greedy"], rank=2, ridge=1.0,
                                                fits={"prs": prs})}
    wald = prs.calibrated_set(0.9, "wald")
    sized = bl.sets.size_for_values(wald, pop, scope="global")
    assert rows["PRS-exact-Wald-values"]["radius"] == pytest.approx(sized.radius)
    assert rows["PRS-exact-Wald-values"]["radius"] < rows["PRS-exact-Wald"]["radius"]
    assert np.isnan(rows["PRS-exact-Wald-values"]["covered"])
    reference = bl.Policy(np.eye(pop.n_actions)[np.zeros(pop.n_states, int)], np.arange(pop.n) // 5,
                          "global", "greedy", 0, np.nan, np.nan)
    for name, uset in (("PRS-exact-Wald", wald), ("PRS-exact-Wald-values", sized)):
        policy = bl.pessimistic_policy(uset, pop, objective="exact", scope="global")
        gain = policy_value(policy, truth, pop) - policy_value(reference, truth, pop)
        assert rows[name]["value_covered"] == float(gain >= policy.pessimistic_value)
        assert rows[name]["pessimistic_value"] == pytest.approx(policy.pessimistic_value)
    units = pop.units("global")
    r = units.mean(truth.rewards(pop))
    z = units.mean(candidate_features(wald, pop))
    m_star = units.weights @ z[np.arange(units.n), r.argmax(axis=1)]
    assert rows["PRS-exact-Wald"]["c_star"] == pytest.approx(float(wald.dual_norm(m_star)))
    assert np.isnan(rows["MLE-Greedy"]["value_covered"]) and np.isnan(rows["MLE-Greedy"]["c_star"])
