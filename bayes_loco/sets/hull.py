"""The convex hull of parameter draws (e.g. posterior draws inside a credible region)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .._validation import as_float_array, check_finite, check_option
from ..coordinates import Coordinates
from .base import (
    Certificate,
    ExactProblem,
    ExactSolution,
    check_features,
    check_set_coordinates,
    check_set_level,
)

KINDS = ("draws", "cvar")
# The Nash program over a hull of draws has J·n exponential cones; above this it is refused.
MAX_NASH_CONES = 200_000


@dataclass(frozen=True, eq=False)
class DrawsSet:
    """Averages of parameter draws θ_1 … θ_J: their convex hull, or the CVaR set of a tail fraction β.

    The set is {Σ_j q_j θ_j : q on the simplex, q_j ≤ 1/(βJ)}. With ``tail`` β = 0
    (or βJ ≤ 1) the cap is void and the set is the convex hull of the draws:
    ``lower_bound(z) = min_j θ_jᵀz``. It guarantees nothing beyond the draws: a
    hull of a few thousand draws in ~80 dimensions is much smaller than the
    credible ellipsoid of the same level (its support reaches ~3.5σ along a
    direction, the ellipsoid's ~10σ).

    With β > 0, ``lower_bound(z)`` is CVaR_β of θᵀz over the draws (the mean of
    its lowest β fraction), and a policy's pessimistic value is CVaR_β of the
    posterior of its value θᵀm(π) (Rockafellar & Uryasev 2000). CVaR_β lies
    below the β-quantile, so when the draws are posterior draws every policy's
    value exceeds its pessimistic value with posterior probability at least
    1 − β (up to Monte Carlo error), the chosen policy included: the statement
    conditions on the data, so choosing π from them does not spoil it. β = 1 is
    the posterior mean (greedy); β → 0 the hull.

    Parameters
    ----------
    draws : ndarray, shape (J, k)
    coordinates : Coordinates
    kind : str
        ``"draws"`` (the hull) or ``"cvar"``.
    level : float or None
        The credible level of the region the draws were selected from
        (``"draws"``), or 1 − β (``"cvar"``).
    tail : float
        β in [0, 1].

    Examples
    --------
    >>> triangle = bl.DrawsSet(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), bl.VecCoordinates(1, 2))
    >>> triangle.lower_bound(np.array([[1.0, 1.0], [-1.0, 0.0]]))
    array([ 0., -1.])

    A posterior's hull of its 90% most central draws is ``post.calibrated_set(0.9, "draws")``.
    """

    draws: np.ndarray
    coordinates: Coordinates
    kind: str = "draws"
    level: float | None = None
    tail: float = 0.0

    def __post_init__(self):
        shape = np.shape(self.draws)
        if len(shape) != 2 or 0 in shape:
            raise ValueError(f"draws must be a non-empty (J, k) array, got shape {shape}")
        draws = as_float_array(self.draws, "draws", 2)
        object.__setattr__(self, "draws", draws)
        check_set_coordinates(self.coordinates, draws.shape[1], "draws")
        check_option(self.kind, "kind", KINDS)
        check_set_level(self.level, allow_none=True)
        tail = check_finite(self.tail, "tail")
        if not 0.0 <= tail <= 1.0:
            raise ValueError(f"tail (β) must lie in [0, 1], got {tail}")

    @property
    def dim(self) -> int:
        return self.draws.shape[1]

    @property
    def cap(self) -> float:
        """The largest weight one draw may carry, 1/(βJ) (1 for the hull)."""
        n = self.draws.shape[0]
        return 1.0 if self.tail * n <= 1.0 else 1.0 / (self.tail * n)

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """min over the set of θᵀz: min_j θ_jᵀz for the hull, CVaR_β of θ_jᵀz otherwise.

        Parameters
        ----------
        z : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (...)

        Examples
        --------
        >>> triangle = bl.DrawsSet(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), bl.VecCoordinates(1, 2))
        >>> triangle.lower_bound(np.array([[1.0, 1.0], [-1.0, 0.0]]))
        array([ 0., -1.])
        """
        values = check_features(z, self.dim) @ self.draws.T
        if self.cap == 1.0:
            return values.min(axis=-1)
        # The minimising q fills the lowest values up to the cap, in order.
        filled = np.clip(1.0 - self.cap * np.arange(values.shape[-1]), 0.0, self.cap)
        return np.sort(values, axis=-1) @ filled

    def contains(self, theta: np.ndarray) -> bool:
        """Whether θ lies in the set (an LP feasibility check).

        Parameters
        ----------
        theta : ndarray of shape (k,)

        Returns
        -------
        bool

        Examples
        --------
        >>> triangle = bl.DrawsSet(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), bl.VecCoordinates(1, 2))
        >>> triangle.contains(np.array([0.2, 0.2])), triangle.contains(np.array([1.0, 1.0]))
        (True, False)
        """
        from scipy.optimize import linprog

        theta = check_features(theta, self.dim, "theta")
        if theta.ndim != 1:
            raise ValueError(f"theta must be one point of {self.dim} coordinates, got shape {theta.shape}")
        j = self.draws.shape[0]
        res = linprog(np.zeros(j), A_eq=np.vstack([self.draws.T, np.ones((1, j))]),
                      b_eq=np.append(theta, 1.0), bounds=(0, self.cap), method="highs")
        return bool(res.status == 0)

    def solve_exact(self, problem: ExactProblem) -> ExactSolution:
        """min over λ on the (capped) simplex of Σ_i w_i max_a θᵀz_ia with θ = Σ_j λ_j θ_j, an LP (HiGHS).

        Epigraph form with constraint generation: t_i ≥ θᵀz_ia only for the actions
        that are active or violated, added until none is violated (few are: most
        units have one or two candidate actions). θ stays a variable tied to λ by k
        equalities, so each epigraph row has k + 1 entries instead of one per draw
        (about 10× fewer non-zeros with thousands of draws). The LP's dual
        multipliers of the t-constraints are the optimal stochastic policy.

        HiGHS's interior-point method (with its crossover to a vertex, which gives
        the multipliers) solves each round: its dual simplex stalled for over ten
        minutes on a second round of 6,500 rows (a posterior of the N = 10,000,
        q = 3 study, seed 12) that the interior point solved in 3 s.

        Parameters
        ----------
        problem : ExactProblem
            What :func:`~bayes_loco.pessimistic_policy` hands over.

        Returns
        -------
        ExactSolution

        Examples
        --------
        :func:`~bayes_loco.pessimistic_policy` calls it with ``objective="exact"``:

        >>> hull = post.calibrated_set(0.9, "draws")
        >>> policy = bl.pessimistic_policy(hull, pop, objective="exact")
        >>> policy.certificate.relative_gap < 1e-4
        True
        """
        from scipy.optimize import linprog

        z, weights = problem.whole("the hull's LP"), problem.weights
        draws = self.draws
        n_units, n_actions, k = z.shape
        n_draws = draws.shape[0]
        mean_values = z @ draws.mean(axis=0)
        scale = max(float(np.abs(z).max() * np.abs(draws).max()), np.finfo(float).tiny)
        nearest_reference = np.linalg.norm(z, axis=-1).argmin(axis=1)
        active = np.zeros((n_units, n_actions), dtype=bool)
        active[np.arange(n_units), nearest_reference] = True
        active[np.arange(n_units), mean_values.argmax(axis=1)] = True
        # Variables (t, θ, λ): minimise wᵀt subject to θ = Dᵀλ, Σλ = 1, λ ≥ 0.
        cost = np.concatenate([weights, np.zeros(k + n_draws)])
        a_eq = sparse.vstack([
            sparse.hstack([sparse.csr_array((k, n_units)), sparse.eye_array(k), sparse.csr_array(-draws.T)]),
            sparse.hstack([sparse.csr_array((1, n_units + k)), sparse.csr_array(np.ones((1, n_draws)))]),
        ], format="csr")
        b_eq = np.concatenate([np.zeros(k), [1.0]])
        bounds = [(None, None)] * (n_units + k) + [(0, self.cap)] * n_draws
        note = ""
        for _ in range(100):
            rows, cols = np.nonzero(active)
            t_part = sparse.csr_array((-np.ones(rows.size), (np.arange(rows.size), rows)),
                                      shape=(rows.size, n_units))
            a_ub = sparse.hstack([t_part, sparse.csr_array(z[rows, cols]),
                                  sparse.csr_array((rows.size, n_draws))], format="csc")
            res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(rows.size), A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                          method="highs-ipm")
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
            note = "; constraint generation stopped after 100 rounds"
        probs = np.zeros((n_units, n_actions))
        probs[rows, cols] = np.maximum(-res.ineqlin.marginals, 0.0)
        totals = probs.sum(axis=1, keepdims=True)
        empty = totals[:, 0] <= 0
        probs[empty, full[empty].argmax(axis=1)] = 1.0
        probs[~empty] /= totals[~empty]
        cert = Certificate(problem.worst_case(self, probs), float(weights @ full.max(axis=1)))
        return problem.finish(probs, lam @ draws, cert, mean_values, "the hull's LP", note)

    def solve_nash(self, problem: ExactProblem, floor: float) -> tuple[np.ndarray, float]:
        """max_π min_j Σ_i w_i log(Σ_a π_ia θ_jᵀz_ia − r₀) by cvxpy with an exponential-cone solver.

        Minimax duality fails for the concave Nash welfare, so the policy is solved for
        directly. For a fixed π the welfare is concave in θ, so its minimum over the
        hull is reached at a vertex: the welfare guaranteed for every draw holds for
        every θ in the hull. Needs cvxpy and Clarabel (``pip install -e ".[welfare]"``).

        Parameters
        ----------
        problem : ExactProblem
            What :func:`~bayes_loco.pessimistic_policy` hands over.
        floor : float
            r₀ < 0, the reward subtracted inside the logarithm.

        Returns
        -------
        probabilities : ndarray of shape (units, A)
        welfare : float
            The welfare guaranteed for every θ in the hull.

        Examples
        --------
        :func:`~bayes_loco.pessimistic_policy` calls it with ``welfare="nash"``:

        >>> hull = bl.DrawsSet(post.rtv_draws[:40], post.coordinates)
        >>> nash = bl.pessimistic_policy(hull, pop, objective="exact", welfare="nash")
        >>> nash.objective, nash.welfare
        ('exact', 'nash')
        """
        if self.cap < 1.0:
            raise TypeError("welfare='nash' with objective='exact' needs the hull of draws (tail=0): the "
                            "welfare's minimum over a CVaR set is not at a draw. Use objective='relaxed'.")
        try:
            import cvxpy as cp
        except ImportError as exc:  # pragma: no cover - cvxpy is in the dev and welfare extras
            raise ImportError("welfare='nash' over draws needs cvxpy: "
                              "pip install 'bayes_loco[welfare]'") from exc
        z, weights = problem.whole("the hull's Nash program"), problem.weights
        n_units, n_actions, _ = z.shape
        n_draws = self.draws.shape[0]
        if n_draws * n_units > MAX_NASH_CONES:
            raise ValueError(f"welfare='nash' over {n_draws} draws x {n_units} units needs "
                             f"{n_draws * n_units} exponential cones (limit {MAX_NASH_CONES}); thin the "
                             "draws or the population")
        values = np.einsum("uak,jk->jua", z, self.draws)
        pi = cp.Variable((n_units, n_actions), nonneg=True)
        welfare = cp.Variable()
        constraints = [cp.sum(pi, axis=1) == 1]
        constraints += [welfare <= weights @ cp.log(cp.sum(cp.multiply(pi, values[j]), axis=1) - floor)
                        for j in range(n_draws)]
        program = cp.Problem(cp.Maximize(welfare), constraints)
        program.solve(solver=cp.CLARABEL)
        if program.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"Nash welfare program ended with status {program.status}")
        probs = np.clip(pi.value, 0.0, None)
        probs /= probs.sum(axis=1, keepdims=True)
        achieved = weights @ np.log(np.einsum("ua,jua->ju", probs, values) - floor).T
        return probs, float(achieved.min())

    def __repr__(self) -> str:
        lvl = "" if self.level is None else f", level={self.level:g}"
        tail = f", tail={self.tail:g}" if self.tail else ""
        return f"DrawsSet(kind={self.kind!r}, draws={self.draws.shape[0]}, k={self.dim}{lvl}{tail})"
