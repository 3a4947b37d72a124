"""The ellipsoid's exact minimax on its reduced problem (docs/design.md, "The exact objective").

An :class:`~bayes_loco.sets.EllipsoidSet` reduces the candidates' features z to c = θ̂ᵀz and
g = R Lᵀz (θ = θ̂ + R L u, ‖u‖ ≤ 1), so that V(θ̂ + R L u) = Σ_i w_i max_a (c_ia + g_iaᵀu), and hands
that to :func:`solve_reduced`. The optimal pessimistic value is max_π Σ_i w_i Σ_a π_ia c_ia −
‖Σ_i w_i Σ_a π_ia g_ia‖ over stochastic policies π. Up to :data:`NEWTON_MAX` identified directions
the max is smoothed by μ·logsumexp(·/μ); for each μ, Newton solves min F_μ(u) + (λ/2)‖u‖² and a
secant search on λ puts u on the unit sphere (the KKT point of the ball-constrained problem). At that
point the softmax weights π are a stochastic policy whose pessimistic value is within μ·(mean entropy
of π) of F_μ(u) ≥ V(u), so μ is cut until the certificate closes. Above, where Newton's
k_eff × k_eff systems cost minutes each, an accelerated projected gradient ascent on π
(:func:`~bayes_loco.solvers.first_order.accelerated`) closes the same certificate, and where it
cannot (a zero optimum) accelerated gradients on the smoothed dual
(:func:`~bayes_loco.solvers.first_order.smoothed_accelerated`) do; the better bound of either is kept.
Candidates with a component outside range(W) have an unbounded worst case and get probability 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..linalg import row_norms
from ..sets.base import MINIMAX_SOLVERS, Certificate, ExactProblem, ExactSolution, PolicyStatus
from .first_order import Bounds, accelerated, smoothed_accelerated
from .newton import smoothed_ball_minimum

# The exact objective is solved by Newton's method up to this many identified directions k_eff, above by an
# accelerated projected gradient: at k_eff = 2,080 (PRS, d_φ = 512) Newton took 163 s and 1,048 mixed units,
# the gradient method 6 s to the same certified value (0.197268 against 0.197268). Where the first-order
# methods leave a gap, Newton tries last up to NEWTON_FALLBACK_MAX directions.
NEWTON_MAX = 1000
NEWTON_FALLBACK_MAX = 4000
NEWTON = "the ellipsoid's smoothing solver (it certifies to about 1e-7 relative; ask for no less)"
FIRST_ORDER = "the accelerated projected gradients"


class _Reduced:
    """The reduced problem (c, g) of one ellipsoid and one ExactProblem: its bounds and its solvers."""

    def __init__(self, c: np.ndarray, g: np.ndarray, valid: np.ndarray, norms: np.ndarray,
                 problem: ExactProblem, scale: float):
        self.c, self.g, self.valid, self.problem, self.scale = c, g, valid, problem, scale
        self.weights = problem.weights
        n_units, n_actions = c.shape
        self.eye = np.eye(n_actions)
        # The action nearest the reference (z = 0 for the reference itself) has worst case 0.
        self.baseline = np.zeros((n_units, n_actions))
        self.baseline[np.arange(n_units), norms.argmin(axis=1)] = 1.0
        self.point_values = np.where(valid, c, 0.0)

    def worst_case(self, probs: np.ndarray) -> float:
        """Σ w π c − ‖Σ w π g‖ = θ̂ᵀm(π) − R‖m(π)‖_W⁺: :meth:`ExactProblem.worst_case` without z."""
        if np.any(probs[~self.valid] > 0):
            return -np.inf
        mass = self.weights[:, None] * probs
        moment = mass.reshape(-1) @ self.g.reshape(-1, self.g.shape[-1])
        return float(np.sum(mass * self.point_values) - np.linalg.norm(moment))

    def certify(self, u: np.ndarray, probs: np.ndarray) -> tuple[Certificate, np.ndarray, np.ndarray]:
        """Upper bound V(u) and the best pessimistic value among π, its rounding and the baseline."""
        u = u / max(1.0, float(np.linalg.norm(u)))
        upper = float(self.weights @ (self.c + self.g @ u).max(axis=1))
        rounded = self.eye[probs.argmax(axis=1)]
        candidates = [(self.worst_case(p), p) for p in (probs, rounded, self.baseline)]
        lower, probs = max(candidates, key=lambda item: item[0])
        return Certificate(lower, upper), u, probs

    def closed(self, cert: Certificate) -> bool:
        return self.problem.closed(cert, self.point_values)

    def smoothed(self) -> tuple[Certificate, np.ndarray, np.ndarray]:
        """Newton on the smoothed problem, μ cut tenfold until the certificate closes (12 cuts at most)."""
        u, lam, best, mu = np.zeros(self.g.shape[-1]), None, None, 0.01 * self.scale
        for _ in range(12):
            u, lam, probs = smoothed_ball_minimum(self.c, self.g, self.weights, mu, u, lam,
                                                  self.problem.max_iter)
            cert, u_feasible, chosen = self.certify(u, probs)
            if best is None or cert.gap < best[0].gap:
                best = (cert, u_feasible, chosen)
            if self.closed(cert):
                break
            mu *= 0.1
        return best

    def first_order(self) -> tuple[tuple[Certificate, np.ndarray, np.ndarray], str]:
        """The accelerated ascent on π, then the smoothed dual where it leaves a gap, then Newton up to
        :data:`NEWTON_FALLBACK_MAX` directions; the best bounds of all, and who found the policy."""
        args = (self.c, self.g, self.weights, self.valid, self.problem, self.point_values)
        cert, u, probs = self.certify(*accelerated(*args))
        # Where the optimum is the reference action's 0, the policy's iterates give no dual point that
        # certifies it (v → 0); the smoothed dual's iterates do. Both bounds hold whoever found them.
        if not self.closed(cert):
            dual, u_dual, probs_dual = self.certify(*smoothed_accelerated(*args, self.scale, u,
                                                                          (cert.lower, probs)))
            best = Bounds(self.problem, self.point_values)
            best.update(cert.lower, probs, cert.upper, u)
            best.update(dual.lower, probs_dual, dual.upper, u_dual)
            cert, u, probs = Certificate(best.lower, best.upper), best.u, best.probs
        if not self.closed(cert) and self.g.shape[-1] <= NEWTON_FALLBACK_MAX:
            second = self.smoothed()
            if second[0].gap < cert.gap:
                return second, NEWTON
        return (cert, u, probs), FIRST_ORDER


def solve_reduced(c: np.ndarray, g: np.ndarray, valid: np.ndarray, norms: np.ndarray, problem: ExactProblem,
                  center: np.ndarray, radius: float, apply_factor: Callable[[np.ndarray], np.ndarray]
                  ) -> ExactSolution:
    """min_(‖u‖ ≤ 1) Σ_i w_i max_a (c_ia + g_iaᵀu) with a duality certificate, and its policy.

    Parameters
    ----------
    c, g : ndarray, shapes (units, A) and (units, A, k_eff)
        θ̂ᵀz (−inf outside range(W)) and R Lᵀz (0 there) of the problem's (averaged) features z.
    valid, norms : ndarray, shape (units, A)
        Whether each z lies in range(W), and ‖z‖ (the smallest is the reference-like action).
    problem : ExactProblem
        The weights w, tolerance and iteration limit, and how the solution is finished.
    center, radius, apply_factor
        θ̂, R and u ↦ L u: the worst-case θ is θ̂ + R L u.
    """
    weights = problem.weights
    m = g.shape[-1]
    scale = float(max(np.abs(c[valid]).max(initial=0.0), row_norms(g).max(initial=0.0)))
    if scale == 0.0 or m == 0 or radius == 0.0:
        probs = np.eye(c.shape[1])[c.argmax(axis=1)]
        value = float(weights @ c.max(axis=1))
        return ExactSolution(probs, center.copy(), Certificate(value, value), PolicyStatus.SOLVED,
                             "set is a point in the identified directions: greedy policy", value)
    reduced = _Reduced(c, g, valid, norms, problem, scale)
    if m <= NEWTON_MAX:
        (cert, u, probs), solver = reduced.smoothed(), NEWTON
    else:
        (cert, u, probs), solver = reduced.first_order()
    theta = center + radius * apply_factor(u)
    rounded = reduced.worst_case(reduced.eye[probs.argmax(axis=1)])
    return problem.finish(probs, theta, cert, reduced.point_values, solver,
                          " (accelerated projected gradients)" if solver != NEWTON else "", rounded)


MINIMAX_SOLVERS["ball"] = solve_reduced
