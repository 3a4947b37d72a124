"""The set protocol: a set kind defined here plugs into the exact objective without touching the solver.

Oracles: cvxpy + Clarabel for min_{θ ∈ box} V(θ) (epigraph form) and for the
policy-space problem max_π min_{θ ∈ box} θᵀm(π); the AST of policy.py for what
it imports.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

import bayes_loco as bl
import bayes_loco.policy
from bayes_loco import ConvexSet, ExactProblem, Population, VecCoordinates, pessimistic_policy
from bayes_loco.policy import candidate_features

CLARABEL = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


@dataclass(frozen=True, eq=False)
class BoxSet:
    """{θ : lo ≤ θ ≤ hi}, a convex set the package does not know."""

    lo: np.ndarray
    hi: np.ndarray
    coordinates: object
    kind: str = "box"

    def lower_bound(self, z):
        return np.minimum(z * self.lo, z * self.hi).sum(axis=-1)

    def solve_exact(self, problem: ExactProblem):
        """Epigraph LP min Σ w t s.t. t_u ≥ θᵀz_ua, lo ≤ θ ≤ hi; the t-rows' duals are the policy."""
        z, w = problem.features, problem.weights
        n_units, n_actions, k = z.shape
        rows = np.repeat(np.arange(n_units), n_actions)
        t_part = sparse.csr_array((-np.ones(rows.size), (np.arange(rows.size), rows)),
                                  shape=(rows.size, n_units))
        a_ub = sparse.hstack([t_part, sparse.csr_array(z.reshape(-1, k))], format="csc")
        bounds = [(None, None)] * n_units + list(zip(self.lo, self.hi, strict=True))
        res = linprog(np.concatenate([w, np.zeros(k)]), A_ub=a_ub, b_ub=np.zeros(rows.size), bounds=bounds,
                      method="highs")
        probs = np.maximum(-res.ineqlin.marginals, 0.0).reshape(n_units, n_actions)
        probs /= probs.sum(axis=1, keepdims=True)
        return problem.solution(self, res.x[n_units:], probs, center=0.5 * (self.lo + self.hi),
                                failure="the box LP")


def box_instance(seed, scope):
    rng = np.random.default_rng(seed)
    d_x, d_phi, n_actions, n_units = 2, 3, 4, 8
    states = np.arange(n_units) if scope == "personalised" else np.repeat(np.arange(n_units // 2), 2)
    phi_state = rng.normal(size=(n_units, n_actions, d_phi))
    pop = Population(rng.normal(size=(n_units, d_x)), phi_state[states] if scope == "global" else phi_state,
                     states)
    center = rng.normal(scale=0.5, size=d_x * d_phi)
    half = rng.uniform(0.1, 0.8, size=d_x * d_phi)
    return pop, BoxSet(center - half, center + half, VecCoordinates(d_x, d_phi))


def unit_features(pop, box, scope):
    z = candidate_features(box, pop)
    if scope == "personalised":
        return z, np.full(pop.n, 1.0 / pop.n)
    labels = np.unique(pop.states)
    return (np.stack([z[pop.states == s].mean(axis=0) for s in labels]),
            np.array([np.mean(pop.states == s) for s in labels]))


@pytest.mark.parametrize("scope", ["personalised", "global"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_new_convex_set_solves_the_exact_objective(seed, scope):
    pop, box = box_instance(seed, scope)
    assert isinstance(box, ConvexSet)
    policy = pessimistic_policy(box, pop, objective="exact", scope=scope, tol=1e-7)
    # certified to 1e-7 relative, or absolutely where the optimum is 0 (the reference action is best)
    assert policy.status is bl.PolicyStatus.SOLVED
    assert policy.certificate.gap <= 1e-7 * max(1.0, policy.certificate.upper)
    zu, w = unit_features(pop, box, scope)
    # Oracle 1: min over the box of V(θ) in epigraph form.
    theta, t = cp.Variable(box.lo.size), cp.Variable(zu.shape[0])
    cons = [theta >= box.lo, theta <= box.hi] + [t >= zu[:, a, :] @ theta for a in range(zu.shape[1])]
    dual = cp.Problem(cp.Minimize(w @ t), cons)
    dual.solve(solver=cp.CLARABEL, **CLARABEL)
    # Oracle 2: the best policy's worst case over the box, Σ_k min(lo_k m_k, hi_k m_k), over stochastic π.
    pi = cp.Variable(zu.shape[:2], nonneg=True)
    m = sum(zu[:, a, :].T @ cp.multiply(w, pi[:, a]) for a in range(zu.shape[1]))
    primal = cp.Problem(cp.Maximize(cp.sum(cp.minimum(cp.multiply(box.lo, m), cp.multiply(box.hi, m)))),
                        [cp.sum(pi, axis=1) == 1])
    primal.solve(solver=cp.CLARABEL, **CLARABEL)
    assert dual.status == primal.status == cp.OPTIMAL
    assert primal.value == pytest.approx(dual.value, abs=1e-7)  # minimax duality, checked independently
    assert policy.pessimistic_value == pytest.approx(primal.value, abs=1e-6)
    assert policy.certificate.upper == pytest.approx(dual.value, abs=1e-6)
    assert np.all(policy.theta >= box.lo - 1e-9) and np.all(policy.theta <= box.hi + 1e-9)
    m_pi = np.einsum("u,ua,uak->k", w, policy.probabilities, zu)
    assert policy.pessimistic_value == pytest.approx(float(box.lower_bound(m_pi)), abs=1e-12)


def test_exact_problem_labels_an_uncertified_candidate():
    pop, box = box_instance(3, "personalised")
    zu, w = unit_features(pop, box, "personalised")
    problem = ExactProblem(zu, w, tol=1e-6)
    reference = np.zeros(zu.shape[:2])
    reference[:, 0] = 1.0  # always the reference action: worst case exactly 0
    solution = problem.solution(box, box.hi, reference, failure="a poor guess")
    assert solution.status is bl.PolicyStatus.GAP_NOT_REACHED
    assert solution.certificate.lower == 0.0
    assert solution.certificate.upper == pytest.approx(problem.value(box.hi))
    assert solution.message.startswith("a poor guess reached a relative gap")


def test_the_solver_imports_no_concrete_set_class():
    tree = ast.parse(inspect.getsource(bayes_loco.policy))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for concrete in ("EllipsoidSet", "DrawsSet", "QuantileSet", "wald_set"):
        assert concrete not in imported and concrete not in names
    sources = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "sets.base" in sources and not {"sets", "sets.ellipsoid", "sets.hull", "sets.quantile"} & sources


def test_exact_nash_needs_a_set_with_a_nash_program():
    pop, box = box_instance(4, "personalised")
    with pytest.raises(TypeError, match="solve_nash"):
        pessimistic_policy(box, pop, objective="exact", welfare="nash")
    nash = pessimistic_policy(box, pop, objective="relaxed", welfare="nash")
    assert nash.objective == "relaxed" and nash.welfare == "nash"


def test_population_on_other_features_than_the_set_is_named():
    pop, box = box_instance(5, "personalised")
    wide = Population(pop.contexts, np.concatenate([pop.features, pop.features[..., :1]], axis=-1),
                      pop.states)
    for objective in ("relaxed", "exact"):
        with pytest.raises(ValueError, match=r"population has \(d_x, d_phi\) = \(2, 4\).*\(2, 3\)"):
            pessimistic_policy(box, wide, objective=objective)
    with pytest.raises(ValueError, match=r"population has \(d_x, d_phi\) = \(2, 4\)"):
        bl.pessimistic_value(box, wide, np.full((wide.n, 4), 0.25))


def test_exact_nash_is_refused_for_an_ellipsoid():
    pop, box = box_instance(6, "personalised")
    k = box.lo.size
    ellipsoid = bl.EllipsoidSet(0.5 * (box.lo + box.hi), np.eye(k), 0.3, box.coordinates)
    with pytest.raises(TypeError, match="EllipsoidSet has none"):
        pessimistic_policy(ellipsoid, pop, objective="exact", welfare="nash")


def test_population_units_average_rows_by_state():
    rng = np.random.default_rng(7)
    states = np.array([2, 0, 2, 1, 0, 2])
    pop = Population(rng.normal(size=(6, 2)), rng.normal(size=(6, 3, 2)), states)
    units = pop.units("global")
    np.testing.assert_array_equal(units.of_row, [2, 0, 2, 1, 0, 2])
    np.testing.assert_allclose(units.weights, [2 / 6, 1 / 6, 3 / 6])
    values = rng.normal(size=(6, 3))
    expected = np.stack([values[states == s].mean(axis=0) for s in range(3)])
    np.testing.assert_allclose(units.mean(values), expected, rtol=1e-12)
    personal = pop.units("personalised")
    assert personal.n == 6
    np.testing.assert_allclose(personal.mean(values), values)
    assert personal.mean(values) is values  # one row per unit: no copy of the features
    with pytest.raises(ValueError, match="scope"):
        pop.units("local")


def test_coordinates_are_checked_against_the_data():
    from bayes_loco.coordinates import check_coordinates

    assert check_coordinates(VecCoordinates(2, 3), 2, 3, "basis").dim == 6
    with pytest.raises(TypeError, match="basis must be a Coordinates object"):
        check_coordinates(np.eye(3), 2, 3, "basis")
    with pytest.raises(ValueError, match=r"basis live on \(d_x, d_phi\) = \(2, 3\), but the data have"):
        check_coordinates(VecCoordinates(2, 3), 2, 4, "basis")
