"""The one pessimistic policy solver that every uncertainty set feeds.

Actions are scored relative to a reference action a_ref (DESIGN.md, convention 1):
z(x, s, a) is the set's coordinate map applied to φ(s, a) − φ(s, a_ref), so the
reference scores 0 under every θ and the state features that no comparison
identifies cancel.

Two objectives:

``"relaxed"`` (the paper's appendix)
    Pessimism pointwise: each (x, s) — or, for a global policy, each s with the
    average over x | s — picks argmax_a min_{θ ∈ set} θᵀz, a different worst-case
    θ for every unit. For an ellipsoid that is θ̂ᵀz − C‖z‖_{W⁻¹}.
``"exact"``
    max_π min_{θ ∈ set} θᵀ m(π), m(π) = E_ρ Σ_a π(a) z: one worst case for the
    whole policy. By minimax duality over stochastic policies and a convex
    compact set this equals min_{θ ∈ set} V(θ), V(θ) = E_ρ max_a θᵀz (personalised)
    or E_s max_a E_{x|s} θᵀz (global), a k-dimensional convex problem. The policy
    is greedy under the minimiser, mixed over ties, and comes with a certificate:
    V at the returned θ bounds the optimum from above, the policy's own
    pessimistic value from below.
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse
from scipy.special import logsumexp, softmax

from ._validation import check_int, check_option, check_real
from .data import Population
from .exceptions import ConvergenceWarning
from .model import rewards
from .uncertainty import DrawsSet, EllipsoidSet, UncertaintySet

OBJECTIVES = ("relaxed", "exact")
SCOPES = ("personalised", "global")
WELFARES = ("utilitarian", "nash")
# The Nash program over a hull of draws has J·n exponential cones; above this it is refused.
MAX_NASH_CONES = 200_000


class PolicyStatus(enum.Enum):
    """Outcome of the solver."""

    SOLVED = "solved"
    GAP_NOT_REACHED = "gap_not_reached"


@dataclass(frozen=True)
class Certificate:
    """Bounds on the optimal pessimistic value: lower ≤ optimum ≤ upper."""

    lower: float
    upper: float

    @property
    def gap(self) -> float:
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        return self.gap / max(abs(self.upper), abs(self.lower), np.finfo(float).tiny)


@dataclass(frozen=True, eq=False)
class Policy:
    """A (possibly stochastic) policy over a population.

    Attributes
    ----------
    probabilities : ndarray, shape (n_units, A)
        π(a | unit); a unit is a row (x, s) for a personalised policy and a state
        for a global one.
    groups : ndarray of int, shape (n,)
        Unit of each population row.
    scope : {"personalised", "global"}
    objective : {"greedy", "relaxed", "exact"}
    welfare : {"utilitarian", "nash"}
    reference_action : int
    pessimistic_value : float
        min_{θ ∈ set} θᵀ m(π): the policy's worst-case value over the set,
        relative to always playing the reference action (NaN for greedy).
    objective_value : float
        The value of the objective that was maximised (relaxed: the mean of
        pointwise lower bounds; exact: equals ``pessimistic_value``; Nash welfare:
        the guaranteed Σ_i w_i log(reward_i − r₀)).
    theta : ndarray or None
        Exact objective: the minimising θ (set coordinates); the policy is greedy
        under it, which is how it acts on contexts outside the population.
    certificate : Certificate or None
        Exact objective: bounds on the optimal pessimistic value.
    rounded_value : float or None
        Exact objective: the pessimistic value of the deterministic policy that
        plays each unit's most probable action; ``pessimistic_value −
        rounded_value`` is what rounding loses.
    status : PolicyStatus
    message : str
    """

    probabilities: np.ndarray
    groups: np.ndarray
    scope: str
    objective: str
    reference_action: int
    pessimistic_value: float
    objective_value: float
    welfare: str = "utilitarian"
    theta: np.ndarray | None = None
    certificate: Certificate | None = None
    rounded_value: float | None = None
    status: PolicyStatus = PolicyStatus.SOLVED
    message: str = ""

    @property
    def row_probabilities(self) -> np.ndarray:
        """π(a | x_i, s_i) for every population row, shape (n, A)."""
        return self.probabilities[self.groups]

    @property
    def actions(self) -> np.ndarray:
        """The most probable action of every population row."""
        return self.row_probabilities.argmax(axis=1)

    @property
    def n_mixed(self) -> int:
        """Units whose action is random (largest probability below 1 − 1e-9)."""
        return int((self.probabilities.max(axis=1) < 1 - 1e-9).sum())

    def __repr__(self) -> str:
        cert = "" if self.certificate is None else f", relative gap={self.certificate.relative_gap:.2e}"
        return (f"Policy(scope={self.scope!r}, objective={self.objective!r}, "
                f"units={len(self.probabilities)}, "
                f"mixed={self.n_mixed}, pessimistic_value={self.pessimistic_value:.4g}{cert}, "
                f"status={self.status.value})")


def _units(population: Population, scope: str) -> tuple[np.ndarray, sparse.csr_array, np.ndarray]:
    """Unit of each row, the row-averaging matrix (units × rows) and unit weights."""
    n = population.n
    groups = np.arange(n) if scope == "personalised" else population.groups
    n_units = int(groups.max()) + 1
    counts = np.bincount(groups, minlength=n_units).astype(float)
    average = sparse.csr_array((1.0 / counts[groups], (groups, np.arange(n))), shape=(n_units, n))
    return groups, average, counts / n


def _check_common(population, scope, reference_action):
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    check_option(scope, "scope", SCOPES)
    return check_int(reference_action, "reference_action", 0, population.n_actions - 1)


def candidate_features(uncertainty_set: UncertaintySet, population: Population,
                       reference_action: int = 0) -> np.ndarray:
    """z(x_i, s_i, a) = coordinates of x_i (φ(s_i, a) − φ(s_i, a_ref))ᵀ, shape (n, A, k)."""
    feats = population.features
    return uncertainty_set.coordinates.transform(
        population.contexts, feats - feats[:, reference_action: reference_action + 1, :])


def _average(average: sparse.csr_array, values: np.ndarray) -> np.ndarray:
    flat = values.reshape(values.shape[0], -1)
    return (average @ flat).reshape(average.shape[0], *values.shape[1:])


def greedy_policy(theta: np.ndarray, population: Population, *, scope: str = "personalised") -> Policy:
    """argmax_a of the estimated reward xᵀΘ̂φ(s, a) (averaged over x | s for ``scope="global"``).

    MLE-Greedy is ``greedy_policy(fit_mle(data).theta, population)``.
    """
    _check_common(population, scope, 0)
    groups, average, weights = _units(population, scope)
    scores = _average(average, rewards(np.asarray(theta, float), population.contexts, population.features))
    probs = np.eye(population.n_actions)[scores.argmax(axis=1)]
    value = float(weights @ scores.max(axis=1))
    return Policy(probs, groups, scope, "greedy", 0, np.nan, value)


def pessimistic_value(uncertainty_set: UncertaintySet, population: Population, probabilities: np.ndarray,
                      *, scope: str = "personalised", reference_action: int = 0) -> float:
    """min_{θ ∈ set} θᵀ m(π) with m(π) = E_ρ Σ_a π(a) z: a policy's worst case over the set.

    ``probabilities`` has one row per unit (row or state, as ``scope`` says).
    """
    reference_action = _check_common(population, scope, reference_action)
    _, average, weights = _units(population, scope)
    z = _average(average, candidate_features(uncertainty_set, population, reference_action))
    return _policy_worst_case(uncertainty_set, z, weights, np.asarray(probabilities, float))


def _policy_worst_case(uncertainty_set, z, weights, probs) -> float:
    m = np.einsum("u,ua,uak->k", weights, probs, z)
    return float(uncertainty_set.lower_bound(m))


def pessimistic_policy(uncertainty_set: UncertaintySet, population: Population, *,
                       objective: str = "relaxed", scope: str = "personalised",
                       reference_action: int = 0, welfare: str = "utilitarian", floor: float = -1.0,
                       tol: float = 1e-4, max_iter: int = 60) -> Policy:
    """The pessimistic policy of ``population`` under ``uncertainty_set``.

    Parameters
    ----------
    uncertainty_set : UncertaintySet
        Any set with ``coordinates`` and ``lower_bound`` (PRS's ellipsoid, the
        MLE baselines' ellipsoids, Wald sets, posterior credible sets).
    population : Population
        The evaluation population ρ with every candidate action's features.
    objective : {"relaxed", "exact"}
        The paper's pointwise objective (default) or the exact minimax one; see
        the module docstring. ``"exact"`` needs a convex set: an ``EllipsoidSet``
        or a ``DrawsSet`` (the hull of draws).
    scope : {"personalised", "global"}
        π(x, s) per row, or π(s) per state (rows sharing ``population.groups``).
    reference_action : int
        a_ref: rewards are compared with this action's (default 0, the paper's
        baseline answer). It never has a worse worst case than itself, so every
        pessimistic policy's ``pessimistic_value`` is ≥ 0.
    welfare : {"utilitarian", "nash"}
        Utilitarian (default) maximises the mean reward. Nash maximises the mean of
        log(reward − r₀) (reward relative to the reference action), which favours
        units with low rewards. Minimax duality fails for a concave utility, so:
        over a ``DrawsSet`` with ``objective="exact"`` the convex program
        max_π min_j Σ_i w_i log(π_iᵀ V_ij − r₀) is solved with cvxpy (an
        exponential-cone solve; it guarantees the welfare for every draw in the
        hull's vertices, hence for every θ in the hull only up to Jensen's gap);
        otherwise each unit maximises its own lower bound, which guarantees
        Σ_i w_i log(lower bound_i − r₀) whenever the true θ lies in the set.
    floor : float
        r₀ < 0 for Nash welfare (the reference action scores 0).
    tol : float
        Exact objective: target relative gap of the certificate.
    max_iter : int
        Exact objective: Newton iterations per inner solve.
    """
    reference_action = _check_common(population, scope, reference_action)
    check_option(objective, "objective", OBJECTIVES)
    tol = check_real(tol, "tol", 0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", 1)
    check_option(welfare, "welfare", WELFARES)
    floor = check_real(floor, "floor", high=0.0, high_open=True)
    if not isinstance(uncertainty_set, UncertaintySet):
        raise TypeError("uncertainty_set must have `coordinates` and `lower_bound(z)`, "
                        f"got {type(uncertainty_set).__name__}")
    groups, average, weights = _units(population, scope)
    z = candidate_features(uncertainty_set, population, reference_action)
    common = dict(groups=groups, scope=scope, reference_action=reference_action, welfare=welfare)
    if welfare == "nash" and objective == "exact" and isinstance(uncertainty_set, DrawsSet):
        zu = _average(average, z)
        probs, value = _nash_hull(uncertainty_set, zu, weights, floor)
        return Policy(probs, objective="exact", objective_value=value,
                      pessimistic_value=_policy_worst_case(uncertainty_set, zu, weights, probs), **common)
    if objective == "relaxed" or welfare == "nash":
        scores = _average(average, uncertainty_set.lower_bound(z))
        best = scores.max(axis=1)
        probs = np.eye(population.n_actions)[scores.argmax(axis=1)]
        zu = _average(average, z)
        value = float(weights @ (best if welfare == "utilitarian" else np.log(best - floor)))
        return Policy(probs, objective=objective,
                      pessimistic_value=_policy_worst_case(uncertainty_set, zu, weights, probs),
                      objective_value=value, **common)
    if not isinstance(uncertainty_set, EllipsoidSet | DrawsSet):
        raise TypeError("objective='exact' needs a convex set: an EllipsoidSet (kinds gram, wald, "
                        "credible) or a DrawsSet (the convex hull of draws); got "
                        f"{type(uncertainty_set).__name__}, which is not convex. Use objective='relaxed' "
                        "for it.")
    zu = _average(average, z)
    if isinstance(uncertainty_set, EllipsoidSet):
        solution = _exact_ellipsoid(uncertainty_set, zu, weights, tol, max_iter)
    else:
        solution = _exact_hull(uncertainty_set, zu, weights, tol)
    if solution.status is PolicyStatus.GAP_NOT_REACHED:
        warnings.warn(f"pessimistic_policy: {solution.message}", ConvergenceWarning, stacklevel=2)
    rounded = np.eye(population.n_actions)[solution.probabilities.argmax(axis=1)]
    return Policy(solution.probabilities, objective="exact",
                  pessimistic_value=solution.certificate.lower,
                  objective_value=solution.certificate.lower, theta=solution.theta,
                  certificate=solution.certificate,
                  rounded_value=_policy_worst_case(uncertainty_set, zu, weights, rounded),
                  status=solution.status, message=solution.message, **common)


@dataclass(frozen=True)
class _ExactSolution:
    probabilities: np.ndarray
    theta: np.ndarray
    certificate: Certificate
    status: PolicyStatus
    message: str


def _closed(cert: Certificate, tol: float, weights: np.ndarray, point_values: np.ndarray) -> bool:
    """Gap ≤ tol relative to the value, floored at 1% of the point estimate's value Σ w max_a |θ̂ᵀz|.

    The floor lets a zero optimum (the reference action is best) be certified too. It is not
    the set's width: a wide set would make the floor, not the value, decide.
    """
    floor = 1e-2 * float(weights @ np.abs(point_values).max(axis=1))
    return cert.gap <= tol * max(abs(cert.upper), abs(cert.lower), floor)


def _exact_ellipsoid(eset: EllipsoidSet, z: np.ndarray, weights: np.ndarray, tol: float,
                     max_iter: int) -> _ExactSolution:
    """min_{‖u‖ ≤ 1} V(θ̂ + R L u) by smoothing and Newton, with a duality certificate.

    V(θ̂ + R L u) = Σ_i w_i max_a (c_ia + g_iaᵀ u) with c = θ̂ᵀz and g = R Lᵀz. The max
    is smoothed by μ·logsumexp(·/μ); for each μ, Newton solves
    min F_μ(u) + (λ/2)‖u‖² and a secant search on λ puts u on the unit sphere
    (the KKT point of the ball-constrained problem). At that point the softmax
    weights π are a stochastic policy whose pessimistic value is within μ·(mean
    entropy of π) of F_μ(u) ≥ V(u), so μ is cut until the certificate closes.
    Candidates with a component outside range(W) have an unbounded worst case
    and get probability 0.
    """
    valid = eset.identified(z)
    c = np.where(valid, z @ eset.center, -np.inf)
    g = eset.radius * (z @ eset.factor)
    g[~valid] = 0.0
    m = g.shape[-1]
    scale = float(max(np.abs(c[valid]).max(initial=0.0), np.linalg.norm(g, axis=-1).max(initial=0.0)))
    if scale == 0.0 or m == 0 or eset.radius == 0.0:
        probs = np.eye(z.shape[1])[c.argmax(axis=1)]
        value = float(weights @ c.max(axis=1))
        return _ExactSolution(probs, eset.center.copy(), Certificate(value, value), PolicyStatus.SOLVED,
                              "set is a point in the identified directions: greedy policy")

    n_units, n_actions = c.shape
    reference = np.zeros((n_units, n_actions))
    reference[np.arange(n_units), np.linalg.norm(z, axis=-1).argmin(axis=1)] = 1.0

    def certify(u, probs):
        """Upper bound V(u) and the best pessimistic value among π, its rounding and the reference."""
        u = u / max(1.0, float(np.linalg.norm(u)))
        upper = float(weights @ (c + g @ u).max(axis=1))
        rounded = np.eye(n_actions)[probs.argmax(axis=1)]
        candidates = [(_policy_worst_case(eset, z, weights, p), p) for p in (probs, rounded, reference)]
        lower, probs = max(candidates, key=lambda item: item[0])
        return Certificate(lower, upper), u, probs

    point_values = np.where(valid, c, 0.0)

    def closed(cert):
        return _closed(cert, tol, weights, point_values)

    u = np.zeros(m)
    lam = None
    best = None
    mu = 0.01 * scale
    for _ in range(12):
        u, lam, probs = _smoothed_ball_minimum(c, g, weights, mu, u, lam, max_iter)
        cert, u_feasible, chosen = certify(u, probs)
        if best is None or cert.gap < best[0].gap:
            best = (cert, u_feasible, chosen)
        if closed(cert):
            break
        mu *= 0.1
    cert, u, probs = best
    theta = eset.center + eset.radius * (eset.factor @ u)
    if closed(cert):
        return _ExactSolution(probs, theta, cert, PolicyStatus.SOLVED,
                              f"certified: relative gap {cert.relative_gap:.2e} <= {tol:g}")
    return _ExactSolution(probs, theta, cert, PolicyStatus.GAP_NOT_REACHED,
                          f"exact solver reached a relative gap of {cert.relative_gap:.2e}, "
                          f"above tol={tol:g} (bounds {cert.lower:.6g} .. {cert.upper:.6g}); the policy is "
                          "feasible and its pessimistic value is the lower bound. The smoothing solver "
                          "certifies to about 1e-7 relative; ask for no less.")


def _exact_hull(dset: DrawsSet, z: np.ndarray, weights: np.ndarray, tol: float) -> _ExactSolution:
    """min over λ on the simplex of Σ_i w_i max_a θᵀz_ia with θ = Σ_j λ_j θ_j, an LP solved by HiGHS.

    Epigraph form with constraint generation: t_i ≥ θᵀz_ia only for the actions
    that are active or violated, added until none is violated (few are: most
    units have one or two candidate actions). θ stays a variable tied to λ by k
    equalities, so each epigraph row has k + 1 entries instead of one per draw
    (about 10× fewer non-zeros with thousands of draws). The LP's dual
    multipliers of the t-constraints are the optimal stochastic policy.
    """
    from scipy.optimize import linprog

    draws = dset.draws
    n_units, n_actions, k = z.shape
    n_draws = draws.shape[0]
    mean_values = z @ draws.mean(axis=0)
    scale = max(float(np.abs(z).max() * np.abs(draws).max()), np.finfo(float).tiny)
    reference = np.linalg.norm(z, axis=-1).argmin(axis=1)
    active = np.zeros((n_units, n_actions), dtype=bool)
    active[np.arange(n_units), reference] = True
    active[np.arange(n_units), mean_values.argmax(axis=1)] = True
    # Variables (t, θ, λ): minimise wᵀt subject to θ = Dᵀλ, Σλ = 1, λ ≥ 0.
    cost = np.concatenate([weights, np.zeros(k + n_draws)])
    a_eq = sparse.vstack([
        sparse.hstack([sparse.csr_array((k, n_units)), sparse.eye_array(k), sparse.csr_array(-draws.T)]),
        sparse.hstack([sparse.csr_array((1, n_units + k)), sparse.csr_array(np.ones((1, n_draws)))]),
    ], format="csr")
    b_eq = np.concatenate([np.zeros(k), [1.0]])
    bounds = [(None, None)] * (n_units + k) + [(0, None)] * n_draws
    message = ""
    for _ in range(100):
        rows, cols = np.nonzero(active)
        t_part = sparse.csr_array((-np.ones(rows.size), (np.arange(rows.size), rows)),
                                  shape=(rows.size, n_units))
        a_ub = sparse.hstack([t_part, sparse.csr_array(z[rows, cols]),
                              sparse.csr_array((rows.size, n_draws))], format="csc")
        res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(rows.size), A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                      method="highs")
        if res.status != 0:
            raise RuntimeError(f"exact hull LP failed: {res.message}")
        t, lam = res.x[:n_units], np.clip(res.x[n_units + k:], 0.0, None)
        lam /= lam.sum()
        full = z @ (lam @ draws)
        violated = (full > t[:, None] + 1e-10 * scale) & ~active
        if not violated.any():
            break
        active |= violated
    else:
        message = "; constraint generation stopped after 100 rounds"
    probs = np.zeros((n_units, n_actions))
    probs[rows, cols] = np.maximum(-res.ineqlin.marginals, 0.0)
    totals = probs.sum(axis=1, keepdims=True)
    empty = totals[:, 0] <= 0
    probs[empty, full[empty].argmax(axis=1)] = 1.0
    probs[~empty] /= totals[~empty]
    upper = float(weights @ full.max(axis=1))
    lower = _policy_worst_case(dset, z, weights, probs)
    cert = Certificate(lower, upper)
    theta = lam @ draws
    if _closed(cert, tol, weights, mean_values):
        return _ExactSolution(probs, theta, cert, PolicyStatus.SOLVED,
                              f"certified: relative gap {cert.relative_gap:.2e} <= {tol:g}{message}")
    return _ExactSolution(probs, theta, cert, PolicyStatus.GAP_NOT_REACHED,
                          f"exact hull LP reached a relative gap of {cert.relative_gap:.2e}, "
                          f"above tol={tol:g}{message}; the policy's pessimistic value is the lower bound.")


def _nash_hull(dset: DrawsSet, z: np.ndarray, weights: np.ndarray, floor: float) -> tuple[np.ndarray, float]:
    """max_π min_j Σ_i w_i log(Σ_a π_ia θ_jᵀz_ia − r₀) by cvxpy with an exponential-cone solver."""
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - cvxpy is in the dev and welfare extras
        raise ImportError("welfare='nash' over draws needs cvxpy: pip install 'bayes_loco[welfare]'") from exc
    n_units, n_actions, _ = z.shape
    n_draws = dset.draws.shape[0]
    if n_draws * n_units > MAX_NASH_CONES:
        raise ValueError(f"welfare='nash' over {n_draws} draws x {n_units} units needs {n_draws * n_units} "
                         f"exponential cones (limit {MAX_NASH_CONES}); thin the draws or the population")
    values = np.einsum("uak,jk->jua", z, dset.draws)
    pi = cp.Variable((n_units, n_actions), nonneg=True)
    welfare = cp.Variable()
    constraints = [cp.sum(pi, axis=1) == 1]
    constraints += [welfare <= weights @ cp.log(cp.sum(cp.multiply(pi, values[j]), axis=1) - floor)
                    for j in range(n_draws)]
    problem = cp.Problem(cp.Maximize(welfare), constraints)
    problem.solve(solver=cp.CLARABEL)
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"Nash welfare program ended with status {problem.status}")
    probs = np.clip(pi.value, 0.0, None)
    probs /= probs.sum(axis=1, keepdims=True)
    achieved = weights @ np.log(np.einsum("ua,jua->ju", probs, values) - floor).T
    return probs, float(achieved.min())


def _smoothed_values(c, g, weights, mu, u):
    s = (c + g @ u) / mu
    lse = logsumexp(s, axis=1)
    return mu * float(weights @ lse), softmax(s, axis=1)


def _newton(c, g, weights, mu, lam, u, max_iter):
    """Minimise F_μ(u) + (λ/2)‖u‖² by damped Newton; only mixed units add curvature.

    Returns the minimiser, its softmax policy and the Hessian there (for the λ search).
    """
    m = u.shape[0]
    value, probs = _smoothed_values(c, g, weights, mu, u)
    hess = None
    for _ in range(max_iter):
        grad = np.einsum("ua,uam->m", weights[:, None] * probs, g) + lam * u
        hess = _hessian(g, weights, probs, mu) + lam * np.eye(m)
        try:
            step = -linalg.solve(hess, grad, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            step = -linalg.lstsq(hess, grad)[0]
        decrement = -float(grad @ step)
        if decrement <= 1e-15 * max(1.0, abs(value)):
            break
        objective = value + 0.5 * lam * u @ u
        t = 1.0
        while t > 1e-10:
            trial = u + t * step
            trial_value, trial_probs = _smoothed_values(c, g, weights, mu, trial)
            if trial_value + 0.5 * lam * trial @ trial <= objective - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:
            break
        u, value, probs = trial, trial_value, trial_probs
    return u, probs, hess


def _hessian(g, weights, probs, mu):
    """∇²F_μ = (1/μ) Σ_i w_i Cov_{π_i}(g_i·); units with a (numerically) pure π add nothing."""
    m = g.shape[-1]
    mixed = probs.max(axis=1) < 1.0 - 1e-12
    if not mixed.any():
        return np.zeros((m, m))
    p = weights[mixed, None] * probs[mixed]
    gm = g[mixed]
    gbar = np.einsum("ua,uam->um", probs[mixed], gm)
    a = (np.sqrt(p)[..., None] * gm).reshape(-1, m)
    b = np.sqrt(weights[mixed])[:, None] * gbar
    return (a.T @ a - b.T @ b) / mu


def _smoothed_ball_minimum(c, g, weights, mu, u, lam, max_iter):
    """Minimise F_μ over ‖u‖ ≤ 1: find λ ≥ 0 with ‖u(λ)‖ = 1, or λ → 0 with u inside.

    Newton on φ(λ) = 1/‖u(λ)‖ − 1 (Moré–Sorensen): φ is nearly linear in λ and
    φ'(λ) = uᵀ(∇²F_μ + λI)⁻¹u / ‖u‖³, safeguarded by the bracket found so far.
    """
    if lam is None:
        _, probs = _smoothed_values(c, g, weights, mu, np.zeros_like(u))
        lam = max(float(np.linalg.norm(np.einsum("ua,uam->m", weights[:, None] * probs, g))), 1e-12)
    lo, hi = 0.0, np.inf  # λ with ‖u‖ > 1 (too small) and ‖u‖ < 1 (too large)
    # ‖u‖ = 1 to 1e-7 is plenty: the certificate rescales u into the ball, changing V by ~1e-7·‖∇V‖.
    for _ in range(25):
        u, probs, hess = _newton(c, g, weights, mu, lam, u, max_iter)
        norm = float(np.linalg.norm(u))
        if abs(norm - 1.0) <= 1e-7 or (norm < 1.0 and lam <= 1e-14):
            break
        if norm > 1.0:
            lo = lam
        else:
            hi = lam
        phi = 1.0 / norm - 1.0
        try:
            slope = float(u @ linalg.solve(hess, u, assume_a="pos")) / norm**3
        except (linalg.LinAlgError, ValueError):
            slope = 0.0
        new = lam - phi / slope if slope > 0 else np.nan
        if not lo < new < hi:
            new = 0.5 * (lo + hi) if np.isfinite(hi) else 2.0 * lam
        if abs(new - lam) <= 1e-13 * lam:
            break
        lam = new
    return u, lam, probs
