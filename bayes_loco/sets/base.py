"""What the pessimistic solver needs of an uncertainty set, and the pieces every exact solve shares.

A set lives in some coordinates of Θ (:mod:`bayes_loco.coordinates`) and exposes

- ``lower_bound(z) = min_{θ ∈ set} θᵀz`` for a batch of feature vectors z: all the
  relaxed objective needs (:class:`UncertaintySet`);
- ``solve_exact(problem)`` for the exact minimax objective: a convex set
  minimises V(θ) = Σ_u w_u max_a θᵀz_ua over itself and returns the minimiser,
  a stochastic policy and a duality certificate (:class:`ConvexSet`);
- ``family_lower(population, reference_action)`` for a set whose bounds hold together for the
  finite family of one population's row × action values (:class:`FamilySet`): the relaxed
  objective reads those bounds, and a policy's bound is the weighted sum of its members' bounds.

A new set kind implements these two methods; the solver never needs to know its
class. :meth:`ExactProblem.solution` turns a candidate θ and policy into a
certified :class:`ExactSolution`, so a set only has to find them. A set whose
``solve_exact`` reads the features only through :meth:`ExactProblem.blocks` says so
with a class attribute ``accepts_feature_blocks = True`` (:class:`BlockwiseSet`); the solver then
hands it populations too large to hold their features whole as :class:`FeatureBlocks`. A set with
an exact Nash-welfare program implements ``solve_nash`` (:class:`NashSet`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .._domains import is_real
from .._validation import as_float_array
from ..coordinates import Coordinates


class PolicyStatus(enum.Enum):
    """Outcome of the solver."""

    SOLVED = "solved"
    GAP_NOT_REACHED = "gap_not_reached"


@dataclass(frozen=True)
class Certificate:
    """Bounds on the optimal pessimistic value: lower ≤ optimum ≤ upper."""

    lower: float
    upper: float

    def __post_init__(self):
        # −inf and +inf are honest bounds (a set unbounded along a candidate); NaN is no bound at all.
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if not is_real(value) or np.isnan(value):
                raise ValueError(f"certificate {name} bound must be a real number, got {value!r}")
        if self.lower > self.upper + 1e-6 * max(1.0, abs(self.lower), abs(self.upper)):
            raise ValueError(f"certificate lower bound {self.lower:.6g} exceeds its upper bound "
                             f"{self.upper:.6g}")

    @property
    def gap(self) -> float:
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        return self.gap / max(abs(self.upper), abs(self.lower), np.finfo(float).tiny)


@dataclass(frozen=True)
class ExactSolution:
    """A set's answer to the exact objective.

    Attributes
    ----------
    probabilities : ndarray, shape (units, A)
        The stochastic policy whose pessimistic value is ``certificate.lower``.
    theta : ndarray, shape (k,)
        The minimising θ in the set; ``certificate.upper`` is V(θ).
    certificate : Certificate
    status : PolicyStatus
    message : str
    rounded_value : float or None
        The pessimistic value of the policy rounded to its most likely actions, where the set
        found it cheaply; None lets the caller compute it.
    """

    probabilities: np.ndarray
    theta: np.ndarray
    certificate: Certificate
    status: PolicyStatus
    message: str
    rounded_value: float | None = None


def check_set_coordinates(coordinates, dim: int, what: str) -> Coordinates:
    """A set's ``coordinates``: a :class:`Coordinates` of ``dim`` (``what``'s length), or one error."""
    if not isinstance(coordinates, Coordinates):
        raise TypeError(f"coordinates must be a Coordinates object (RTVBasis, VecCoordinates), got "
                        f"{type(coordinates).__name__}")
    if coordinates.dim != dim:
        raise ValueError(f"{what} has {dim} coordinates, but coordinates has {coordinates.dim}: give {what} "
                         "in the set's coordinates")
    return coordinates


def check_features(z, dim: int, name: str = "z") -> np.ndarray:
    """Feature vectors z (…, k) for a set's methods: finite, real, with the set's ``dim`` on the last axis."""
    if np.shape(z)[-1:] != (dim,):
        raise ValueError(f"{name} must have the set's {dim} coordinates on its last axis, got shape "
                         f"{np.shape(z)}: map features to the set's coordinates (coordinates.transform)")
    return np.asarray(z, dtype=float) if np.size(z) == 0 else as_float_array(z, name, None)


# The sense in which each kind's level holds (docs/design.md, "What each set's level means").
LEVEL_MEANINGS = {
    "wald": "asymptotic frequentist coverage of θ by the Wald set",
    "sandwich": "approximate frequentist coverage of θ by the sandwich set, centred at the posterior mean",
    "credible": "posterior probability of the credible set, exact if the posterior of the identified "
                "coordinates is Gaussian",
    "draws": "nominal: the share of posterior draws kept; their hull holds less posterior mass than that",
    "cvar": "posterior probability, for each bound separately (CVaR at tail 1 − level)",
    "quantile": "posterior probability, for each bound separately (a pointwise quantile of the draws, "
                "not a set)",
    "family": "simultaneous coverage of the values of one population's rows x actions (the set's "
              "level_meaning says whether frequentist or posterior)",
}
# Kinds whose bounds hold at their level one at a time: a pointwise quantile is no set, and a CVaR set's level
# is each value's posterior probability of exceeding its bound, not the probability that θ lies in the set.
SEPARATE_KINDS = ("quantile", "cvar")


@dataclass(frozen=True)
class Guarantee:
    """What a bound read off a set, min_(θ ∈ set) θᵀz ≤ θ*ᵀz, promises.

    Attributes
    ----------
    kind : str
        The set's kind (``"wald"``, ``"gram"``, ``"draws"``, …; the class name for a kind of your own).
    level : float or None
        The probability with which a bound holds; None for a set with no level (the paper's C₂
        penalty ball, kind ``"gram"``), whose bounds are not calibrated.
    meaning : str
        In what sense ``level`` holds, or why there is none.
    joint : bool
        Whether the bounds read off the set hold together, all of them at once with probability
        ``level`` (they all hold whenever θ lies in the set), rather than each one separately.
    sized_for : str or None
        The scope whose policies' values alone the set guards (an ellipsoid sized by
        :func:`~bayes_loco.sets.size_for_values`), or None.
    """

    kind: str
    level: float | None
    meaning: str
    joint: bool
    sized_for: str | None = None


def guarantee(uncertainty_set) -> Guarantee:
    """The level of ``uncertainty_set``'s bounds and what it means (docs/design.md's table of levels)."""
    kind = getattr(uncertainty_set, "kind", type(uncertainty_set).__name__)
    level = getattr(uncertainty_set, "level", None)
    sized_for = getattr(uncertainty_set, "sized_for", None)
    if level is None:
        meaning = ("the paper's C₂ penalty ball (kind 'gram') is a tuned penalty with no level"
                   if kind == "gram" else f"the {kind!r} set has no level")
        return Guarantee(kind, None, meaning, True, sized_for)
    if sized_for is not None:
        return Guarantee(kind, level, f"every {sized_for} policy's value on the population the {kind} set "
                         "was sized on is above its bound with that probability (asymptotic); the set does "
                         "not cover θ", False, sized_for)
    # A set that states its own meaning (a value family: frequentist or posterior) is taken at its word.
    meaning = getattr(uncertainty_set, "level_meaning", None) or LEVEL_MEANINGS.get(
        kind, f"the {kind!r} set's nominal coverage of θ")
    return Guarantee(kind, level, meaning, kind not in SEPARATE_KINDS)


@dataclass(frozen=True)
class ValueRadius:
    """The radius that guards a cone of value directions, and how it was found.

    Attributes
    ----------
    radius : float
        R_α, the α-quantile of ‖Π_LᵀK(g)‖.
    statistical_dimension : float
        δ(K) = E‖Π_LᵀK(g)‖²: the effective number of directions guarded.
    full_radius : float
        √χ²_k_eff(α), the radius that guards every direction.
    draws : int
        Monte Carlo draws of g; 0 when K is a subspace and R_α is exact.
    generators : int
        Non-zero value directions spanning K.
    """

    radius: float
    statistical_dimension: float
    full_radius: float
    draws: int
    generators: int


@runtime_checkable
class UncertaintySet(Protocol):
    """What the relaxed objective needs of a set: coordinates and a support function from below."""

    coordinates: Coordinates

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """min_(θ ∈ set) θᵀ z over the last axis of z."""
        ...


@runtime_checkable
class ConvexSet(UncertaintySet, Protocol):
    """A convex compact set, which the exact objective accepts: it solves min_(θ ∈ set) V(θ)."""

    def solve_exact(self, problem: ExactProblem) -> ExactSolution:
        """min_(θ ∈ set) Σ_u w_u max_a θᵀz_ua with a stochastic policy and a certificate."""
        ...


@runtime_checkable
class BlockwiseSet(ConvexSet, Protocol):
    """A convex set whose ``solve_exact`` reads the features only through :meth:`ExactProblem.blocks`
    when ``accepts_feature_blocks`` is True: it then takes :class:`FeatureBlocks`."""

    accepts_feature_blocks: bool


@runtime_checkable
class NashSet(UncertaintySet, Protocol):
    """A set with an exact program for the Nash welfare Σ_u w_u log(value_u − floor) of its worst case."""

    def solve_nash(self, problem: ExactProblem, floor: float) -> tuple[np.ndarray, float]:
        """The policy (units, A) maximising the worst-case Nash welfare over the set, and that welfare."""
        ...


@runtime_checkable
class FamilySet(UncertaintySet, Protocol):
    """A set whose bounds hold at once for the finite family of one population's row × action values.

    ``family_lower`` returns the family's lower bounds (rows × actions) for its own population
    and reference action, None for any other: the solver then reads each row's bound from
    ``lower_bound`` and gives the policy no level. A policy's pessimistic value is the weighted
    sum of its members' bounds, Σ_u w_u Σ_a π_ua lower_ua, which is what the simultaneous
    guarantee covers (not the set's support at the policy's moment).
    """

    def family_lower(self, population, reference_action: int) -> np.ndarray | None:
        """The family's lower bounds, shape (rows, A), or None for another population."""
        ...


def reads_feature_blocks(uncertainty_set) -> bool:
    """Whether the set declares that its ``solve_exact`` takes :class:`FeatureBlocks`
    (a :class:`BlockwiseSet` whose ``accepts_feature_blocks`` is true)."""
    return isinstance(uncertainty_set, BlockwiseSet) and bool(uncertainty_set.accepts_feature_blocks)


@dataclass(frozen=True, eq=False)
class FeatureBlocks:
    """Candidate features z_ua made a block of units at a time, for a problem whose z would not fit.

    At LLM width (k = 16,496) the features of 2,000 units × 10 actions are 2.6 GB; a set that
    reduces them as they come (the ellipsoid whitens them) then never holds them whole.

    Attributes
    ----------
    shape : tuple of int
        (units, A, k).
    make : callable
        ``make(lo, hi)`` returns z of units lo:hi, shape (hi − lo, A, k).
    units_per_block : int
    """

    shape: tuple[int, int, int]
    make: Callable[[int, int], np.ndarray]
    units_per_block: int

    def __iter__(self) -> Iterator[tuple[int, int, np.ndarray]]:
        for lo in range(0, self.shape[0], self.units_per_block):
            hi = min(lo + self.units_per_block, self.shape[0])
            yield lo, hi, self.make(lo, hi)


@dataclass(frozen=True, eq=False)
class ExactProblem:
    """min_(θ ∈ set) V(θ), V(θ) = Σ_u w_u max_a θᵀz_ua: the exact objective after minimax duality.

    Attributes
    ----------
    features : ndarray, shape (units, A, k), or FeatureBlocks
        z_ua, the candidate features averaged over each unit's rows, whole or made a block
        of units at a time (:class:`FeatureBlocks`; sets that need them whole refuse these).
    weights : ndarray, shape (units,)
        w_u, the share of the population's rows in unit u.
    tol : float
        Target relative gap of the certificate.
    max_iter : int
        Iterations an inner solve may take (how a set uses it is its own business).
    solver : callable or None
        The solver of the reduced minimax a set hands its problem to (an ellipsoid's
        min_(‖u‖ ≤ 1) Σ_u w_u max_a (c_ua + g_uaᵀu)): one of
        :data:`bayes_loco.solvers.SOLVERS`, chosen by ``pessimistic_policy(..., solver=)``.
        The sets never import the solvers, which sit above them.
    """

    features: np.ndarray | FeatureBlocks
    weights: np.ndarray
    tol: float = 1e-4
    max_iter: int = 60
    solver: Callable[..., ExactSolution] | None = None

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """(lo, hi, z of units lo:hi): the whole array at once, or :class:`FeatureBlocks`' blocks."""
        if isinstance(self.features, FeatureBlocks):
            yield from self.features
        else:
            yield 0, self.features.shape[0], self.features

    def whole(self, needed_by: str) -> np.ndarray:
        """The features as one array; a :class:`FeatureBlocks` problem is refused, naming who needs it."""
        if isinstance(self.features, FeatureBlocks):
            raise TypeError(f"{needed_by} needs the candidate features in memory, and this problem makes "
                            "them a block of units at a time (FeatureBlocks): evaluate the policy on fewer "
                            "units")
        return self.features

    def point_values(self, theta: np.ndarray) -> np.ndarray:
        """θᵀz_ua, shape (units, A)."""
        return np.concatenate([z @ theta for _, _, z in self.blocks()])

    def value(self, theta: np.ndarray) -> float:
        """V(θ), an upper bound on the optimal pessimistic value for any θ in the set."""
        return float(self.weights @ self.point_values(theta).max(axis=1))

    def moment(self, probabilities: np.ndarray) -> np.ndarray:
        """m(π) = Σ_u w_u Σ_a π_ua z_ua, so that a policy's value under θ is θᵀm(π)."""
        return sum(np.einsum("u,ua,uak->k", self.weights[lo:hi], probabilities[lo:hi], z)
                   for lo, hi, z in self.blocks())

    def worst_case(self, uncertainty_set: UncertaintySet, probabilities: np.ndarray) -> float:
        """min_(θ ∈ set) θᵀ m(π): the policy's pessimistic value, a lower bound on the optimum."""
        return float(uncertainty_set.lower_bound(self.moment(probabilities)))

    def closed(self, certificate: Certificate, point_values: np.ndarray) -> bool:
        """Gap ≤ tol relative to the value, floored at 1% of Σ_u w_u max_a abs(point_values_ua).

        ``point_values`` are the candidates' values at the set's point estimate. The floor
        lets a zero optimum (the reference action is best) be certified too. It is not the
        set's width: a wide set would make the floor, not the value, decide.
        """
        return certificate.gap <= self.tol * max(abs(certificate.upper), abs(certificate.lower),
                                                 self._floor(point_values))

    def _floor(self, point_values: np.ndarray) -> float:
        return 1e-2 * float(self.weights @ np.abs(point_values).max(axis=1))

    def finish(self, probabilities: np.ndarray, theta: np.ndarray, certificate: Certificate,
               point_values: np.ndarray, failure: str, note: str = "",
               rounded_value: float | None = None) -> ExactSolution:
        """An :class:`ExactSolution`, SOLVED when the certificate closes, else ``failure`` explains."""
        if self.closed(certificate, point_values):
            gap = (f"relative gap {certificate.relative_gap:.2e} <= {self.tol:g}"
                   if certificate.relative_gap <= self.tol else
                   f"gap {certificate.gap:.2e} <= {self.tol:g} x {self._floor(point_values):.3g} (1% of the "
                   "point values: the optimum is near 0)")
            return ExactSolution(probabilities, theta, certificate, PolicyStatus.SOLVED,
                                 f"certified: {gap}{note}", rounded_value)
        return ExactSolution(probabilities, theta, certificate, PolicyStatus.GAP_NOT_REACHED,
                             f"{failure} reached a relative gap of {certificate.relative_gap:.2e}, above "
                             f"tol={self.tol:g} (bounds {certificate.lower:.6g} .. {certificate.upper:.6g})"
                             f"{note}; the policy is feasible and its pessimistic value is the lower bound.",
                             rounded_value)

    def solution(self, uncertainty_set: UncertaintySet, theta: np.ndarray, probabilities: np.ndarray, *,
                 center: np.ndarray | None = None,
                 failure: str = "the set's exact solver") -> ExactSolution:
        """Certify a candidate: upper bound V(θ), lower bound the policy's worst case over the set.

        For a new set kind: find θ in the set (approximately minimising V) and a
        stochastic policy (greedy under θ, or better, the dual multipliers of the
        max), and this checks and labels the pair. ``center`` is the set's point
        estimate (default θ), whose values set the floor of the relative gap.
        """
        theta = np.asarray(theta, dtype=float)
        certificate = Certificate(self.worst_case(uncertainty_set, probabilities), self.value(theta))
        point = self.point_values(theta if center is None else np.asarray(center, dtype=float))
        return self.finish(probabilities, theta, certificate, point, failure)



