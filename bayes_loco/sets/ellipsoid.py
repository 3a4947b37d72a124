"""Ellipsoids {θ : (θ − θ̂)ᵀ W (θ − θ̂) ≤ R²}: the paper's Gram set, Wald sets, credible ellipsoids.

The exact objective over an ellipsoid is solved here by smoothing the max and
Newton's method on the ball (docs/design.md, "The exact objective").
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from scipy import linalg, stats
from scipy.linalg import lapack
from scipy.special import logsumexp, softmax

from .._validation import as_float_array, check_finite, check_magnitude, check_memory, check_option
from ..coordinates import RANGE_RTOL, Coordinates
from ..data import SCOPES
from .base import (
    Certificate,
    ExactProblem,
    ExactSolution,
    PolicyStatus,
    check_features,
    check_set_coordinates,
    check_set_level,
)

if TYPE_CHECKING:
    from .value import ValueRadius

# A feature vector with a relative component this large outside range(W) has an
# unbounded worst case: the set is a cylinder along the unidentified directions.
IDENTIFIED_RTOL = 1e-6
# A W of at least this many coordinates is factorised by a pivoted Cholesky decomposition (about k³/3 flops;
# eigh costs about 9k³: 343 s at k = 16,496, PRS at LLM width) when its kept block is well conditioned:
# LAPACK's reciprocal condition estimate above CHOLESKY_RCOND. The pivots below RANGE_RTOL of the largest
# are the unidentified directions, as eigenvalues below it are for eigh, so both find the same set.
CHOLESKY_MIN = 2000
CHOLESKY_RCOND = 1e-8
# The exact objective is solved by Newton's method up to this many identified directions k_eff, above by an
# accelerated projected gradient: at k_eff = 2,080 (PRS, d_φ = 512) Newton took 163 s and 1,048 mixed units,
# the gradient method 6 s to the same certified value (0.197268 against 0.197268).
NEWTON_MAX = 1000
# The policy's ascent stops when the certificate closes, after FIRST_ORDER_MAX_ITER iterations, or when the
# gap has not shrunk by 1% in FIRST_ORDER_STALL of them; the smoothed dual then cuts μ after
# FIRST_ORDER_PATIENCE iterations without progress; up to NEWTON_FALLBACK_MAX directions Newton tries last.
FIRST_ORDER_MAX_ITER = 20_000
FIRST_ORDER_STALL = 100
FIRST_ORDER_PATIENCE = 200
NEWTON_FALLBACK_MAX = 4000
# EllipsoidSet.factored keeps only W's pivoted Cholesky factor, computed in W's memory, from this many
# coordinates on (W of 512 MiB): WaldFit.calibrated_set at LLM width holds one k × k matrix, not two.
FACTORED_MIN = 8192
# Features are whitened by the pivoted Cholesky factor this many bytes at a time.
WHITEN_BLOCK_BYTES = 2**27
# What W and R mean (docs/design.md, "What each set's level means").
KINDS = ("gram", "wald", "credible", "sandwich")
# W must equal Wᵀ to this fraction of its largest entry; it is compared this many rows at a time.
SYMMETRY_RTOL = 1e-8
SYMMETRY_PANEL = 512


@dataclass(frozen=True, eq=False)
class EllipsoidSet:
    """{θ : (θ − θ̂)ᵀ W (θ − θ̂) ≤ R²}, a cylinder along the null space of W.

    Parameters
    ----------
    center : ndarray, shape (k,)
        θ̂.
    precision : ndarray, shape (k, k)
        W, positive semi-definite: a Gram matrix Σ z zᵀ (the paper), a Fisher
        information Σ p̂(1−p̂) z zᵀ (Wald) or an inverse posterior covariance
        (credible).
    radius : float
        R (the paper's C).
    coordinates : Coordinates
    kind : str
        ``"gram"``, ``"wald"``, ``"credible"`` or ``"sandwich"``: what W and R mean
        (docs/design.md, "What each set's level means").
    level : float or None
        Nominal coverage for calibrated kinds; None for the paper's tuned C₂ set,
        which is a penalty, not a confidence set.
    sized_for : {None, "global", "personalised"}
        None: the radius guards θ itself (every direction). A scope: the radius
        guards only the values of that scope's policies on one population
        (:func:`~bayes_loco.sets.size_for_values`); ``level`` is then the
        probability that every such policy's value is at least its
        pessimistic value, and the set no longer covers θ at that level.
    sizing : ValueRadius or None
        How the value-sized radius was found (statistical dimension, draws).
    pivots, cholesky, cholesky_tail, rcond : ndarray, ndarray, ndarray, float, or all None
        W's pivoted Cholesky factor (:class:`PivotedCholesky`'s ``perm``, ``lead``, ``tail`` and
        ``rcond``), for a set that holds it instead of W (``precision`` None; :meth:`factored`,
        from :data:`FACTORED_MIN` coordinates on). None: the set factorises W itself when first
        asked. Plain arrays, so that a file of the set holds them like any other field.
    """

    center: np.ndarray
    precision: np.ndarray | None
    radius: float
    coordinates: Coordinates
    kind: str = "gram"
    level: float | None = None
    sized_for: str | None = None
    sizing: ValueRadius | None = None
    pivots: np.ndarray | None = None
    cholesky: np.ndarray | None = None
    cholesky_tail: np.ndarray | None = None
    rcond: float | None = None
    # solve_exact reduces ExactProblem's features a block at a time, so they may come as FeatureBlocks.
    accepts_feature_blocks: ClassVar[bool] = True

    def __post_init__(self):
        center = as_float_array(self.center, "center", 1)
        k = center.shape[0]
        object.__setattr__(self, "center", center)
        check_set_coordinates(self.coordinates, k, "center")
        _check_description(self.radius, self.kind, self.level, self.sized_for, self.sizing)
        object.__setattr__(self, "radius", float(self.radius))
        factor = (self.pivots, self.cholesky, self.cholesky_tail, self.rcond)
        if any(part is not None for part in factor):
            if any(part is None for part in factor):
                raise TypeError("pivots, cholesky, cholesky_tail and rcond (W's pivoted Cholesky factor) "
                                "must be given together or not at all")
            for name in ("pivots", "cholesky", "cholesky_tail"):
                if not isinstance(getattr(self, name), np.ndarray):
                    raise TypeError(f"{name} must be an array, got {type(getattr(self, name)).__name__}")
            pivoted = PivotedCholesky(*factor)
            pivoted.check(k)
            object.__setattr__(self, "cholesky", pivoted.lead)  # Fortran order, as the solves read it
            # The cached property _cholesky lives in the instance's __dict__: the factor stands in for W.
            self.__dict__["_cholesky"] = pivoted
        if self.precision is None:
            if self.cholesky is None:
                raise TypeError(f"precision (W) must be a ({k}, {k}) array, got NoneType; only a set that "
                                "holds W's pivoted Cholesky factor (cholesky, as EllipsoidSet.factored "
                                "builds) may leave it None")
            return
        if not isinstance(self.precision, np.ndarray):
            raise TypeError(f"precision (W) must be a ({k}, {k}) array, got {type(self.precision).__name__} "
                            "(EllipsoidSet.factored builds a set that holds only W's factor)")
        if self.precision.shape != (k, k):
            raise ValueError(f"precision (W) must have shape ({k}, {k}) to match center, got "
                             f"{self.precision.shape}")
        if self.precision.dtype != np.float64:
            object.__setattr__(self, "precision", as_float_array(self.precision, "precision (W)", 2))
        check_magnitude(self.precision, "precision (W)")
        _check_symmetric(self.precision)
        if self._cholesky is None:
            self._eigen  # noqa: B018 - validates that W is positive semi-definite

    def with_radius(self, radius: float, **changes) -> EllipsoidSet:
        """The same W and centre with radius R (and ``level``, ``sized_for`` or ``sizing`` from ``changes``).

        W's factorisation is shared, not recomputed (``dataclasses.replace`` would
        factorise the k × k W again: minutes at LLM-width k).
        """
        unknown = set(changes) - {"level", "sized_for", "sizing"}
        if unknown:
            raise TypeError(f"with_radius changes only level, sized_for and sizing, got {sorted(unknown)}")
        described = {"level": self.level, "sized_for": self.sized_for, "sizing": self.sizing, **changes}
        _check_description(radius, self.kind, **described)
        new = copy.copy(self)  # the cached factorisation is in the instance's __dict__ and comes along
        for name, value in {"radius": float(radius), **changes}.items():
            object.__setattr__(new, name, value)
        return new

    @classmethod
    def factored(cls, center: np.ndarray, precision: np.ndarray, radius: float, coordinates: Coordinates,
                 **fields) -> EllipsoidSet:
        """The set of W = ``precision`` holding W's pivoted Cholesky factor and not W itself.

        Above :data:`FACTORED_MIN` coordinates the factor is computed in ``precision``'s own memory,
        which is overwritten, and the set's ``precision`` is None: one k × k matrix instead of two
        (2.2 GB each for PRS at LLM width, k = 16,496). Every method works from the factor;
        :meth:`distance` then leaves out W's Schur complement beyond its numerical rank (pivots
        below RANGE_RTOL of the largest), and plots that draw W's eigenvectors refuse the set.
        Below :data:`FACTORED_MIN` this is ``EllipsoidSet(center, precision, radius, coordinates,
        **fields)``, which keeps W. ``fields`` are ``kind``, ``level``, ``sized_for``, ``sizing``.

        Raises
        ------
        numpy.linalg.LinAlgError
            If W's kept block is too ill-conditioned for its Cholesky factor (the eigendecomposition
            that :class:`EllipsoidSet` would fall back on needs W, which is overwritten by then).
        """
        unknown = set(fields) - {"kind", "level", "sized_for", "sizing"}
        if unknown:
            raise TypeError(f"factored takes kind, level, sized_for and sizing, got {sorted(unknown)}")
        center = as_float_array(center, "center", 1)
        k = center.shape[0]
        if k < FACTORED_MIN:
            return cls(center, precision, radius, coordinates, **fields)
        if not isinstance(precision, np.ndarray) or precision.dtype != np.float64:
            raise TypeError(f"precision (W) must be a ({k}, {k}) float64 array, got "
                            f"{getattr(precision, 'dtype', type(precision).__name__)}")
        if precision.shape != (k, k):
            raise ValueError(f"precision (W) must have shape ({k}, {k}) to match center, got "
                             f"{precision.shape}")
        _check_description(radius, fields.get("kind", "gram"), fields.get("level"), fields.get("sized_for"),
                           fields.get("sizing"))
        check_magnitude(precision, "precision (W)")
        _check_symmetric(precision)
        check_memory(8.0 * k**2, f"the Cholesky factor of the {k} x {k} W, beside W",
                     "use fewer coordinates (a lower rank)")
        live = _live_coordinates(precision)
        pivoted = _pivoted_cholesky(precision, live, overwrite=True)
        if pivoted is None:
            raise np.linalg.LinAlgError(
                f"W ({k} x {k}) has no usable pivoted Cholesky factor (its kept block's reciprocal condition "
                f"number is at most {CHOLESKY_RCOND:g}, or W is 0), and W was factorised in its own memory: "
                "build EllipsoidSet(center, W, radius, coordinates), which keeps W and falls back on its "
                f"eigendecomposition ({24.0 * k**2 / 2**30:.1f} GiB more)")
        return cls(center, None, radius, coordinates, pivots=pivoted.perm, cholesky=pivoted.lead,
                   cholesky_tail=pivoted.tail, rcond=pivoted.rcond, **fields)

    @cached_property
    def _live(self) -> np.ndarray:
        """The coordinates whose row or column of W is not exactly 0; the others are outside range(W).

        The MLE baseline's W at 100 x 50 has 4,100 zero rows, and factorising the rest is
        100x cheaper.
        """
        return _live_coordinates(self.precision)

    @cached_property
    def _cholesky(self) -> PivotedCholesky | None:
        """W's pivoted Cholesky factorisation on its live coordinates (set in ``__post_init__`` when the set
        holds one), for a W of at least :data:`CHOLESKY_MIN` coordinates whose kept block is well
        conditioned; else None (eigh is used)."""
        if self.dim < CHOLESKY_MIN:
            return None
        check_memory(16.0 * self.dim**2, f"the Cholesky factor of the {self.dim} x {self.dim} W",
                     "use fewer coordinates (a lower rank)")
        return _pivoted_cholesky(self.precision, self._live, overwrite=False)

    @cached_property
    def _eigen(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """W's eigenvalues on its range, their eigenvectors on the live coordinates, and those coordinates.

        The rows of W that are exactly 0 (:attr:`_live` leaves them out) are eigenvectors of eigenvalue
        0, outside the range.
        """
        sym = 0.5 * (self.precision + self.precision.T)
        live = self._live
        # eigh holds the matrix, its eigenvectors and a workspace of about the same size.
        check_memory(24.0 * live.size**2, f"the eigendecomposition of the {live.size} x {live.size} W",
                     "use fewer coordinates (a lower rank)")
        vals, vecs = np.linalg.eigh(sym if live.size == self.dim else sym[np.ix_(live, live)])
        if not vals.size:
            return vals, vecs, live
        top = max(vals.max(), np.finfo(float).tiny)
        if vals.min() < -1e-8 * top:
            raise ValueError(f"precision (W) must be positive semi-definite; its smallest eigenvalue is "
                             f"{vals.min():.3g} against a largest of {top:.3g}")
        keep = vals > RANGE_RTOL * top
        return vals[keep], vecs[:, keep], live

    @property
    def dim(self) -> int:
        return self.center.shape[0]

    @property
    def effective_dim(self) -> int:
        """k_eff = rank of W: the directions some comparison reaches."""
        return self._cholesky.rank if self._cholesky is not None else self._eigen[0].shape[0]

    @property
    def condition_number(self) -> float:
        """Largest over smallest eigenvalue of W on its range (the identified directions).

        Where W is factorised by Cholesky (:data:`CHOLESKY_MIN`), LAPACK's estimate of
        its 1-norm condition number instead, within a factor k of the eigenvalue ratio.
        """
        if self._cholesky is not None:
            return 1.0 / self._cholesky.rcond
        vals = self._eigen[0]
        return float(vals.max() / vals.min()) if vals.size else np.nan

    @cached_property
    def factor(self) -> np.ndarray:
        """L (k × k_eff) with θ = θ̂ + R L u, ‖u‖ ≤ 1 spanning the set within range(W)."""
        if self._cholesky is not None:
            return self._cholesky.factor(self.dim)
        vals, vecs, live = self._eigen
        factor = np.zeros((self.dim, vals.size))
        factor[live] = vecs / np.sqrt(vals)
        return factor

    def _split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """‖z‖_{W⁻¹} and whether z lies in range(W), from one product with W's eigenvectors."""
        if self._cholesky is not None:
            return self._cholesky.split(z)
        vals, vecs, live = self._eigen
        zq = (z if live.size == self.dim else z[..., live]) @ vecs
        total = np.einsum("...i,...i->...", z, z)
        # ‖z − QQᵀz‖² = ‖z‖² − ‖Qᵀz‖² for orthonormal Q: one GEMM instead of two.
        outside = total - np.einsum("...i,...i->...", zq, zq)
        return np.linalg.norm(zq / np.sqrt(vals), axis=-1), outside <= IDENTIFIED_RTOL**2 * total

    def _whitened(self, z: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Lᵀz (…, k_eff), so that z₁ᵀW⁺z₂ = (Lᵀz₁)ᵀ(Lᵀz₂) in range(W), and whether z lies there.

        With the pivoted Cholesky factor these are triangular solves (L is never formed). ``out``
        receives Lᵀz when given.
        """
        if self._cholesky is not None:
            return self._cholesky.whitened(z, out)
        return np.matmul(z, self.factor, out=out), self.identified(z)

    def _reduced(self, problem: ExactProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """c = θ̂ᵀz (−inf outside range(W)), g = R Lᵀz (0 there), whether each z is in range(W) and ‖z‖,
        made from the problem's features a block of units at a time: V(θ̂ + R L u) = Σ_u w_u max_a
        (c_ua + g_uaᵀu), and z itself is never needed again."""
        c = g = valid = norms = None
        for lo, hi, z in problem.blocks():
            if g is None:
                shape = (problem.weights.shape[0], z.shape[1])
                g = np.empty((*shape, self.effective_dim))
                c, norms, valid = np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool)
            _, valid[lo:hi] = self._whitened(z, g[lo:hi])
            c[lo:hi] = np.where(valid[lo:hi], z @ self.center, -np.inf)
            norms[lo:hi] = _row_norms(z)
        g *= self.radius
        g[~valid] = 0.0
        return c, g, valid, norms

    def _apply_factor(self, u: np.ndarray) -> np.ndarray:
        """L u for one u (k_eff,): a point θ̂ + R L u of the set's boundary when ‖u‖ = 1."""
        if self._cholesky is not None:
            return self._cholesky.apply(u, self.dim)
        return self.factor @ u

    def identified(self, z: np.ndarray) -> np.ndarray:
        """Whether each z lies in range(W), so that its worst case is finite."""
        return self._split(check_features(z, self.dim))[1]

    def dual_norm(self, z: np.ndarray) -> np.ndarray:
        """‖z‖_{W⁻¹} (pseudo-inverse), the width of the set along z per unit radius."""
        return self._split(check_features(z, self.dim))[0]

    def coordinate_widths(self) -> np.ndarray:
        """‖e_i‖_{W⁻¹} of each coordinate axis e_i, inf where e_i leaves range(W).

        For a Wald set (W the Fisher information) these are the standard errors of
        the coordinates; inf marks a coordinate that no comparison identifies.
        """
        width, inside = self._split(np.eye(self.dim))
        return np.where(inside, width, np.inf)

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """θ̂ᵀz − R‖z‖_{W⁻¹}; −inf where z leaves range(W) (the set is unbounded along null(W))."""
        z = check_features(z, self.dim)
        width, inside = self._split(z)
        return np.where(inside, z @ self.center - self.radius * width, -np.inf)

    def distance(self, theta: np.ndarray) -> np.ndarray:
        """‖θ − θ̂‖_W for θ of shape (…, k) (from W's factor where the set holds no W: :meth:`factored`)."""
        d = check_features(theta, self.dim, "theta") - self.center
        if self.precision is None:
            return self._cholesky.norm(d)
        return np.sqrt(np.maximum(np.einsum("...i,ij,...j->...", d, self.precision, d), 0.0))

    def contains(self, theta: np.ndarray) -> np.ndarray:
        """Whether θ (…, k) lies in the set."""
        return self.distance(theta) <= self.radius * (1 + 1e-12)

    def solve_exact(self, problem: ExactProblem) -> ExactSolution:
        """min_{‖u‖ ≤ 1} V(θ̂ + R L u), with a duality certificate.

        V(θ̂ + R L u) = Σ_i w_i max_a (c_ia + g_iaᵀ u) with c = θ̂ᵀz and g = R Lᵀz, so the optimal
        pessimistic value is max_π Σ_i w_i Σ_a π_ia c_ia − ‖Σ_i w_i Σ_a π_ia g_ia‖ over stochastic
        policies π. Up to :data:`NEWTON_MAX` identified directions the max is smoothed by
        μ·logsumexp(·/μ); for each μ, Newton solves min F_μ(u) + (λ/2)‖u‖² and a secant search on λ
        puts u on the unit sphere (the KKT point of the ball-constrained problem). At that point the
        softmax weights π are a stochastic policy whose pessimistic value is within μ·(mean entropy
        of π) of F_μ(u) ≥ V(u), so μ is cut until the certificate closes. Above, where Newton's
        k_eff × k_eff systems cost minutes each, an accelerated projected gradient ascent on π
        (:func:`_accelerated`) closes the same certificate, and where it cannot (a zero optimum)
        accelerated gradients on the smoothed dual (:func:`_smoothed_accelerated`) do; the better
        bound of either is kept. Candidates with a component outside
        range(W) have an unbounded worst case and get probability 0.
        """
        weights = problem.weights
        c, g, valid, norms = self._reduced(problem)
        m = g.shape[-1]
        n_units, n_actions = c.shape
        scale = float(max(np.abs(c[valid]).max(initial=0.0), _row_norms(g).max(initial=0.0)))
        if scale == 0.0 or m == 0 or self.radius == 0.0:
            probs = np.eye(n_actions)[c.argmax(axis=1)]
            value = float(weights @ c.max(axis=1))
            return ExactSolution(probs, self.center.copy(), Certificate(value, value), PolicyStatus.SOLVED,
                                 "set is a point in the identified directions: greedy policy", value)

        # The action nearest the reference (z = 0 for the reference itself) has worst case 0.
        baseline = np.zeros((n_units, n_actions))
        baseline[np.arange(n_units), norms.argmin(axis=1)] = 1.0
        point_values = np.where(valid, c, 0.0)

        def worst_case(probs):
            """Σ w π c − ‖Σ w π g‖ = θ̂ᵀm(π) − R‖m(π)‖_{W⁺}: :meth:`ExactProblem.worst_case` without z."""
            if np.any(probs[~valid] > 0):
                return -np.inf
            mass = weights[:, None] * probs
            return float(np.sum(mass * point_values) - np.linalg.norm(mass.reshape(-1) @ g.reshape(-1, m)))

        def certify(u, probs):
            """Upper bound V(u) and the best pessimistic value among π, its rounding and the baseline."""
            u = u / max(1.0, float(np.linalg.norm(u)))
            upper = float(weights @ (c + g @ u).max(axis=1))
            rounded = np.eye(n_actions)[probs.argmax(axis=1)]
            candidates = [(worst_case(p), p) for p in (probs, rounded, baseline)]
            lower, probs = max(candidates, key=lambda item: item[0])
            return Certificate(lower, upper), u, probs

        def smoothed():
            u, lam, best, mu = np.zeros(m), None, None, 0.01 * scale
            for _ in range(12):
                u, lam, probs = _smoothed_ball_minimum(c, g, weights, mu, u, lam, problem.max_iter)
                cert, u_feasible, chosen = certify(u, probs)
                if best is None or cert.gap < best[0].gap:
                    best = (cert, u_feasible, chosen)
                if problem.closed(cert, point_values):
                    break
                mu *= 0.1
            return best

        newton = "the ellipsoid's smoothing solver (it certifies to about 1e-7 relative; ask for no less)"
        if m <= NEWTON_MAX:
            (cert, u, probs), solver = smoothed(), newton
        else:
            solver = "the accelerated projected gradients"
            cert, u, probs = certify(*_accelerated(c, g, weights, valid, problem, point_values))
            # Where the optimum is the reference action's 0, the policy's iterates give no dual point that
            # certifies it (v → 0); the smoothed dual's iterates do. Both bounds hold whoever found them.
            if not problem.closed(cert, point_values):
                dual, u_dual, probs_dual = certify(*_smoothed_accelerated(c, g, weights, valid, problem,
                                                                          point_values, scale, u,
                                                                          (cert.lower, probs)))
                best = _Bounds(problem, point_values)
                best.update(cert.lower, probs, cert.upper, u)
                best.update(dual.lower, probs_dual, dual.upper, u_dual)
                cert, u, probs = Certificate(best.lower, best.upper), best.u, best.probs
            if not problem.closed(cert, point_values) and m <= NEWTON_FALLBACK_MAX:
                second = smoothed()
                if second[0].gap < cert.gap:
                    (cert, u, probs), solver = second, newton
        theta = self.center + self.radius * self._apply_factor(u)
        rounded = worst_case(np.eye(n_actions)[probs.argmax(axis=1)])
        return problem.finish(probs, theta, cert, point_values, solver,
                              " (accelerated projected gradients)" if solver != newton else "", rounded)

    def __repr__(self) -> str:
        lvl = "" if self.level is None else f", level={self.level:g}"
        sized = "" if self.sized_for is None else f", sized_for={self.sized_for!r}"
        return (f"EllipsoidSet(kind={self.kind!r}, k={self.dim}, k_eff={self.effective_dim}, "
                f"radius={self.radius:.4g}{lvl}{sized})")


def chi_radius(level: float, dim: int) -> float:
    """√χ²_dim(level): the radius of a Gaussian ellipsoid of probability ``level`` in ``dim`` dimensions."""
    return float(np.sqrt(stats.chi2.ppf(level, dim)))


def wald_set(center: np.ndarray, information: np.ndarray, level: float,
             coordinates: Coordinates, *, overwrite: bool = False) -> EllipsoidSet:
    """Asymptotic Wald set {θ : (θ − θ̂)ᵀ I (θ − θ̂) ≤ χ²_{k_eff}(level)}, k_eff = rank I.

    With ``overwrite`` the set may factorise ``information`` in its own memory and keep only the
    factor (:meth:`EllipsoidSet.factored`, from :data:`FACTORED_MIN` coordinates on).
    """
    build = EllipsoidSet.factored if overwrite else EllipsoidSet
    unit = build(center, information, 1.0, coordinates, kind="wald", level=level)
    return unit.with_radius(chi_radius(level, unit.effective_dim))


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


def _leading_lower(chol: np.ndarray, rank: int) -> np.ndarray:
    """The lower triangle of chol[:rank, :rank] as a contiguous array in chol's own memory (chol is
    Fortran-ordered and is overwritten): no second k × k array (2.2 GB at LLM width)."""
    n = chol.shape[0]
    flat = chol.reshape(-1, order="F")
    for j in range(rank):
        column = flat[j * n: j * n + rank]
        column[:j] = 0.0
        flat[j * rank: (j + 1) * rank] = column  # numpy buffers the overlapping copy
    return flat[: rank * rank].reshape(rank, rank, order="F")


def _accelerated(c, g, weights, valid, problem: ExactProblem, point_values) -> tuple[np.ndarray, np.ndarray]:
    """Maximise f(π) = Σ_i w_i π_i·c_i − ‖Σ_i w_i Σ_a π_ia g_ia‖ over stochastic policies (FISTA).

    f is concave; each evaluation gives a lower bound f(π), the worst-case direction
    u = −v/‖v‖ (v = Σ w π g) and with it the upper bound V(u) = Σ_i w_i max_a (c_ia + g_iaᵀu), so
    the gap is certified as the ascent goes. Steps are projections onto each unit's simplex of
    valid actions in the metric Σ_i w_i ‖·‖² (so a unit's step does not depend on its weight),
    with backtracking on the curvature L and an adaptive restart of the momentum when f drops
    (O'Donoghue and Candès). An evaluation reads g twice: at k_eff = 16,416 (PRS at LLM width)
    it replaces Newton systems of that size. Returns the best u and the best π found.
    """
    n_units, n_actions = c.shape
    flat = g.reshape(n_units * n_actions, -1)
    finite = np.where(valid, c, 0.0)

    def evaluate(probs):
        v = (weights[:, None] * probs).ravel() @ flat
        norm = float(np.linalg.norm(v))
        u = -v / norm if norm > 0 else np.zeros_like(v)
        scores = c + (flat @ u).reshape(n_units, n_actions)
        return float(weights @ np.sum(probs * finite, axis=1)) - norm, scores, u

    def project(y):
        return _simplex_projection(np.where(valid, y, -1e30))

    relaxed = np.where(valid, c - _row_norms(g), -np.inf)
    probs = np.eye(n_actions)[relaxed.argmax(axis=1)]
    value, scores, u = evaluate(probs)
    best = _Bounds(problem, point_values)
    best.update(value, probs, float(weights @ scores.max(axis=1)), u)
    y, y_value, y_scores, t, curvature = probs, value, scores, 1.0, 1.0
    stalled = (np.inf, 0)
    for iteration in range(FIRST_ORDER_MAX_ITER):
        slope = np.where(valid, y_scores, 0.0)
        while True:
            new = project(y + slope / curvature)
            step = new - y
            new_value, new_scores, new_u = evaluate(new)
            model = (y_value + float(weights @ np.sum(slope * step, axis=1))
                     - 0.5 * curvature * float(weights @ np.sum(step * step, axis=1)))
            if new_value >= model - 1e-12 * max(1.0, abs(y_value)):
                break
            curvature *= 2.0
        if best.update(new_value, new, float(weights @ new_scores.max(axis=1)), new_u):
            break
        if best.gap < 0.99 * stalled[0]:
            stalled = (best.gap, iteration)
        elif iteration - stalled[1] >= FIRST_ORDER_STALL:
            break
        if iteration >= FIRST_ORDER_STALL // 5 and best.lower <= 0.0:
            break  # no policy beats the reference action's 0 yet: the smoothed dual certifies such optima
        if new_value < value:  # momentum overshot: restart from the last point
            t = 1.0
        following = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = project(new + ((t - 1.0) / following) * (new - probs))
        probs, value, t = new, new_value, following
        y_value, y_scores, _ = evaluate(y)
        curvature *= 0.9
    return best.u, best.probs


def _smoothed_accelerated(c, g, weights, valid, problem: ExactProblem, point_values, scale: float,
                          u: np.ndarray, known: tuple[float, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Minimise the smoothed dual F_μ(u) = μ Σ_i w_i logsumexp((c_i + g_i u)/μ) over the unit ball (FISTA).

    F_μ ≥ V, and at each iterate u the softmax weights π are a policy whose pessimistic value
    f(π) = Σ w π·c − ‖Σ w π g‖ uses the gradient Σ w π g already computed: both bounds for one
    evaluation, as for :func:`_accelerated`. μ starts at 1% of the problem's scale and is cut by
    0.3 (momentum restarted) when the smoothing F_μ(u) − V(u) is more than half the gap, or the
    upper bound has not improved by 1% of the gap in :data:`FIRST_ORDER_PATIENCE` iterations.
    This certifies a zero optimum (the reference action everywhere), where the policy's iterates
    cannot. ``known`` is the best lower bound found before and its policy (the reference action's 0
    among them): the iterates' softmax policies approach it only as μ → 0, while V(u) reaches it
    first (at d_φ = 2048, k_eff = 8,224: V(u) = 0 after 70 iterations, the softmax bound −2·10⁻⁵
    after 320). Returns the best u and π.
    """
    n_units, n_actions = c.shape
    flat = g.reshape(n_units * n_actions, -1)
    finite = np.where(valid, c, 0.0)

    def evaluate(point, mu):
        scores = c + (flat @ point).reshape(n_units, n_actions)
        probs = softmax(scores / mu, axis=1)
        moment = flat.T @ (weights[:, None] * probs).ravel()
        return mu * float(weights @ logsumexp(scores / mu, axis=1)), moment, scores, probs

    def ball(point):
        return point / max(1.0, float(np.linalg.norm(point)))

    mu = 0.01 * scale
    curvature, t, y = 1.0 / mu, 1.0, u
    best, improved = _Bounds(problem, point_values), (np.inf, 0)
    best.update(*known, np.inf, u)
    best.u = u
    for iteration in range(FIRST_ORDER_MAX_ITER):
        y_value, y_slope, _, _ = evaluate(y, mu)
        while True:
            new = ball(y - y_slope / curvature)
            step = new - y
            new_value, moment, scores, probs = evaluate(new, mu)
            if new_value <= y_value + y_slope @ step + 0.5 * curvature * step @ step + 1e-12 * abs(y_value):
                break
            curvature *= 2.0
        upper = float(weights @ scores.max(axis=1))
        lower = float(weights @ np.sum(probs * finite, axis=1)) - float(np.linalg.norm(moment))
        if best.update(lower, probs, upper, new):
            break
        if best.upper < improved[0] - 0.01 * (improved[0] - best.lower):
            improved = (best.upper, iteration)
        # Cut μ when the smoothing (F_μ − V ≤ μ log A) is most of the gap, or progress has stalled.
        smoothing_dominates = new_value - upper > 0.5 * best.gap
        if smoothing_dominates or iteration - improved[1] >= FIRST_ORDER_PATIENCE:
            mu *= 0.3
            curvature, t, y, improved = curvature / 0.3, 1.0, new, (best.upper, iteration)
            continue
        following = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = ball(new + ((t - 1.0) / following) * (new - u))
        u, t = new, following
        curvature *= 0.9
    return best.u, best.probs


class _Bounds:
    """The best lower bound (with its policy) and upper bound (with its dual point u) found so far."""

    def __init__(self, problem: ExactProblem, point_values: np.ndarray):
        self.problem, self.point_values = problem, point_values
        self.lower, self.probs, self.upper, self.u = -np.inf, None, np.inf, None

    @property
    def gap(self) -> float:
        return self.upper - self.lower

    def update(self, lower: float, probs: np.ndarray, upper: float, u: np.ndarray) -> bool:
        """Keep the better of each bound; whether the certificate has closed."""
        if lower > self.lower:
            self.lower, self.probs = lower, probs
        if upper < self.upper:
            self.upper, self.u = upper, u
        return self.problem.closed(Certificate(self.lower, self.upper), self.point_values)


def _row_norms(a: np.ndarray) -> np.ndarray:
    """‖a_i‖ over the last axis, :data:`WHITEN_BLOCK_BYTES` at a time (np.linalg.norm squares all of a at
    once: a temporary of a's size, 2.5 GB for LLM-width candidates). The same numbers, row by row."""
    if not a.shape[-1]:
        return np.zeros(a.shape[:-1])
    flat = a.reshape(-1, a.shape[-1])
    out = np.empty(flat.shape[0])
    rows = max(1, WHITEN_BLOCK_BYTES // (8 * flat.shape[1]))
    for lo in range(0, flat.shape[0], rows):
        out[lo: lo + rows] = np.linalg.norm(flat[lo: lo + rows], axis=-1)
    return out.reshape(a.shape[:-1])


def _simplex_projection(y: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of y onto the probability simplex (by sorting)."""
    ranked = -np.sort(-y, axis=1)
    excess = np.cumsum(ranked, axis=1) - 1.0
    count = np.arange(1, y.shape[1] + 1)
    last = y.shape[1] - 1 - np.argmax((ranked - excess / count > 0)[:, ::-1], axis=1)
    shift = excess[np.arange(y.shape[0]), last] / (last + 1)
    return np.maximum(y - shift[:, None], 0.0)


def _live_coordinates(precision: np.ndarray) -> np.ndarray:
    """The coordinates whose row or column of W is not exactly 0."""
    nonzero = precision != 0
    return np.flatnonzero(np.any(nonzero, axis=0) | np.any(nonzero, axis=1))


def _check_description(radius, kind, level, sized_for, sizing) -> None:
    """The radius, kind, level, scope and sizing of an ellipsoid, or one error naming the wrong one."""
    from .value import ValueRadius  # value.py builds on this module

    radius = check_finite(radius, "radius")
    if radius < 0:
        raise ValueError(f"radius must be finite and >= 0, got {radius}")
    check_option(kind, "kind", KINDS)
    check_set_level(level, allow_none=True)
    if sized_for is not None:
        check_option(sized_for, "sized_for", SCOPES)
    if sizing is not None and not isinstance(sizing, ValueRadius):
        raise TypeError(f"sizing must be a ValueRadius or None, got {type(sizing).__name__}")


def _check_symmetric(precision: np.ndarray) -> None:
    """Refuse a W that differs from Wᵀ by more than :data:`SYMMETRY_RTOL` of its largest entry.

    By panels of :data:`SYMMETRY_PANEL` rows against the matching columns: no k × k temporary.
    """
    k = precision.shape[0]
    top = max(float(precision.max()), -float(precision.min()), np.finfo(float).tiny)
    for lo in range(0, k, SYMMETRY_PANEL):
        hi = min(lo + SYMMETRY_PANEL, k)
        gap = np.abs(precision[lo:hi] - precision[:, lo:hi].T)
        if float(gap.max()) > SYMMETRY_RTOL * top:
            i, j = np.unravel_index(int(gap.argmax()), gap.shape)
            i = lo + int(i)
            raise ValueError(f"precision (W) must be symmetric: W[{i}, {j}] = {precision[i, j]:.6g} but "
                             f"W[{j}, {i}] = {precision[j, i]:.6g}; pass (W + W.T) / 2 if the difference is "
                             "rounding")


def _pivoted_cholesky(precision: np.ndarray, live: np.ndarray, overwrite: bool) -> PivotedCholesky | None:
    """W's pivoted Cholesky factorisation on its ``live`` coordinates; None where W is 0 there or its
    kept block's reciprocal condition number is at most :data:`CHOLESKY_RCOND`.

    With ``overwrite`` and every coordinate live, the factor is computed in W's own memory.
    """
    if not live.size:
        return None
    if live.size < precision.shape[0]:
        block = precision[np.ix_(live, live)]
    else:
        block = precision if overwrite else precision.copy()
    norm = max(float(np.abs(block[:, lo: lo + 512]).sum(axis=0).max()) for lo in range(0, live.size, 512))
    diagonal = np.diag(block).copy()
    top = float(np.max(diagonal))
    # W is symmetric, so block or block.T, whichever is Fortran-ordered, is W as LAPACK reads it, and it is
    # factorised in place without a copy. dpstrf reads and writes its lower triangle only: the strict upper
    # one keeps W.
    fortran = block if block.flags.f_contiguous else block.T
    chol, perm, rank, info = lapack.dpstrf(fortran, lower=1, tol=RANGE_RTOL * max(top, 0.0), overwrite_a=1)
    if info < 0 or rank == 0:
        return None
    dropped = perm[rank:] - 1
    rest = fortran[np.minimum.outer(dropped, dropped), np.maximum.outer(dropped, dropped)]
    rest[np.diag_indices_from(rest)] = diagonal[dropped]
    perm = live[perm - 1]
    tail = chol[rank:, :rank].copy()
    lead = _leading_lower(chol, rank)
    # The 1-norm of W bounds its kept block's, so this underestimates that block's rcond: conservative.
    rcond, info = lapack.dpocon(lead, norm, uplo="L")
    if info != 0 or rcond <= CHOLESKY_RCOND:
        return None
    if rank < live.size:  # W is PSD iff the Schur complement of the kept block is (Haynsworth)
        low = float(np.linalg.eigvalsh(rest - tail @ tail.T).min())
        if low < -1e-8 * top:
            raise ValueError(f"precision (W) must be positive semi-definite; the Schur complement of its "
                             f"pivoted Cholesky factor has an eigenvalue {low:.3g} against a largest "
                             f"diagonal of {top:.3g}")
    return PivotedCholesky(perm, lead, tail, float(rcond))


@dataclass(frozen=True, eq=False)
class PivotedCholesky:
    """W restricted to its live coordinates, pivoted: P B Bᵀ Pᵀ with B = [C₁; C₂] and C₁ lower triangular
    (LAPACK's dpstrf).

    ``perm`` lists the live coordinates in pivot order. z lies in range(W) exactly when it is 0 off
    them and its permuted tail equals C₂a with a = C₁⁻¹(its permuted head); then ‖z‖_{W⁺} = ‖a‖,
    because Bᵀ(BBᵀ)⁺B = I for B of full column rank.

    Attributes
    ----------
    perm : ndarray of int, shape (live,)
        The live coordinates in pivot order.
    lead : ndarray, shape (rank, rank)
        C₁, lower triangular with a positive diagonal (its upper triangle is never read).
    tail : ndarray, shape (live − rank, rank)
        C₂.
    rcond : float
        LAPACK's estimate of C₁C₁ᵀ's reciprocal condition number, in (0, 1].
    """

    perm: np.ndarray
    lead: np.ndarray
    tail: np.ndarray
    rcond: float

    def __post_init__(self):
        # solve_triangular reads C₁ in Fortran order without a transposed solve: a factor loaded from a file
        # (C order) then gives the same numbers, bit for bit, as the one dpstrf wrote.
        if isinstance(self.lead, np.ndarray) and not self.lead.flags.f_contiguous:
            object.__setattr__(self, "lead", np.asfortranarray(self.lead))

    def check(self, dim: int) -> None:
        """Refuse a factor that cannot be W's for ``dim`` coordinates, naming the wrong field (O(k²))."""
        perm = np.asarray(self.perm)
        if perm.ndim != 1 or perm.dtype.kind not in "iu" or perm.size == 0:
            raise ValueError(f"pivots must be a non-empty 1-d integer array, got {perm.dtype} "
                             f"{perm.shape}")
        if perm.min() < 0 or perm.max() >= dim or np.unique(perm).size != perm.size:
            raise ValueError(f"pivots must list distinct coordinates in [0, {dim - 1}]")
        lead, tail = self.lead, self.tail
        square = isinstance(lead, np.ndarray) and lead.ndim == 2 and lead.shape[0] == lead.shape[1]
        if not square or not lead.size:
            raise ValueError(f"cholesky must be a square (rank, rank) array, got shape {np.shape(lead)}")
        rank = lead.shape[0]
        if not isinstance(tail, np.ndarray) or tail.shape != (perm.size - rank, rank):
            raise ValueError(f"cholesky_tail must have shape ({perm.size - rank}, {rank}) (live coordinates "
                             f"beyond the rank x rank), got {np.shape(tail)}")
        check_magnitude(lead, "cholesky")
        check_magnitude(tail, "cholesky_tail")
        if not np.all(np.diag(lead) > 0):
            raise ValueError("cholesky must have a positive diagonal (a Cholesky factor)")
        rcond = self.rcond
        if isinstance(rcond, bool) or not isinstance(rcond, numbers.Real) or not 0 < rcond <= 1:
            raise ValueError(f"rcond must be in (0, 1], got {self.rcond!r}")

    @property
    def rank(self) -> int:
        return self.lead.shape[0]

    def split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """‖z‖_{W⁺} and whether z lies in range(W) (see the class docstring)."""
        a, inside = self.whitened(z)
        return np.linalg.norm(a, axis=-1), inside

    def whitened(self, z: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """a = C₁⁻¹(permuted head of z) (…, rank), which is Lᵀz for z in range(W), and whether z is there.

        :data:`WHITEN_BLOCK_BYTES` of z at a time: its permuted copy is the only temporary. ``out``
        (…, rank), C-contiguous, receives a when given.
        """
        flat = z.reshape(-1, z.shape[-1])
        result = np.empty((*z.shape[:-1], self.rank)) if out is None else out
        out = np.reshape(result, (flat.shape[0], self.rank), copy=False)  # raises rather than copy
        inside = np.empty(flat.shape[0], dtype=bool)
        rows = max(1, WHITEN_BLOCK_BYTES // (8 * flat.shape[1]))
        for lo in range(0, flat.shape[0], rows):
            block = flat[lo: lo + rows]
            live = block[:, self.perm]
            head = linalg.solve_triangular(self.lead, live[:, : self.rank].T, lower=True)
            total = np.einsum("ij,ij->i", block, block)
            outside = total - np.einsum("ij,ij->i", live, live)  # the part on coordinates W never reaches
            if self.tail.shape[0]:
                gap = live[:, self.rank:].T - self.tail @ head
                outside = outside + np.einsum("ij,ij->j", gap, gap)
            inside[lo: lo + rows] = outside <= IDENTIFIED_RTOL**2 * total
            out[lo: lo + rows] = head.T
        return result, inside.reshape(z.shape[:-1])

    def norm(self, d: np.ndarray) -> np.ndarray:
        """‖Bᵀ(permuted d)‖ = ‖d‖_W up to W's Schur complement beyond the kept block, for d (…, dim)."""
        live = d[..., self.perm]
        product = live[..., : self.rank] @ self.lead
        if self.tail.shape[0]:
            product += live[..., self.rank:] @ self.tail
        return np.linalg.norm(product, axis=-1)

    def apply(self, u: np.ndarray, dim: int) -> np.ndarray:
        """L u (dim,) for L of :meth:`factor`, by one triangular solve instead of forming L."""
        top = linalg.solve_triangular(self.lead, u, lower=True, trans="T")
        out = np.zeros(dim)
        if self.tail.shape[0]:
            h = self._dropped
            top = top - h.T @ linalg.solve(np.eye(h.shape[0]) + h @ h.T, h @ top, assume_a="pos")
            out[self.perm[self.rank:]] = h @ top
        out[self.perm[: self.rank]] = top
        return out

    @cached_property
    def _dropped(self) -> np.ndarray:
        """H = C₂C₁⁻¹: the dropped rows of the factor in terms of the kept ones."""
        return linalg.solve_triangular(self.lead, self.tail.T, lower=True, trans="T").T

    def factor(self, dim: int) -> np.ndarray:
        """L (dim × rank) with L Lᵀ = W⁺, rows un-pivoted: L = B (BᵀB)⁻¹.

        With H = C₂C₁⁻¹ (the few dropped rows), BᵀB = C₁ᵀ(I + HᵀH)C₁, so by the push-through
        identity L = [I; H] (I − Hᵀ(I + HHᵀ)⁻¹H) C₁⁻ᵀ: one triangular inverse and products with
        H, where forming BᵀB would cost k·rank² more (C₁⁻ᵀ alone when W is definite).
        """
        inverse, _ = lapack.dtrtri(self.lead, lower=1)
        top = inverse.T
        if self.tail.shape[0]:
            h = self._dropped
            inner = np.eye(h.shape[0]) + h @ h.T
            top -= h.T @ linalg.solve(inner, h @ top, assume_a="pos")
        out = np.zeros((dim, self.rank))
        out[self.perm[: self.rank]] = top
        if self.tail.shape[0]:
            out[self.perm[self.rank:]] = h @ top
        return out
