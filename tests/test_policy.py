"""The pessimistic policy solver against independent oracles.

Oracles, none of which calls the code under test for the quantity it checks:

* the policy-space SOCP  max_π θ̂ᵀm(π) − R‖m(π)‖_{W⁺}  (π rows on the simplex)
  and the epigraph form of  min_{θ ∈ set} V(θ), both solved by cvxpy + Clarabel;
* z built from the raw population with explicit outer products, and unit
  averages built with explicit loops over groups;
* ‖m‖_{W⁺} as ‖B⁺ m‖ for W = B Bᵀ (scipy's pseudo-inverse of a square-root
  factor the test built itself, or of the raw design matrix of a PRS fit);
* brute-force enumeration of deterministic policies.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import pytest
from scipy import linalg
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import (
    Certificate,
    ConvergenceWarning,
    EllipsoidSet,
    Policy,
    PolicyStatus,
    Population,
    VecCoordinates,
    greedy_policy,
    pessimistic_policy,
    pessimistic_value,
)
from bayes_loco.policy import candidate_features

try:  # OpenBLAS threads spinning against other processes made the paper smoke test 10x slower
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None


def single_blas_thread():
    return contextlib.nullcontext() if threadpool_limits is None else threadpool_limits(limits=1)


CLARABEL = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
SCOPES = ("personalised", "global")


# ============================================================================ instances


@dataclass(frozen=True, eq=False)
class Instance:
    """An ellipsoid with W = B Bᵀ, a population and a scope."""

    eset: EllipsoidSet
    pop: Population
    b: np.ndarray
    scope: str
    full_rank: bool


def random_population(rng, n_units, n_actions, d_x, d_phi, scope, *, shared_last=False):
    """Random population; for ``scope="global"`` rows of a group share φ (one state each).

    ``shared_last``: actions 0..A−2 share the last feature within a row, action A−1
    does not, so only A−1's differences reach the last feature.
    """
    if scope == "personalised":
        groups = np.arange(n_units)
    else:  # unequal group sizes, every group non-empty
        sizes = rng.integers(1, 4, size=n_units)
        groups = np.repeat(np.arange(n_units), sizes)
        groups = groups[rng.permutation(groups.size)]
    n = groups.size
    phi_state = rng.normal(size=(n_units, n_actions, d_phi))
    if shared_last:
        phi_state[:, :-1, -1] = phi_state[:, :1, -1]
    phi = phi_state[groups] if scope == "global" else phi_state
    x = rng.normal(size=(n, d_x))
    return Population(x, phi, groups)


def random_instance(seed, scope, kind, radius_scale=1.0, d_x=2, d_phi=3, n_actions=3, n_units=6):
    """A random ellipsoid in vec coordinates with ``kind`` "full" or "singular" W."""
    rng = np.random.default_rng(seed)
    k = d_x * d_phi
    coords = VecCoordinates(d_x, d_phi)
    if kind == "full":
        b = np.hstack([rng.normal(size=(k, k)), 0.3 * np.eye(k)])
        pop = random_population(rng, n_units, n_actions, d_x, d_phi, scope)
    else:  # no comparison reaches the last feature: rows (p, q = d_φ−1) of B are zero
        b = np.zeros((k, k))
        reached = np.array([q < d_phi - 1 for p in range(d_x) for q in range(d_phi)])
        b[reached] = rng.normal(size=(int(reached.sum()), k))
        pop = random_population(rng, n_units, n_actions, d_x, d_phi, scope, shared_last=True)
    center = rng.normal(size=k)
    radius = radius_scale * float(rng.uniform(0.3, 1.0))
    eset = EllipsoidSet(center, b @ b.T, radius, coords)
    return Instance(eset, pop, b, scope, kind == "full")


@functools.cache
def small_prs_fit():
    """A PRS fit on a tiny version of the paper's simulation (k = 5, W singular)."""
    problem = bl.simulate.paper_problem(d_s=2, d_a=3, d_x=2, rank=1, imbalance=1.0, seed=0)
    data = problem.sample(400, seed=1)
    return problem, data, bl.fit_prs(data, rank=1)


def prs_instance(scope, which):
    problem, data, fit = small_prs_fit()
    design = fit.basis.transform(data.contexts, data.differences)  # z_t of every comparison
    if which == "gram":
        eset = fit.penalty_set()
        b = design.T  # W = Σ z zᵀ = Zᵀ Z
    else:
        eset = fit.calibrated_set(0.9)
        b = (np.sqrt(expit(design @ fit.theta_rtv) * expit(-(design @ fit.theta_rtv)))[:, None] * design).T
    if scope == "personalised":
        pop = problem.population(8, seed=2)
    else:
        pop = problem.population(5, seed=2, contexts_per_state=3, context_law="shifted")
    return Instance(eset, pop, b, scope, False)


# ============================================================================ oracles


def raw_z(pop, coordinates, reference_action):
    """z_ia from the raw population: explicit outer products for vec coordinates."""
    n, n_actions, _ = pop.features.shape
    out = np.empty((n, n_actions, coordinates.dim))
    for i in range(n):
        for a in range(n_actions):
            diff = pop.features[i, a] - pop.features[i, reference_action]
            if isinstance(coordinates, VecCoordinates):
                out[i, a] = np.outer(pop.contexts[i], diff).ravel()
            else:
                out[i, a] = coordinates.transform(pop.contexts[i:i + 1], diff[None])[0]
    return out


def unit_features(pop, coordinates, scope, reference_action=0):
    """Unit-averaged z (U, A, k) and unit weights (U,), by explicit loops over groups."""
    z = raw_z(pop, coordinates, reference_action)
    if scope == "personalised":
        return z, np.full(pop.n, 1.0 / pop.n)
    labels = sorted(set(pop.states.tolist()))
    zu = np.stack([z[pop.states == g].mean(axis=0) for g in labels])
    weights = np.array([np.sum(pop.states == g) for g in labels]) / pop.n
    return zu, weights


def in_range(b, zu):
    """Candidates whose z lies in range(W = B Bᵀ) (an orthonormal basis from scipy.linalg.orth)."""
    q = linalg.orth(b)
    resid = np.linalg.norm(zu - (zu @ q) @ q.T, axis=-1)
    return resid <= 1e-8 * np.maximum(np.linalg.norm(zu, axis=-1), 1.0)


def oracle_pessimistic_value(inst, zu, weights, allowed, probs):
    """θ̂ᵀm − R‖B⁺m‖, −inf if π puts mass on a candidate outside range(W)."""
    if np.any(probs[~allowed] > 0):
        return -np.inf
    m = np.einsum("u,ua,uak->k", weights, probs, zu)
    return float(inst.eset.center @ m - inst.eset.radius * np.linalg.norm(linalg.pinv(inst.b) @ m))


def oracle_policy_space(inst, zu, weights, allowed):
    """max over stochastic π of θ̂ᵀm(π) − R‖B⁺ m(π)‖ (the policy-space SOCP)."""
    n_units, n_actions, _ = zu.shape
    pi = cp.Variable((n_units, n_actions), nonneg=True)
    m = sum(zu[:, a, :].T @ cp.multiply(weights, pi[:, a]) for a in range(n_actions))
    bp = linalg.pinv(inst.b)
    cons = [cp.sum(pi, axis=1) == 1]
    if (~allowed).any():
        cons.append(cp.multiply(pi, (~allowed).astype(float)) == 0)
    prob = cp.Problem(cp.Maximize(inst.eset.center @ m - inst.eset.radius * cp.norm(bp @ m)), cons)
    prob.solve(solver=cp.CLARABEL, **CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return float(prob.value), pi.value


def oracle_epigraph(inst, zu, weights, allowed):
    """min Σ w_u t_u s.t. t_u ≥ θᵀz_ua (identified candidates), θ in the set (restricted to range W)."""
    center, radius = inst.eset.center, inst.eset.radius
    t = cp.Variable(zu.shape[0])
    if inst.full_rank:
        theta = cp.Variable(center.shape[0])
        in_set = cp.quad_form(theta - center, inst.b @ inst.b.T) <= radius**2
    else:
        q = linalg.orth(inst.b)
        v = cp.Variable(q.shape[1])
        theta = center + q @ v
        in_set = cp.norm(inst.b.T @ (q @ v)) <= radius
    cons = [in_set]
    for a in range(zu.shape[1]):
        rows = np.flatnonzero(allowed[:, a])
        cons.append(t[rows] >= zu[rows, a, :] @ theta)
    prob = cp.Problem(cp.Minimize(weights @ t), cons)
    prob.solve(solver=cp.CLARABEL, **CLARABEL)
    assert prob.status == cp.OPTIMAL, prob.status
    return float(prob.value)


def oracle_v(theta, zu, weights, allowed):
    """V(θ) = Σ_u w_u max_{identified a} θᵀ z_ua."""
    scores = np.where(allowed, zu @ theta, -np.inf)
    return float(weights @ scores.max(axis=1))


def oracle_lower_bounds(inst, z):
    """θ̂ᵀz − R‖B⁺z‖ per candidate, −inf outside range(W)."""
    bp = linalg.pinv(inst.b)
    lb = z @ inst.eset.center - inst.eset.radius * np.linalg.norm(z @ bp.T, axis=-1)
    return np.where(in_range(inst.b, z), lb, -np.inf)


def exact(inst, **kw):
    return pessimistic_policy(inst.eset, inst.pop, objective="exact", scope=inst.scope, **kw)


def relaxed(inst, **kw):
    return pessimistic_policy(inst.eset, inst.pop, objective="relaxed", scope=inst.scope, **kw)


INSTANCES = [pytest.param(("random", seed, scope, kind), id=f"{kind}-{scope}-{seed}")
             for kind in ("full", "singular") for scope in SCOPES for seed in (0, 1, 2)]
INSTANCES += [pytest.param(("prs", which, scope), id=f"prs-{which}-{scope}")
              for which in ("gram", "wald") for scope in SCOPES]


def build(spec):
    return random_instance(*spec[1:]) if spec[0] == "random" else prs_instance(spec[2], spec[1])


def scale_of(inst, zu):
    """Magnitude of the values at play: max over candidates of |θ̂ᵀz| + R‖z‖_{W⁺}."""
    bp = linalg.pinv(inst.b)
    widths = inst.eset.radius * np.linalg.norm(zu @ bp.T, axis=-1)
    return float(np.max(np.abs(zu @ inst.eset.center) + widths))


# ============================================================================ candidate features


@pytest.mark.parametrize("reference_action", [0, 2])
@pytest.mark.parametrize("scope", SCOPES)
def test_candidate_features_match_raw_population(reference_action, scope):
    inst = random_instance(7, scope, "full")
    z = candidate_features(inst.eset, inst.pop, reference_action)
    expected = raw_z(inst.pop, inst.eset.coordinates, reference_action)
    np.testing.assert_allclose(z, expected, rtol=0, atol=1e-14)
    assert np.all(z[:, reference_action, :] == 0.0)
    # the reference action's worst case is exactly 0 under every set
    assert np.all(inst.eset.lower_bound(z[:, reference_action, :]) == 0.0)


@pytest.mark.parametrize("scope", SCOPES)
def test_features_made_a_block_at_a_time_give_the_same_problem(scope, monkeypatch):
    """With ``config["feature_block_bytes"]`` forcing one unit per block, the exact problem over an ellipsoid
    gets its features as FeatureBlocks whose blocks are the whole array's rows (the units' means), and the
    exact policy, its certificate, its rounding and the pessimistic value of a policy are those of the whole
    array; a set that needs the features whole (the hull) is never handed blocks and refuses them."""
    from bayes_loco import policy as policy_module

    inst = random_instance(9, scope, "full")
    units = inst.pop.units(scope)
    whole = policy_module._exact_problem(inst.eset, inst.pop, units, 0)
    policies = {"whole": exact(inst)}
    bl.set_config(feature_block_bytes=1)
    blocked = policy_module._exact_problem(inst.eset, inst.pop, units, 0)
    assert isinstance(blocked.features, bl.FeatureBlocks) and blocked.features.units_per_block == 1
    assert [hi - lo for lo, hi, _ in blocked.blocks()] == [1] * units.n
    np.testing.assert_allclose(np.concatenate([z for _, _, z in blocked.blocks()]), whole.features,
                               rtol=0, atol=1e-14)
    policies["blocks"] = exact(inst)
    for name in ("pessimistic_value", "rounded_value"):
        assert getattr(policies["blocks"], name) == pytest.approx(getattr(policies["whole"], name), rel=1e-12)
    np.testing.assert_allclose(policies["blocks"].probabilities, policies["whole"].probabilities, atol=1e-12)
    probs = np.full((units.n, inst.pop.n_actions), 1.0 / inst.pop.n_actions)
    assert bl.pessimistic_value(inst.eset, inst.pop, probs, scope=scope) == pytest.approx(
        whole.worst_case(inst.eset, probs), rel=1e-12)
    hull = bl.DrawsSet(inst.eset.center + 0.1 * np.random.default_rng(3).normal(size=(8, 6)),
                       inst.eset.coordinates)
    assert isinstance(policy_module._exact_problem(hull, inst.pop, units, 0).features, np.ndarray)
    with pytest.raises(TypeError, match="the hull's LP needs the candidate features in memory"):
        hull.solve_exact(blocked)


# ============================================================================ exact vs the conic oracle


@pytest.mark.parametrize("solver", ["newton", "accelerated", "blocks"])
@pytest.mark.parametrize("spec", INSTANCES)
def test_exact_matches_policy_space_socp(spec, solver, monkeypatch):
    """The Must-show: certificate bounds and pessimistic value equal the policy-space SOCP's optimum.

    ``accelerated``: the solver of large sets (k_eff > ``config["newton_max"]``), forced here with no Newton
    fallback and with W factorised by pivoted Cholesky (whitening by triangular solves, L never formed).
    ``blocks``: the LLM-width memory paths, forced: candidate features made one unit at a time
    (FeatureBlocks) and the PRS Wald set holding only W's factor (EllipsoidSet.factored).
    """

    if solver == "accelerated":
        bl.set_config(newton_max=0, newton_fallback_max=0)
        bl.set_config(cholesky_min=1)
    if solver == "blocks":
        bl.set_config(feature_block_bytes=1)
        bl.set_config(factored_min=1)
    inst = build(spec)
    if solver == "blocks" and spec[0] == "prs" and spec[1] == "wald":
        assert inst.eset.precision is None
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, inst.scope)
    allowed = in_range(inst.b, zu)
    opt, _ = oracle_policy_space(inst, zu, weights, allowed)
    s = max(1.0, abs(opt))
    tol = 1e-7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = exact(inst, tol=tol)
    cert = policy.certificate
    assert opt > 1e-3  # a non-degenerate instance: pessimism binds but the reference is not optimal
    # the certificate brackets the true optimum (up to the oracle's own accuracy) ...
    assert cert.lower <= opt + 1e-8 * s
    assert cert.upper >= opt - 1e-8 * s
    # ... and both ends are within 1e-6 of it
    assert cert.lower == pytest.approx(opt, abs=1e-6 * s)
    assert cert.upper == pytest.approx(opt, abs=1e-6 * s)
    assert policy.pessimistic_value == cert.lower
    assert policy.objective_value == cert.lower
    assert ("accelerated" in policy.message) == (solver == "accelerated")
    # the status tells the truth about the gap, and a missed gap warns
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    if policy.status is PolicyStatus.SOLVED:
        assert cert.relative_gap <= tol or cert.gap <= 1e-10 * s
        assert not warned
    else:
        assert cert.relative_gap > tol
        assert warned
    # the returned policy is a stochastic policy on identified candidates ...
    probs = policy.probabilities
    assert probs.shape == zu.shape[:2]
    assert np.all(probs >= -1e-12)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(probs[~allowed] <= 1e-12)
    # ... whose independently computed pessimistic value is the reported one
    independent = oracle_pessimistic_value(inst, zu, weights, allowed, np.where(allowed, probs, 0.0))
    assert independent == pytest.approx(policy.pessimistic_value, abs=1e-9 * s)
    # θ lies in the set and V(θ), computed here, is the upper bound
    assert inst.eset.contains(policy.theta)
    assert oracle_v(policy.theta, zu, weights, allowed) == pytest.approx(cert.upper, abs=1e-9 * s)
    # rounding: the deterministic policy's value, computed here, is no better than the optimum
    rounded = np.eye(zu.shape[1])[probs.argmax(axis=1)]
    assert policy.rounded_value == pytest.approx(
        oracle_pessimistic_value(inst, zu, weights, allowed, rounded), abs=1e-9 * s)
    assert policy.rounded_value <= opt + 1e-8 * s


@pytest.mark.filterwarnings("ignore::bayes_loco.ConvergenceWarning")
@pytest.mark.parametrize("spec", INSTANCES)
def test_exact_value_is_min_over_set_of_v_epigraph(spec):
    """Minimax duality, checked with an independent epigraph solve of min_{θ ∈ set} V(θ)."""
    inst = build(spec)
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, inst.scope)
    allowed = in_range(inst.b, zu)
    epigraph = oracle_epigraph(inst, zu, weights, allowed)
    s = max(1.0, abs(epigraph))
    policy = exact(inst, tol=1e-7)
    assert policy.pessimistic_value == pytest.approx(epigraph, abs=1e-6 * s)
    assert policy.certificate.upper == pytest.approx(epigraph, abs=1e-6 * s)
    assert policy.certificate.upper >= epigraph - 1e-8 * s  # V at a member of the set bounds the minimum


@pytest.mark.parametrize("spec", INSTANCES)
def test_exact_certificate_closes_at_1e_6(spec):
    policy = exact(build(spec), tol=1e-6)
    assert policy.status is PolicyStatus.SOLVED
    assert policy.certificate.relative_gap <= 1e-6 or policy.certificate.gap <= 1e-10
    assert "certified" in policy.message


def test_exact_below_its_accuracy_floor_warns_and_stays_feasible():
    """The smoothing solver certifies to ~1e-7 relative; a tighter tol must say so, not hang or lie."""
    spec = INSTANCES[0].values[0]
    with pytest.warns(ConvergenceWarning, match="relative gap"):
        policy = exact(build(spec), tol=1e-13)
    assert policy.status is PolicyStatus.GAP_NOT_REACHED
    assert policy.certificate.lower <= policy.certificate.upper + 1e-12
    assert policy.certificate.relative_gap <= 1e-6


@pytest.mark.parametrize("scope", SCOPES)
def test_exact_with_another_reference_matches_oracle(scope):
    inst = random_instance(11, scope, "full")
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, scope, reference_action=2)
    allowed = in_range(inst.b, zu)
    opt, _ = oracle_policy_space(inst, zu, weights, allowed)
    policy = exact(inst, tol=1e-7, reference_action=2)
    assert policy.reference_action == 2
    assert opt > 1e-3
    assert policy.pessimistic_value == pytest.approx(opt, abs=1e-6 * max(1.0, opt))
    assert policy.certificate.upper >= opt - 1e-8


@pytest.mark.parametrize("scope", SCOPES)
def test_exact_upper_bound_beats_every_deterministic_policy(scope):
    """Brute force over all A^U deterministic policies: none exceeds the certified upper bound."""
    inst = random_instance(12, scope, "full", n_units=5)
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, scope)
    allowed = in_range(inst.b, zu)
    policy = exact(inst, tol=1e-7)
    eye = np.eye(zu.shape[1])
    best = max(oracle_pessimistic_value(inst, zu, weights, allowed, eye[list(choice)])
               for choice in itertools.product(range(zu.shape[1]), repeat=zu.shape[0]))
    assert best <= policy.certificate.upper + 1e-9
    assert policy.rounded_value <= best + 1e-9
    # the stochastic optimum is at least as good as the best deterministic one
    assert policy.pessimistic_value >= best - 1e-6


def test_degenerate_instance_has_reference_as_optimum():
    """Precondition of the next test: with a huge set, always playing the reference is optimal (value 0)."""
    inst = random_instance(3, "personalised", "full", radius_scale=20)
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, inst.scope)
    allowed = in_range(inst.b, zu)
    opt, _ = oracle_policy_space(inst, zu, weights, allowed)
    reference = np.eye(zu.shape[1])[np.zeros(zu.shape[0], dtype=int)]
    assert oracle_pessimistic_value(inst, zu, weights, allowed, reference) == 0.0
    assert abs(opt) <= 1e-8
    assert relaxed(inst).pessimistic_value == 0.0


@pytest.mark.parametrize("solver", ["newton", "accelerated"])
def test_exact_degenerate_instance_returns_a_certified_nonnegative_policy(solver, monkeypatch):
    """A set so wide that the reference action is optimal (value 0). The policy's ascent has no dual point
    for that optimum; with no Newton fallback the smoothed dual must certify it."""
    if solver == "accelerated":

        bl.set_config(newton_max=0)
        bl.set_config(newton_fallback_max=0)
    inst = random_instance(3, "personalised", "full", radius_scale=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        policy = exact(inst)
    assert policy.status is PolicyStatus.SOLVED
    assert ("accelerated" in policy.message) == (solver == "accelerated")
    assert policy.pessimistic_value >= -1e-12 * scale_of(inst, raw_z(inst.pop, inst.eset.coordinates, 0))
    # Closed against the floor (1% of the point values), not the value 0, and the message says which.
    assert policy.certificate.lower == 0.0 and policy.certificate.relative_gap > policy.certificate.gap > 0
    assert policy.message.startswith("certified: gap ") and "the optimum is near 0" in policy.message


# ============================================================================ exact vs relaxed: properties


def property_instance(seed):
    rng = np.random.default_rng(seed)
    scope = SCOPES[seed % 2]
    kind = ("full", "singular")[(seed // 2) % 2]
    return random_instance(seed, scope, kind, radius_scale=float(rng.uniform(0.3, 2.5)),
                           n_units=int(rng.integers(3, 9)))


@pytest.mark.parametrize("seed", range(100, 124))
def test_exact_dominates_relaxed(seed):
    inst = property_instance(seed)
    zu, weights = unit_features(inst.pop, inst.eset.coordinates, inst.scope)
    allowed = in_range(inst.b, zu)
    s = scale_of(inst, zu)
    tol = 1e-6
    ex = exact(inst, tol=tol)
    rx = relaxed(inst)
    cert = ex.certificate
    assert ex.status is PolicyStatus.SOLVED
    assert cert.lower <= cert.upper + 1e-14 * s  # up to rounding
    # no policy beats V at a member of the set; the exact policy is within its gap of the optimum
    assert rx.pessimistic_value <= cert.upper + 1e-9 * s
    assert ex.pessimistic_value >= rx.pessimistic_value - tol * abs(cert.upper) - 1e-9 * s
    # pointwise worst cases are more pessimistic than the policy's joint worst case
    assert rx.objective_value <= rx.pessimistic_value + 1e-12 * s
    # the reference is always available
    assert rx.pessimistic_value >= -1e-12 * s
    assert ex.pessimistic_value >= -1e-12 * s
    # random stochastic policies: the public pessimistic_value matches the oracle and never beats upper
    rng = np.random.default_rng(seed + 1000)
    for _ in range(5):
        probs = rng.dirichlet(np.ones(zu.shape[1]), size=zu.shape[0]) * allowed
        probs /= probs.sum(axis=1, keepdims=True)
        value = pessimistic_value(inst.eset, inst.pop, probs, scope=inst.scope)
        assert value == pytest.approx(oracle_pessimistic_value(inst, zu, weights, allowed, probs),
                                      abs=1e-10 * s)
        assert value <= cert.upper + 1e-9 * s


# ============================================================================ radius 0 is greedy


@pytest.mark.parametrize("objective", ["relaxed", "exact"])
@pytest.mark.parametrize("scope", SCOPES)
def test_radius_zero_gives_greedy(objective, scope):
    rng = np.random.default_rng(40)
    d_x, d_phi = 3, 4
    inst = random_instance(41, scope, "full", d_x=d_x, d_phi=d_phi, n_actions=4, n_units=8)
    theta_hat = rng.normal(size=(d_x, d_phi))
    eset = EllipsoidSet(theta_hat.ravel(), np.eye(d_x * d_phi), 0.0, VecCoordinates(d_x, d_phi))
    policy = pessimistic_policy(eset, inst.pop, objective=objective, scope=scope)
    greedy = greedy_policy(theta_hat, inst.pop, scope=scope)
    # the greedy choice, computed here from explicit rewards
    r = np.array([[inst.pop.contexts[i] @ theta_hat @ inst.pop.features[i, a] for a in range(4)]
                  for i in range(inst.pop.n)])
    if scope == "global":
        r = np.stack([r[inst.pop.states == g].mean(axis=0) for g in range(inst.pop.n_states)])
    assert np.unique(r.argmax(axis=1)).size > 1  # the instance is not trivial
    np.testing.assert_array_equal(greedy.probabilities.argmax(axis=1), r.argmax(axis=1))
    np.testing.assert_array_equal(policy.actions, greedy.actions)
    if objective == "relaxed":
        np.testing.assert_array_equal(policy.probabilities, greedy.probabilities)
    else:  # the smoothed solver leaves mass of order tol off the greedy action
        np.testing.assert_allclose(policy.probabilities, greedy.probabilities, atol=1e-4)
    # value relative to the reference: mean of max reward minus the reference's reward
    if scope == "global":
        weights = np.bincount(inst.pop.states) / inst.pop.n
    else:
        weights = np.full(inst.pop.n, 1 / inst.pop.n)
    expected = float(weights @ (r.max(axis=1) - r[:, 0]))
    assert policy.pessimistic_value == pytest.approx(expected, rel=1e-9 if objective == "relaxed" else 1e-4)
    assert policy.pessimistic_value <= expected + 1e-12
    assert greedy.objective_value == pytest.approx(float(weights @ r.max(axis=1)), rel=1e-12)


def test_greedy_policy_attributes():
    inst = random_instance(42, "global", "full")
    theta_hat = np.random.default_rng(43).normal(size=(2, 3))
    greedy = greedy_policy(theta_hat, inst.pop, scope="global")
    assert greedy.objective == "greedy"
    assert np.isnan(greedy.pessimistic_value)
    assert greedy.certificate is None and greedy.theta is None
    assert greedy.probabilities.shape == (inst.pop.n_states, 3)
    np.testing.assert_array_equal(greedy.row_probabilities, greedy.probabilities[inst.pop.states])
    assert greedy.n_mixed == 0


# ============================================================================ relaxed vs brute force


# seeds and radii picked so that the instances discriminate (asserted below)
@pytest.mark.parametrize(("kind", "seed", "radius_scale"), [("full", 52, 0.3), ("singular", 56, 0.3)])
@pytest.mark.parametrize("scope", SCOPES)
def test_relaxed_matches_brute_force(kind, seed, radius_scale, scope):
    inst = random_instance(seed, scope, kind, radius_scale=radius_scale, n_units=7)
    z = raw_z(inst.pop, inst.eset.coordinates, 0)
    lb = oracle_lower_bounds(inst, z)  # (n, A)
    if scope == "personalised":
        scores, weights = lb, np.full(inst.pop.n, 1 / inst.pop.n)
    else:  # mean over the group's rows of the rows' lower bounds
        scores = np.stack([lb[inst.pop.states == g].mean(axis=0) for g in range(inst.pop.n_states)])
        weights = np.bincount(inst.pop.states) / inst.pop.n
        # the lower bound of the group's mean z would choose differently somewhere
        zu, _ = unit_features(inst.pop, inst.eset.coordinates, scope)
        assert np.any(oracle_lower_bounds(inst, zu).argmax(axis=1) != scores.argmax(axis=1))
    assert np.unique(scores.argmax(axis=1)).size >= 2  # not all on the reference
    policy = relaxed(inst)
    if kind == "singular":
        assert np.all(np.isneginf(scores[:, -1]))  # unidentified action is never chosen
        assert not np.any(policy.probabilities[:, -1])
    np.testing.assert_array_equal(policy.probabilities.argmax(axis=1), scores.argmax(axis=1))
    assert set(np.unique(policy.probabilities)) <= {0.0, 1.0}
    assert policy.objective_value == pytest.approx(float(weights @ scores.max(axis=1)), rel=1e-9)
    zu, w = unit_features(inst.pop, inst.eset.coordinates, scope)
    assert policy.pessimistic_value == pytest.approx(
        oracle_pessimistic_value(inst, zu, w, in_range(inst.b, zu), policy.probabilities), rel=1e-9)
    assert policy.certificate is None and policy.theta is None and policy.rounded_value is None


class DrawsSet:
    """A non-ellipsoid set: the finite set of posterior-like draws θ_j (support = min over draws)."""

    def __init__(self, draws, coordinates):
        self.draws = draws
        self.coordinates = coordinates

    def lower_bound(self, z):
        return (z @ self.draws.T).min(axis=-1)


@pytest.mark.parametrize("scope", SCOPES)
def test_relaxed_with_a_custom_set(scope):
    inst = random_instance(51, scope, "full")
    rng = np.random.default_rng(52)
    draws = rng.normal(loc=0.5, size=(30, 6))
    dset = DrawsSet(draws, VecCoordinates(2, 3))
    policy = pessimistic_policy(dset, inst.pop, scope=scope)
    z = raw_z(inst.pop, dset.coordinates, 0)
    lb = np.array([[min(d @ z[i, a] for d in draws) for a in range(3)] for i in range(inst.pop.n)])
    if scope == "global":
        lb = np.stack([lb[inst.pop.states == g].mean(axis=0) for g in range(inst.pop.n_states)])
    np.testing.assert_array_equal(policy.probabilities.argmax(axis=1), lb.argmax(axis=1))
    zu, w = unit_features(inst.pop, dset.coordinates, scope)
    m = np.einsum("u,ua,uak->k", w, policy.probabilities, zu)
    assert policy.pessimistic_value == pytest.approx(float((draws @ m).min()), rel=1e-10)


# ============================================================================ reference action


def uncertain_action_instance():
    """Action 2 alone has the last feature, and W barely reaches it: action 2 is very uncertain."""
    rng = np.random.default_rng(60)
    d_x, d_phi, n = 2, 3, 10
    phi = rng.normal(size=(n, 3, d_phi))
    phi[:, :2, -1] = 0.0
    phi[:, 2, -1] = 1.0
    pop = Population(rng.normal(size=(n, d_x)), phi, np.arange(n) // 2)
    diag = np.array([1e-4 if q == d_phi - 1 else 1.0 for p in range(d_x) for q in range(d_phi)])
    eset = EllipsoidSet(rng.normal(size=d_x * d_phi), np.diag(diag), 0.5, VecCoordinates(d_x, d_phi))
    return eset, pop


@pytest.mark.parametrize("scope", SCOPES)
def test_reference_action_changes_the_pessimistic_choice(scope):
    eset, pop = uncertain_action_instance()
    ref0 = pessimistic_policy(eset, pop, scope=scope, reference_action=0)
    ref2 = pessimistic_policy(eset, pop, scope=scope, reference_action=2)
    # scored against a certain reference, the uncertain action is never chosen ...
    assert not np.any(ref0.actions == 2)
    # ... scored against the uncertain action, nothing else survives its width
    assert np.all(ref2.actions == 2)
    assert ref2.pessimistic_value == 0.0
    assert ref0.pessimistic_value > 0.0
    assert ref0.reference_action == 0 and ref2.reference_action == 2


@pytest.mark.parametrize("scope", SCOPES)
def test_pessimistic_value_depends_on_the_reference(scope):
    """min_θ θᵀ(m(π) − m(π_ref)), computed here with W⁻¹ explicitly, for each reference."""
    eset, pop = uncertain_action_instance()
    n_units = pop.n if scope == "personalised" else pop.n_states
    probs = np.random.default_rng(61).dirichlet(np.ones(3), size=n_units)
    winv = np.linalg.inv(eset.precision)
    values = []
    for ref in range(3):
        zu, w = unit_features(pop, eset.coordinates, scope, reference_action=ref)
        m = np.einsum("u,ua,uak->k", w, probs, zu)
        expected = eset.center @ m - eset.radius * np.sqrt(m @ winv @ m)
        got = pessimistic_value(eset, pop, probs, scope=scope, reference_action=ref)
        assert got == pytest.approx(expected, rel=1e-10)
        values.append(got)
        always_ref = np.eye(3)[np.full(n_units, ref)]
        assert pessimistic_value(eset, pop, always_ref, scope=scope, reference_action=ref) == 0.0
    # the width along the uncertain action enters with the mass on the other side of the reference
    assert abs(values[2] - values[0]) > 1.0


def reference_sweep(objective):
    for seed in (70, 71, 72):
        inst = random_instance(seed, SCOPES[seed % 2], "full", radius_scale=3.0)
        for reference_action in range(3):
            policy = pessimistic_policy(inst.eset, inst.pop, objective=objective, scope=inst.scope,
                                        reference_action=reference_action)
            zu, _ = unit_features(inst.pop, inst.eset.coordinates, inst.scope, reference_action)
            yield policy.pessimistic_value, scale_of(inst, zu)


def test_relaxed_policies_never_fall_below_the_reference():
    values = list(reference_sweep("relaxed"))
    assert all(v >= -1e-12 * s for v, s in values)
    assert any(v > 0.01 for v, _ in values)  # not all collapsed onto the reference


def test_exact_policies_never_fall_below_the_reference():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        values = list(reference_sweep("exact"))
    assert all(v >= -1e-12 * s for v, s in values)


# ============================================================================ Policy and Certificate


def test_certificate_gap_and_relative_gap():
    cert = Certificate(lower=1.0, upper=1.5)
    assert cert.gap == 0.5
    assert cert.relative_gap == pytest.approx(0.5 / 1.5, rel=1e-15)
    assert Certificate(-2.0, -1.0).relative_gap == pytest.approx(0.5, rel=1e-15)
    assert Certificate(0.0, 0.0).relative_gap == 0.0


def test_policy_rows_actions_and_mixed_count():
    probs = np.array([[1.0, 0.0, 0.0], [0.2, 0.7, 0.1], [0.0, 0.0, 1.0]])
    groups = np.array([2, 0, 1, 1, 2])
    policy = Policy(probs, groups, "global", "exact", 0, 0.1, 0.1)
    np.testing.assert_array_equal(policy.row_probabilities, probs[[2, 0, 1, 1, 2]])
    np.testing.assert_array_equal(policy.actions, [2, 0, 1, 1, 2])
    assert policy.n_mixed == 1
    assert "mixed=1" in repr(policy) and "global" in repr(policy)


def test_exact_policy_generalises_greedily_under_theta():
    """Where the exact policy is deterministic it is greedy under its minimising θ."""
    inst = build(INSTANCES[0].values[0])
    zu, _ = unit_features(inst.pop, inst.eset.coordinates, inst.scope)
    policy = exact(inst, tol=1e-7)
    pure = policy.probabilities.max(axis=1) > 1 - 1e-9
    assert pure.sum() >= zu.shape[0] - 2
    greedy_under_theta = (zu @ policy.theta).argmax(axis=1)
    np.testing.assert_array_equal(policy.probabilities[pure].argmax(axis=1), greedy_under_theta[pure])


# ============================================================================ bad input


@pytest.fixture(scope="module")
def small():
    return random_instance(80, "global", "full")


def test_bad_objective_and_scope(small):
    with pytest.raises(ValueError, match="objective"):
        pessimistic_policy(small.eset, small.pop, objective="pointwise")
    with pytest.raises(ValueError, match="scope"):
        pessimistic_policy(small.eset, small.pop, scope="personalized")
    with pytest.raises(ValueError, match="scope"):
        greedy_policy(np.zeros((2, 3)), small.pop, scope="local")
    n_units = small.pop.n_states
    with pytest.raises(ValueError, match="scope"):
        pessimistic_value(small.eset, small.pop, np.full((n_units, 3), 1 / 3), scope="both")


@pytest.mark.parametrize(("reference_action", "error"), [(3, ValueError), (-1, ValueError),
                                                         (1.0, TypeError), (True, TypeError)])
def test_bad_reference_action(small, reference_action, error):
    with pytest.raises(error, match="reference_action"):
        pessimistic_policy(small.eset, small.pop, reference_action=reference_action)
    with pytest.raises(error, match="reference_action"):
        pessimistic_value(small.eset, small.pop, np.full((small.pop.n_states, 3), 1 / 3),
                          scope="global", reference_action=reference_action)


def test_bad_population_and_set(small):
    with pytest.raises(TypeError, match="Population"):
        pessimistic_policy(small.eset, (small.pop.contexts, small.pop.features))
    with pytest.raises(TypeError, match="Population"):
        greedy_policy(np.zeros((2, 3)), {"contexts": small.pop.contexts})
    with pytest.raises(TypeError, match="lower_bound"):
        pessimistic_policy(np.eye(6), small.pop)


def test_exact_needs_an_ellipsoid(small):
    dset = DrawsSet(np.random.default_rng(81).normal(size=(5, 6)), VecCoordinates(2, 3))
    pessimistic_policy(dset, small.pop)  # relaxed works with any set
    with pytest.raises(TypeError, match="EllipsoidSet") as info:
        pessimistic_policy(dset, small.pop, objective="exact")
    for kind in ("gram", "wald", "credible", "DrawsSet"):
        assert kind in str(info.value)


@pytest.mark.parametrize(("kw", "error"), [({"tol": 0.0}, ValueError), ({"tol": -1e-3}, ValueError),
                                           ({"tol": "small"}, TypeError), ({"max_iter": 0}, ValueError),
                                           ({"max_iter": 2.5}, TypeError)])
def test_bad_solver_settings(small, kw, error):
    with pytest.raises(error, match=next(iter(kw))):
        pessimistic_policy(small.eset, small.pop, objective="exact", **kw)


def test_pessimistic_value_rejects_wrong_probability_shape(small):
    with pytest.raises(ValueError):
        pessimistic_value(small.eset, small.pop, np.full((small.pop.n, 3), 1 / 3), scope="global")
    with pytest.raises(ValueError):
        pessimistic_value(small.eset, small.pop, np.full((small.pop.n_states, 2), 1 / 2), scope="global")


# ============================================================================ paper simulation smoke


@functools.cache
def paper_run():
    problem = bl.simulate.paper_problem(rank=3, imbalance=3, seed=0)
    data = problem.sample(3000, seed=1)
    fit = bl.fit_prs(data, rank=3)
    return problem, fit


def test_paper_simulation_exact_wald_policy():
    with single_blas_thread():
        check_paper_simulation()


def check_paper_simulation():
    problem, fit = paper_run()
    pop = problem.population(500, seed=2)
    wald = fit.calibrated_set(0.9)
    policy = pessimistic_policy(wald, pop, objective="exact")
    assert policy.status is PolicyStatus.SOLVED
    assert policy.certificate.relative_gap <= 1e-4
    assert policy.certificate.lower <= policy.certificate.upper
    assert wald.contains(policy.theta)
    optimum = bl.optimal_value(problem, pop)
    baseline = bl.policy_value(Policy(np.eye(pop.n_actions)[np.zeros(pop.n, dtype=int)], np.arange(pop.n),
                                      "personalised", "relaxed", 0, 0.0, 0.0), problem, pop)
    sub = bl.suboptimality(policy, problem, pop)
    assert 0.0 <= sub <= optimum - baseline
    # the calibrated set needs the exact objective: relaxed Wald is far more pessimistic
    # (docs/design.md, pessimism point 2)
    relaxed_sub = bl.suboptimality(pessimistic_policy(wald, pop, objective="relaxed"), problem, pop)
    assert sub < relaxed_sub
    # a global policy under a shifted context law is meaningful and certified too
    pop_g = problem.population(40, seed=3, contexts_per_state=10, context_law="shifted")
    glob = pessimistic_policy(wald, pop_g, objective="exact", scope="global")
    assert glob.certificate.lower <= glob.certificate.upper
    assert glob.certificate.relative_gap <= 1e-3
    assert glob.probabilities.shape == (40, pop_g.n_actions)
    assert 0.0 <= bl.suboptimality(glob, problem, pop_g) <= bl.optimal_value(problem, pop_g, "global")


# ============================================================================ the stated bound


def bound_instance():
    """A small paper simulation fitted by the MLE: its Wald set, penalty ball and a population."""
    problem = bl.simulate.paper_problem(d_s=2, d_a=4, d_x=3, rank=2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        fit = bl.fit_mle(problem.sample(800, seed=5))
    return problem, fit, problem.population(30, seed=6)


@pytest.mark.parametrize("objective", ["relaxed", "exact"])
def test_bound_states_the_level_of_a_calibrated_set(objective):
    _, fit, pop = bound_instance()
    policy = pessimistic_policy(fit.calibrated_set(0.9), pop, objective=objective, reference_action=2)
    assert policy.level == 0.9 and "Wald" in policy.level_meaning
    bound = policy.bound()
    assert bound.calibrated and bound.lower == policy.pessimistic_value and bound.reference_action == 2
    assert str(bound) == (f"With probability >= 0.9 ({policy.level_meaning}), the value of this policy "
                          f"relative to always choosing the reference action a_ref = 2 is at least "
                          f"{policy.pessimistic_value:.6g}")
    assert f"pessimistic_value={policy.pessimistic_value:.4g} (level=0.9)" in repr(policy)


def test_bound_of_the_penalty_ball_is_not_calibrated():
    _, fit, pop = bound_instance()
    policy = pessimistic_policy(fit.penalty_set(5.0), pop)
    assert policy.level is None and not policy.bound().calibrated
    text = str(policy.bound())
    assert "this is not a calibrated bound" in text and "C₂ penalty ball" in text
    assert f"is at least {policy.pessimistic_value:.6g} for every θ in the set it was solved under" in text
    assert "(no level)" in repr(policy)


def test_bound_of_greedy_and_hand_built_policies():
    _, fit, pop = bound_instance()
    greedy = greedy_policy(fit.theta, pop)
    assert greedy.level is None and greedy.level_meaning is None
    assert str(greedy.bound()).startswith("no bound on the value of this policy")
    assert not greedy.bound().calibrated
    hand = Policy(np.eye(4)[np.zeros(pop.n, dtype=int)], np.arange(pop.n), "personalised", "relaxed", 0, 0.0,
                  0.0)
    assert hand.level is None and "not a calibrated bound (no level recorded)" in str(hand.bound())


def test_bound_of_pointwise_and_value_sized_sets():
    """A quantile set's level holds for each bound separately; a set sized for global policies' values backs a
    global policy at its level and a personalised one at none."""
    problem, fit, pop = bound_instance()
    rng = np.random.default_rng(7)
    draws = fit.estimate + 0.1 * rng.standard_normal((200, fit.estimate.size))
    quantile = pessimistic_policy(bl.QuantileSet(draws, fit.coordinates, 0.8), pop)
    assert quantile.level == 0.8 and "for each bound separately" in str(quantile.bound())
    grouped = problem.population(8, seed=8, contexts_per_state=4, context_law="target")
    sized = bl.sets.size_for_values(fit.calibrated_set(0.9), grouped, scope="global", draws=50)
    glob = pessimistic_policy(sized, grouped, scope="global")
    assert glob.level == 0.9 and "sized on" in glob.level_meaning
    personal = pessimistic_policy(sized, grouped, scope="personalised")
    assert personal.level is None
    assert "sized for the values of global policies, so it gives no level for a personalised" in str(
        personal.bound())


@pytest.mark.parametrize(("field", "value", "error", "match"), [
    ("level", 1.5, ValueError, r"level must be in \(0, 1\) or None, got 1.5"),
    ("level", "high", TypeError, r"level must be a real number"),
    ("level_meaning", 3, TypeError, r"level_meaning must be a str or None, got int"),
])
def test_bad_bound_fields(field, value, error, match):
    with pytest.raises(error, match=match):
        Policy(np.eye(2)[[0, 1]], np.arange(2), "personalised", "relaxed", 0, 0.0, 0.0, **{field: value})


def bound_runs(reps: int, n: int, n_units: int, seed0: int, level: float = 0.9):
    """For each seeded data set of the paper's simulation: whether the MLE's Wald set covers θ*, and whether
    each pessimistic policy's true value relative to a_ref is at least its stated bound."""
    problem = bl.simulate.paper_problem(d_s=2, d_a=4, d_x=3, rank=2, seed=0)
    pop = problem.population(n_units, seed=2)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        for i in range(reps):
            fit = bl.fit_mle(problem.sample(n, seed=seed0 + i))
            wald = fit.calibrated_set(level)
            row = [bool(wald.contains(fit.coordinates.to_coordinates(problem.theta)))]
            for objective in ("relaxed", "exact"):
                policy = pessimistic_policy(wald, pop, objective=objective)
                assert policy.level == level
                row += [bl.relative_value(policy, problem, pop) >= policy.bound().lower, policy.bound().lower]
            rows.append(row)
    return np.array(rows, dtype=float)


def check_bound_runs(rows, level):
    covered, tolerance = rows[:, 0] > 0, 3 * np.sqrt(level * (1 - level) / len(rows))
    for held in (rows[:, 1] > 0, rows[:, 3] > 0):
        # The bound is read off the set: wherever it covers θ* (vec coordinates hold Θ* exactly), it holds.
        assert held[covered].all()
        assert held.mean() >= level - tolerance, held.mean()
    assert covered.mean() >= level - tolerance, covered.mean()
    assert np.all(rows[:, [2, 4]] > 0)  # not vacuous: every policy beats the reference for sure


def test_stated_bound_holds_against_the_truth():
    """60 seeded data sets (N = 800, 30 units): the stated lower bound on the value relative to a_ref holds
    whenever the 90% Wald set covers θ*, and so in at least 90% (less 3 binomial s.e.) of them."""
    check_bound_runs(bound_runs(60, 800, 30, seed0=100), 0.9)


@pytest.mark.slow
def test_stated_bound_holds_against_the_truth_many_repetitions():
    check_bound_runs(bound_runs(400, 2000, 200, seed0=2000), 0.9)
