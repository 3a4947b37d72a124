"""Ellipsoids {θ : (θ − θ̂)ᵀ W (θ − θ̂) ≤ R²}: the paper's Gram set, Wald sets, credible ellipsoids.

The set holds the geometry (W's factor, widths, membership) and reduces the exact objective to
(c, g); the solver the problem names (``ExactProblem.solver``, one of bayes_loco/solvers/'s SOLVERS)
solves that minimax (docs/design.md, "The exact objective"): the sets never import the solvers.
bayes_loco/linalg.py holds the range rules and the pivoted Cholesky factor.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from .._validation import as_float_array, check_magnitude, check_memory, check_real
from ..config import get_config
from ..coordinates import Coordinates
from ..linalg import (
    PivotedCholesky,
    canonical_signs,
    in_range,
    live_coordinates,
    pivoted_cholesky,
    range_mask,
    row_norms,
)
from .base import ExactProblem, ExactSolution, ValueRadius, check_features, check_set_coordinates
from .description import check_description, check_factored, check_symmetric, chi_radius


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
        from ``config["factored_min"]`` coordinates on). None: the set factorises W itself when first
        asked. Plain arrays, so that a file of the set holds them like any other field.

    Examples
    --------
    >>> fit.calibrated_set(0.9)                       # PRS's 90% Wald set
    EllipsoidSet(kind='wald', k=16, k_eff=8, radius=3.655, level=0.9)
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
        check_description(self.radius, self.kind, self.level, self.sized_for, self.sizing)
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
        check_symmetric(self.precision)
        if self._cholesky is None:
            self._eigen  # noqa: B018 - validates that W is positive semi-definite

    def with_radius(self, radius: float, **changes) -> EllipsoidSet:
        """The same W and centre with radius R (and ``level``, ``sized_for`` or ``sizing`` from ``changes``).

        W's factorisation is shared, not recomputed (``dataclasses.replace`` would
        factorise the k × k W again: minutes at LLM-width k).

        Parameters
        ----------
        radius : float
        **changes
            ``level``, ``sized_for`` or ``sizing``, as in the class.

        Returns
        -------
        EllipsoidSet

        Examples
        --------
        >>> fit.calibrated_set(0.9).with_radius(7.31, level=None)   # twice as wide: no longer a 90% set
        EllipsoidSet(kind='wald', k=16, k_eff=8, radius=7.31)
        """
        unknown = set(changes) - {"level", "sized_for", "sizing"}
        if unknown:
            raise TypeError(f"with_radius changes only level, sized_for and sizing, got {sorted(unknown)}")
        described = {"level": self.level, "sized_for": self.sized_for, "sizing": self.sizing, **changes}
        check_description(radius, self.kind, **described)
        new = copy.copy(self)  # the cached factorisation is in the instance's __dict__ and comes along
        for name, value in {"radius": float(radius), **changes}.items():
            object.__setattr__(new, name, value)
        return new

    @classmethod
    def factored(cls, center: np.ndarray, precision: np.ndarray, radius: float, coordinates: Coordinates,
                 **fields) -> EllipsoidSet:
        """The set of W = ``precision`` holding W's pivoted Cholesky factor and not W itself.

        Above ``config["factored_min"]`` coordinates the factor is computed in ``precision``'s own memory,
        which is overwritten, and the set's ``precision`` is None: one k × k matrix instead of two
        (2.2 GB each for PRS at LLM width, k = 16,496). Every method works from the factor;
        :meth:`distance` then leaves out W's Schur complement beyond its numerical rank (pivots
        below ``config["range_rtol"]`` of the largest), and plots that draw W's eigenvectors refuse the set.
        Below ``config["factored_min"]`` this is ``EllipsoidSet(center, precision, radius, coordinates,
        **fields)``, which keeps W. ``fields`` are ``kind``, ``level``, ``sized_for``, ``sizing``.

        Parameters
        ----------
        center, precision, radius, coordinates, **fields
            As in the class; ``precision`` must be float64.

        Returns
        -------
        EllipsoidSet

        Examples
        --------
        >>> W = np.diag([4.0, 1.0, 0.0])   # 3 coordinates, below config["factored_min"]: the set keeps W
        >>> bl.EllipsoidSet.factored(np.zeros(3), W.copy(), 1.0, bl.VecCoordinates(1, 3)).precision is None
        False

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
        if k < get_config()["factored_min"]:
            return cls(center, precision, radius, coordinates, **fields)
        check_factored(precision, k, radius, fields)
        live = live_coordinates(precision)
        pivoted = pivoted_cholesky(precision, live, overwrite=True)
        if pivoted is None:
            raise np.linalg.LinAlgError(
                f"W ({k} x {k}) has no usable pivoted Cholesky factor (its kept block's reciprocal condition "
                f"number is at most {get_config()["cholesky_rcond"]:g}, or W is 0), and W was factorised "
                f"in its own memory: "
                "build EllipsoidSet(center, W, radius, coordinates), which keeps W and falls back on its "
                f"eigendecomposition ({24.0 * k**2 / 2**30:.1f} GiB more)")
        return cls(center, None, radius, coordinates, pivots=pivoted.perm, cholesky=pivoted.lead,
                   cholesky_tail=pivoted.tail, rcond=pivoted.rcond, **fields)

    @classmethod
    def penalty(cls, center: np.ndarray, gram: np.ndarray, n: int, coordinates: Coordinates,
                c2: float = 5.0) -> EllipsoidSet:
        """The paper's set {θ : ‖θ − θ̂‖_W ≤ C}, W = Σ_t z_t z_tᵀ (``gram``) over N = ``n``, C = C₂·sqrt(k/N).

        docs/design.md, convention 2. With the paper's C₂ = 5 this is a tuned penalty, not a
        confidence set: its ``level`` is None. ``fit.penalty_set(c2)`` builds it for a fit.

        Parameters
        ----------
        center, gram, n, coordinates, c2
            θ̂, W = Σ_t z_t z_tᵀ over the N = ``n`` estimation comparisons, their
            coordinates, and C₂ ≥ 0.

        Returns
        -------
        EllipsoidSet

        Examples
        --------
        >>> bl.EllipsoidSet.penalty(np.zeros(3), np.diag([4.0, 1.0, 0.0]), 100, bl.VecCoordinates(1, 3))
        EllipsoidSet(kind='gram', k=3, k_eff=2, radius=0.866)
        """
        c2 = check_real(c2, "c2", 0.0)
        radius = c2 * float(np.sqrt(coordinates.dim / n))
        return cls(center, gram, radius, coordinates, kind="gram")

    @classmethod
    def wald(cls, center: np.ndarray, information: np.ndarray, level: float, coordinates: Coordinates, *,
             overwrite: bool = False) -> EllipsoidSet:
        """Asymptotic Wald set {θ : (θ − θ̂)ᵀ I (θ − θ̂) ≤ χ²_k_eff(level)}, k_eff = rank I.

        With ``overwrite`` the set may factorise ``information`` in its own memory and keep only the
        factor (:meth:`factored`, from ``config["factored_min"]`` coordinates on).
        ``fit.calibrated_set(level)``
        builds it for a frequentist fit.

        Parameters
        ----------
        center, information, level, coordinates, overwrite
            θ̂, the Fisher information I at θ̂, the level in (0, 1), the coordinates, and
            whether ``information`` may be overwritten.

        Returns
        -------
        EllipsoidSet

        Examples
        --------
        >>> bl.EllipsoidSet.wald(np.zeros(3), np.diag([4.0, 1.0, 0.0]), 0.9, bl.VecCoordinates(1, 3))
        EllipsoidSet(kind='wald', k=3, k_eff=2, radius=2.146, level=0.9)
        """
        build = cls.factored if overwrite else cls
        unit = build(center, information, 1.0, coordinates, kind="wald", level=level)
        return unit.with_radius(chi_radius(level, unit.effective_dim))

    @cached_property
    def _live(self) -> np.ndarray:
        """The coordinates whose row or column of W is not exactly 0; the others are outside range(W).

        The MLE baseline's W at 100 x 50 has 4,100 zero rows, and factorising the rest is
        100x cheaper.
        """
        return live_coordinates(self.precision)

    @cached_property
    def _cholesky(self) -> PivotedCholesky | None:
        """W's pivoted Cholesky factorisation on its live coordinates (set in ``__post_init__`` when the set
        holds one), for a W of at least ``config["cholesky_min"]`` coordinates whose kept block is well
        conditioned; else None (eigh is used)."""
        if self.dim < get_config()["cholesky_min"]:
            return None
        check_memory(16.0 * self.dim**2, f"the Cholesky factor of the {self.dim} x {self.dim} W",
                     "use fewer coordinates (a lower rank)")
        return pivoted_cholesky(self.precision, self._live, overwrite=False)

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
        keep = range_mask(vals)
        return vals[keep], canonical_signs(vecs[:, keep]), live

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

        Where W is factorised by Cholesky (``config["cholesky_min"]``), LAPACK's estimate of
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
        """‖z‖_W⁻¹ and whether z lies in range(W), from one product with W's eigenvectors."""
        if self._cholesky is not None:
            return self._cholesky.split(z)
        vals, vecs, live = self._eigen
        zq = (z if live.size == self.dim else z[..., live]) @ vecs
        total = np.einsum("...i,...i->...", z, z)
        # ‖z − QQᵀz‖² = ‖z‖² − ‖Qᵀz‖² for orthonormal Q: one GEMM instead of two.
        outside = total - np.einsum("...i,...i->...", zq, zq)
        return np.linalg.norm(zq / np.sqrt(vals), axis=-1), in_range(total, outside)

    def whitened(self, z: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Lᵀz, W⁺ = L Lᵀ (a Wald set's standard errors and correlations), and whether z is in range(W).

        Parameters
        ----------
        z : ndarray of shape (..., k)
        out : ndarray of shape (..., k_eff), optional
            Receives Lᵀz.

        Returns
        -------
        whitened : ndarray of shape (..., k_eff)
        inside : ndarray of bool, shape (...)

        Examples
        --------
        >>> ellipsoid = bl.EllipsoidSet([0, 0], np.diag([4.0, 1]), 1, bl.VecCoordinates(1, 2))
        >>> w, inside = ellipsoid.whitened(np.eye(2))
        >>> np.linalg.norm(w, axis=1), inside
        (array([0.5, 1. ]), array([ True,  True]))
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
            _, valid[lo:hi] = self.whitened(z, g[lo:hi])
            c[lo:hi] = np.where(valid[lo:hi], z @ self.center, -np.inf)
            norms[lo:hi] = row_norms(z)
        g *= self.radius
        g[~valid] = 0.0
        return c, g, valid, norms

    def _apply_factor(self, u: np.ndarray) -> np.ndarray:
        """L u for one u (k_eff,): a point θ̂ + R L u of the set's boundary when ‖u‖ = 1."""
        if self._cholesky is not None:
            return self._cholesky.apply(u, self.dim)
        return self.factor @ u

    def identified(self, z: np.ndarray) -> np.ndarray:
        """Whether each z lies in range(W), so that its worst case is finite.

        Parameters
        ----------
        z : ndarray of shape (..., k)

        Returns
        -------
        ndarray of bool, shape (...)

        Examples
        --------
        >>> bl.EllipsoidSet([0, 0], np.diag([4.0, 0]), 1, bl.VecCoordinates(1, 2)).identified(np.eye(2))
        array([ True, False])
        """
        return self._split(check_features(z, self.dim))[1]

    def dual_norm(self, z: np.ndarray) -> np.ndarray:
        """‖z‖_W⁻¹ (pseudo-inverse), the width of the set along z per unit radius.

        Parameters
        ----------
        z : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (...)

        Examples
        --------
        >>> bl.EllipsoidSet([0, 0], np.diag([4.0, 1]), 1, bl.VecCoordinates(1, 2)).dual_norm(np.eye(2))
        array([0.5, 1. ])
        """
        return self._split(check_features(z, self.dim))[0]

    def coordinate_widths(self) -> np.ndarray:
        """‖e_i‖_W⁻¹ of each coordinate axis e_i, inf where e_i leaves range(W).

        For a Wald set (W the Fisher information) these are the standard errors of
        the coordinates; inf marks a coordinate that no comparison identifies.

        Returns
        -------
        ndarray of shape (k,)

        Examples
        --------
        >>> bl.EllipsoidSet([0, 0], np.diag([4.0, 0]), 1, bl.VecCoordinates(1, 2)).coordinate_widths()
        array([0.5, inf])
        """
        width, inside = self._split(np.eye(self.dim))
        return np.where(inside, width, np.inf)

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """min over the set of θᵀz = θ̂ᵀz − R‖z‖_W⁻¹; −inf where z leaves range(W) (unbounded along null(W)).

        What the relaxed objective asks of a set (:class:`~bayes_loco.UncertaintySet`).

        Parameters
        ----------
        z : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (...)

        Examples
        --------
        >>> bl.EllipsoidSet([0, 0], np.diag([4.0, 0]), 1, bl.VecCoordinates(1, 2)).lower_bound(np.eye(2))
        array([-0.5, -inf])
        """
        z = check_features(z, self.dim)
        width, inside = self._split(z)
        return np.where(inside, z @ self.center - self.radius * width, -np.inf)

    def distance(self, theta: np.ndarray) -> np.ndarray:
        """‖θ − θ̂‖_W (from W's factor where the set holds no W: :meth:`factored`).

        Parameters
        ----------
        theta : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (...)
            The set holds θ when this is at most ``radius``.

        Examples
        --------
        >>> round(float(fit.calibrated_set(0.9).distance(fit.coordinates.to_coordinates(problem.theta))), 3)
        2.054
        """
        d = check_features(theta, self.dim, "theta") - self.center
        if self.precision is None:
            return self._cholesky.norm(d)
        return np.sqrt(np.maximum(np.einsum("...i,ij,...j->...", d, self.precision, d), 0.0))

    def contains(self, theta: np.ndarray) -> np.ndarray:
        """Whether θ lies in the set.

        Parameters
        ----------
        theta : ndarray of shape (..., k)

        Returns
        -------
        ndarray of bool, shape (...)

        Examples
        --------
        >>> bool(fit.calibrated_set(0.9).contains(fit.coordinates.to_coordinates(problem.theta)))
        True
        """
        return self.distance(theta) <= self.radius * (1 + 1e-12)

    def solve_exact(self, problem: ExactProblem) -> ExactSolution:
        """min_(‖u‖ ≤ 1) V(θ̂ + R L u), with a duality certificate.

        V(θ̂ + R L u) = Σ_i w_i max_a (c_ia + g_iaᵀ u) with c = θ̂ᵀz and g = R Lᵀz: the set reduces the
        problem's features to (c, g) a block of units at a time and
        :func:`~bayes_loco.solvers.exact.solve_reduced` solves the reduced minimax (smoothed Newton up
        to ``config["newton_max"]`` identified directions, accelerated first-order
        methods above). Candidates with a component outside range(W) get probability 0.

        Parameters
        ----------
        problem : ExactProblem

        Returns
        -------
        ExactSolution

        Examples
        --------
        >>> policy = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")  # calls it
        >>> policy.certificate.relative_gap < 1e-4
        True
        """
        c, g, valid, norms = self._reduced(problem)
        if problem.solver is None:  # sets never import the solvers: the policy layer names one
            raise TypeError("problem.solver is None: the ellipsoid hands its reduced minimax to the solver "
                            "the problem names; pass ExactProblem(..., solver=bayes_loco.solvers.SOLVERS["
                            "'auto']) or call pessimistic_policy(..., objective='exact', solver=...)")
        return problem.solver(c, g, valid, norms, problem, self.center, self.radius, self._apply_factor)

    def __repr__(self) -> str:
        lvl = "" if self.level is None else f", level={self.level:g}"
        sized = "" if self.sized_for is None else f", sized_for={self.sized_for!r}"
        return (f"EllipsoidSet(kind={self.kind!r}, k={self.dim}, k_eff={self.effective_dim}, "
                f"radius={self.radius:.4g}{lvl}{sized})")


def wald_set(center: np.ndarray, information: np.ndarray, level: float, coordinates: Coordinates, *,
             overwrite: bool = False) -> EllipsoidSet:
    """Asymptotic Wald set {θ : (θ − θ̂)ᵀ I (θ − θ̂) ≤ χ²_k_eff(level)}, k_eff = rank I.

    :meth:`bayes_loco.EllipsoidSet.wald` under its functional name.

    Parameters
    ----------
    center, information, level, coordinates, overwrite
        As in :meth:`~bayes_loco.EllipsoidSet.wald`.

    Returns
    -------
    EllipsoidSet

    Examples
    --------
    >>> wald = bl.wald_set(np.zeros(3), np.diag([4.0, 1.0, 0.0]), 0.9, bl.VecCoordinates(1, 3))
    >>> round(wald.radius, 3)
    2.146
    """
    return EllipsoidSet.wald(center, information, level, coordinates, overwrite=overwrite)


def penalty_ellipsoid(center: np.ndarray, gram: np.ndarray, n: int, coordinates: Coordinates,
                      c2: float = 5.0) -> EllipsoidSet:
    """The paper's set {θ : ‖θ − θ̂‖_W ≤ C₂·sqrt(k/N)}.

    :meth:`bayes_loco.EllipsoidSet.penalty` under its functional name.

    Parameters
    ----------
    center, gram, n, coordinates, c2
        As in :meth:`~bayes_loco.EllipsoidSet.penalty`.

    Returns
    -------
    EllipsoidSet

    Examples
    --------
    >>> paper = bl.sets.penalty_ellipsoid(np.zeros(3), np.diag([4.0, 1.0, 0.0]), 100, bl.VecCoordinates(1, 3))
    >>> round(paper.radius, 3)
    0.866
    """
    return EllipsoidSet.penalty(center, gram, n, coordinates, c2)
