"""Simultaneous bounds for the finite family of values a policy on one population is judged on.

A policy on a population of n rows and A candidate actions is judged on n(A − 1) numbers: the
value differences f_ua(θ) = z_uaᵀθ, z_ua = z(x_u, s_u, a) − z(x_u, s_u, a_ref), of every row u
and non-reference action a (the reference scores 0). A calibrated ellipsoid bounds θᵀz for every
z at once, which costs √χ²_{k_eff}(α) standard errors (129 at LLM width, k_eff = 16,416). The
family's simultaneous intervals

    z_uaᵀθ ∈ [z_uaᵀθ̂ − c·se_ua, z_uaᵀθ̂ + c·se_ua]  for every member ua,  se_ua = ‖z_ua‖_{W⁻¹},

need only c, the α-quantile of max_ua ∣t_ua∣ with t_ua = z_uaᵀ(θ̂ − θ)/se_ua (about 4 standard
errors for 18,000 members): what multiple-comparison software computes for simultaneous
intervals (Hothorn, Bretz & Westfall 2008), here from θ̂ − θ ≈ N(0, W⁻¹). With W = L Lᵀ the
t-vector is t = D⁻¹ Gε, ε ~ N(0, I), G the whitened members Lᵀz_ua (rows) and D their norms,
so c is simulated by GEMMs a block of members at a time, and Bonferroni's
c_B = Φ⁻¹(1 − (1 − α)/(2m)) is the conservative fallback (c ≤ c_B always).

Guarantee (:class:`ValueFamilySet`). Under the Gaussian approximation θ̂ − θ* ~ N(0, W⁻¹), with
the family fixed by the population before the policy is chosen: with probability ≥ α every
member's true value lies in its interval, so every row's chosen action has true value at least
its reported lower bound, and any policy's value relative to a_ref is at least the weighted sum
of its members' lower bounds — the policy :func:`~bayes_loco.pessimistic_policy` picks from
these data included. The posterior's counterpart (:func:`draws_family`) takes the bands from
posterior draws with a simultaneous max-rank correction.

The relaxed objective is the one these bounds answer: the bounds form a box in the family's
value coordinates, and over a box the minimax of the exact objective decouples into each
unit's own best lower bound (docs/explanation/value-family.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from .._validation import LEVEL, check_int, check_level, check_memory, check_option, check_real, rng_from
from ..config import get_config
from ..coordinates import Coordinates
from ..design import relative_features
from ..linalg import row_norms
from ..population import Population
from .base import check_features, check_set_coordinates
from .ellipsoid import EllipsoidSet
from .quantile import QuantileSet

#: How a family's critical value was found: simulated max-|t| quantile, Bonferroni's bound, the
#: posterior draws' simultaneous max-rank band, or a fixed critical value (no level: a frontier's point).
FAMILY_METHODS = ("max-t", "bonferroni", "max-rank", "fixed")


@dataclass(frozen=True, eq=False)
class ValueFamilySet:
    """Simultaneous intervals for the values z_uaᵀθ of every row u and action a of one population.

    Build with :func:`value_family` (from a Wald or credible ellipsoid: max-∣t∣), with
    :func:`draws_family` (from posterior draws: max-rank), or as ``fit.calibrated_set(level,
    "family", population=population)``. :func:`~bayes_loco.pessimistic_policy` reads it with the
    relaxed objective: each unit takes the action of largest lower bound (the reference's is 0).

    Guarantee: with probability ≥ ``level`` (``level_meaning`` says in what sense: asymptotic
    frequentist under the Gaussian approximation of θ̂, or posterior), every member's value lies
    in [``lower``, ``upper``] at once. The family is fixed by ``population`` and
    ``reference_action`` before any policy is chosen, so the bound holds for the policy chosen
    from the same data: each row's chosen action has true value relative to a_ref at least its
    ``lower``, and a policy's value relative to a_ref is at least Σ_u w_u Σ_a π_ua lower_ua.
    Nothing is promised for the values of another population, nor for θ itself beyond the
    family: ``contains`` answers for the polytope {θ : lower ≤ z_uaᵀθ ≤ upper}.

    Attributes
    ----------
    population : Population
        The population whose rows and actions make the family.
    estimate : ndarray, shape (n, A)
        z_uaᵀθ̂ (posterior: the draws' mean), 0 in the reference action's column.
    scale : ndarray, shape (n, A)
        se_ua = ‖z_ua‖_{W⁻¹} (posterior: the draws' standard deviation); 0 for the reference
        action and candidates equal to it, inf for a candidate outside range(W).
    lower, upper : ndarray, shape (n, A)
        The simultaneous bounds; −inf / +inf where the data do not identify the value.
    coordinates : Coordinates
        The coordinates of θ (the fit's).
    level : float or None
        α; None for a fixed critical value (:meth:`with_critical`), which no probability backs.
    critical : float
        c, the half-width in standard errors. For ``"max-rank"`` the Gaussian equivalent
        Φ⁻¹(1 − r/J) of the band's per-member tail.
    method : str
        One of :data:`FAMILY_METHODS`.
    reference_action : int
        a_ref of the family's differences.
    source : str
        What the uncertainty came from: the ellipsoid's kind (``"wald"``, ``"credible"``,
        ``"sandwich"``) or ``"draws"``.
    bonferroni : float
        c_B = Φ⁻¹(1 − (1 − α)/(2m)), NaN without a level.
    critical_low, critical_high : float
        ``"max-t"``: the 95% Monte Carlo interval of c (order statistics of the simulated maxima);
        NaN otherwise.
    draws : int
        Monte Carlo draws of max ∣t∣, or posterior draws (``"max-rank"``).
    members : int
        m: the identified non-zero values bounded together (at most n(A − 1)).
    base : EllipsoidSet or None
        The ellipsoid whose W gave se (frequentist); :meth:`lower_bound` of other vectors uses it.
    theta_draws : ndarray or None, shape (J, k)
        The posterior draws (``"max-rank"``).
    rank : int or None
        ``"max-rank"``: r, the order statistic of each member's draws that is its lower bound
        (upper: the (J + 1 − r)-th).
    kind : str
        ``"family"``.
    """

    population: Population
    estimate: np.ndarray
    scale: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    coordinates: Coordinates
    level: float | None
    critical: float
    method: str
    reference_action: int = 0
    source: str = "wald"
    bonferroni: float = float("nan")
    critical_low: float = float("nan")
    critical_high: float = float("nan")
    draws: int = 0
    members: int = 0
    base: EllipsoidSet | None = None
    theta_draws: np.ndarray | None = None
    rank: int | None = None
    kind: str = "family"

    def __post_init__(self):
        if not isinstance(self.population, Population):
            raise TypeError(f"population must be a Population, got {type(self.population).__name__}")
        shape = (self.population.n, self.population.n_actions)
        for name in ("estimate", "scale", "lower", "upper"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ValueError(f"{name} must have shape {shape} (the population's rows x actions), got "
                                 f"{value.shape}")
            if np.isnan(value).any():
                raise ValueError(f"{name} holds NaN")
            object.__setattr__(self, name, value)
        if (self.lower > self.upper).any():
            raise ValueError("lower exceeds upper for some member: the bounds must be an interval")
        if (self.scale < 0).any():
            raise ValueError("scale (the members' standard errors) must be >= 0")
        if not isinstance(self.coordinates, Coordinates):
            raise TypeError(f"coordinates must be a Coordinates object (RTVBasis, VecCoordinates), got "
                            f"{type(self.coordinates).__name__}")
        dim = self.coordinates.dim
        if (self.coordinates.d_x, self.coordinates.d_phi) != (self.population.d_x, self.population.d_phi):
            raise ValueError(f"coordinates live on (d_x, d_phi) = ({self.coordinates.d_x}, "
                             f"{self.coordinates.d_phi}), the population on ({self.population.d_x}, "
                             f"{self.population.d_phi})")
        check_option(self.method, "method", FAMILY_METHODS)
        check_option(self.kind, "kind", ("family",))
        check_level(self.level, allow_none=self.method == "fixed")
        if self.level is None and self.method != "fixed":
            raise ValueError(f"level must be given for method {self.method!r}; only 'fixed' has none")
        object.__setattr__(self, "critical", check_real(self.critical, "critical", 0.0))
        check_int(self.reference_action, "reference_action", 0, shape[1] - 1)
        check_int(self.draws, "draws", 0)
        check_int(self.members, "members", 0)
        if (self.base is None) == (self.theta_draws is None):
            raise TypeError("a value family needs exactly one of base (an EllipsoidSet: max-t, Bonferroni or "
                            "fixed) and theta_draws (posterior draws: max-rank)")
        if self.base is not None:
            if not isinstance(self.base, EllipsoidSet):
                raise TypeError(f"base must be an EllipsoidSet, got {type(self.base).__name__}")
            check_set_coordinates(self.base.coordinates, dim, "base")
        else:
            draws = np.asarray(self.theta_draws, dtype=float)
            if draws.ndim != 2 or draws.shape[1] != dim or draws.shape[0] < 2:
                raise ValueError(f"theta_draws must have shape (J >= 2, {dim}), got {draws.shape}")
            object.__setattr__(self, "theta_draws", draws)
            if self.method != "max-rank" or self.rank is None:
                raise ValueError("a family from posterior draws has method 'max-rank' and its rank r")
            check_int(self.rank, "rank", 1, (draws.shape[0] + 1) // 2)

    @property
    def dim(self) -> int:
        return self.coordinates.dim

    @property
    def critical_error(self) -> float:
        """The Monte Carlo standard error of a simulated c: its 95% interval's half-width / 1.96 (NaN unless
        ``"max-t"``)."""
        confidence = get_config()["mc_confidence"]
        return (self.critical_high - self.critical_low) / (2 * stats.norm.ppf(0.5 + confidence / 2))

    @property
    def level_meaning(self) -> str | None:
        """In what sense ``level`` holds (:func:`~bayes_loco.sets.base.guarantee` reports it)."""
        family = (f"every value z_uaᵀθ of the family ({self.members} values: each population row x "
                  "non-reference action, fixed before the policy) lies in its interval at once")
        if self.method == "max-rank":
            return f"posterior probability, from the draws, that {family} (simultaneous max-rank band)"
        if self.method == "fixed":
            return None
        how = "max-|t| simulated" if self.method == "max-t" else "Bonferroni, at least the level"
        return (f"asymptotic frequentist probability that {family}, under the Gaussian approximation of the "
                f"estimate ({how}, from the {self.source} set's W)")

    def family_lower(self, population: Population, reference_action: int) -> np.ndarray | None:
        """The members' lower bounds (n, A) when ``population`` and ``reference_action`` are the family's,
        else None: the guarantee covers only its own family."""
        if reference_action != self.reference_action or not isinstance(population, Population):
            return None
        same = population is self.population or population.fingerprint == self.population.fingerprint
        return self.lower if same else None

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """The family's bound formula for any z: zᵀθ̂ − c‖z‖_{W⁻¹} (−inf outside range(W)), or for draws the
        r-th smallest zᵀθ_j.

        For the family's own members this is ``lower``; for any other z the same formula, which
        the simultaneous guarantee does not cover.
        """
        z = check_features(z, self.dim)
        if self.base is not None:
            width, inside = self.base._split(z)
            return np.where(inside, z @ self.base.center - self.critical * width, -np.inf)
        values = z @ self.theta_draws.T
        return np.partition(values, self.rank - 1, axis=-1)[..., self.rank - 1]

    def values(self, theta: np.ndarray) -> np.ndarray:
        """z_uaᵀθ of every member for θ (k,) or several (p, k): shape (n, A) or (p, n, A)."""
        theta = check_features(theta, self.dim, "theta")
        flat = np.atleast_2d(theta)
        out = np.empty((flat.shape[0], *self.estimate.shape))
        for lo, hi, z in candidate_blocks(self.coordinates, self.population, self.reference_action):
            out[:, lo:hi] = np.moveaxis(z @ flat.T, -1, 0)
        return out[0] if theta.ndim == 1 else out

    def contains(self, theta: np.ndarray) -> np.ndarray:
        """Whether θ (…, k) lies in the family's polytope: every member's value within its bounds."""
        values = self.values(theta)
        slack = 1e-9 * np.maximum(1.0, np.abs(self.estimate))
        inside = (values >= self.lower - slack) & (values <= self.upper + slack)
        return inside.all(axis=(-2, -1))

    def covers(self, true_values: np.ndarray) -> bool:
        """Whether every member's interval holds its value in ``true_values`` (n, A), e.g. the true reward
        differences r*(x, s, a) − r*(x, s, a_ref) of a simulation: the event the level is about."""
        true_values = np.asarray(true_values, dtype=float)
        if true_values.shape != self.estimate.shape:
            raise ValueError(f"true_values must have shape {self.estimate.shape}, got {true_values.shape}")
        slack = 1e-9 * np.maximum(1.0, np.abs(true_values))
        return bool(((true_values >= self.lower - slack) & (true_values <= self.upper + slack)).all())

    def with_critical(self, critical: float) -> ValueFamilySet:
        """The same family with half-width ``critical`` standard errors and no level: a point of the
        radius frontier (sub-optimality and bound held against c), not a calibrated set."""
        if self.base is None:
            raise TypeError("with_critical needs a family of standard errors (value_family); a family from "
                            "posterior draws has ranks, not a critical value")
        critical = check_real(critical, "critical", 0.0)
        lower, upper = _interval(self.estimate, self.scale, critical, self.reference_action)
        return replace(self, lower=lower, upper=upper, critical=critical, level=None, method="fixed",
                       bonferroni=float("nan"), critical_low=float("nan"), critical_high=float("nan"))

    def __repr__(self) -> str:
        level = "no level" if self.level is None else f"level={self.level:g}"
        return (f"ValueFamilySet(members={self.members}, k={self.dim}, critical={self.critical:.4g} "
                f"({self.method}; Bonferroni {self.bonferroni:.4g}), {level}, source={self.source!r})")


def candidate_blocks(coordinates: Coordinates, population: Population, reference_action: int,
                     block_bytes: int | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
    """(lo, hi, z of rows lo:hi): the members' features, shape (hi − lo, A, k), ``block_bytes`` at a time
    (``config["family_block_bytes"]`` when None: 2.6 GB whole at LLM width)."""
    n, n_actions = population.n, population.n_actions
    block_bytes = get_config()["family_block_bytes"] if block_bytes is None else block_bytes
    rows = max(1, int(block_bytes // (8 * n_actions * coordinates.dim)))
    for lo in range(0, n, rows):
        hi = min(lo + rows, n)
        yield lo, hi, relative_features(coordinates, population.contexts[lo:hi], population.features[lo:hi],
                                        reference_action)


def bonferroni_critical(level: float, members: int) -> float:
    """c_B = Φ⁻¹(1 − (1 − level)/(2m)): two-sided Bonferroni for m simultaneous intervals.

    Parameters
    ----------
    level : float
        α, in (0, 1).
    members : int
        m ≥ 1, the intervals that must hold together.

    Returns
    -------
    float
        c_B, in standard errors: θ̂'s values ± c_B·se hold together with probability ≥ α for any
        correlation between them.

    Examples
    --------
    >>> round(bl.sets.bonferroni_critical(0.9, 18000), 2)   # 2,000 units x 9 actions
    4.54
    """
    level = check_level(level)
    members = check_int(members, "members", 1)
    return float(stats.norm.isf((1.0 - level) / (2 * members)))


def quantile_interval(sample: np.ndarray, level: float) -> tuple[float, float, float]:
    """The ``level`` quantile of ``sample`` and its distribution-free 95% interval (binomial order stats)."""
    ordered = np.sort(sample)
    b = ordered.size
    point = ordered[min(b - 1, max(0, math.ceil(level * b) - 1))]
    tail = (1 - get_config()["mc_confidence"]) / 2
    lo = int(stats.binom.ppf(tail, b, level))
    hi = int(stats.binom.ppf(1 - tail, b, level)) + 1
    return float(point), float(ordered[max(lo - 1, 0)]), float(ordered[min(hi - 1, b - 1)])


def _interval(estimate, scale, critical, reference_action) -> tuple[np.ndarray, np.ndarray]:
    """estimate ∓ critical·scale, 0 for the reference and ±inf where the scale is inf (not identified)."""
    with np.errstate(invalid="ignore"):  # inf · 0 never arises: critical > 0 or the scale is finite
        half = np.where(np.isinf(scale), np.inf, critical * scale)
    lower, upper = estimate - half, estimate + half
    lower[:, reference_action] = upper[:, reference_action] = 0.0
    return lower, upper


def _check_family_inputs(population, level, reference_action):
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    level = check_level(level)
    return level, check_int(reference_action, "reference_action", 0, population.n_actions - 1)


def value_family(ellipsoid: EllipsoidSet | QuantileSet, population: Population, level: float | None = None, *,
                 reference_action: int = 0, method: str = "max-t", draws: int = 10_000,
                 seed=0) -> ValueFamilySet:
    """Simultaneous intervals for every row × action value of ``population`` from an ellipsoid's W.

    Given a :class:`~bayes_loco.sets.QuantileSet` (a posterior's draws) instead, the bands come
    from its draws (:func:`draws_family`; ``method``, ``draws`` and ``seed`` do not apply).

    se_ua = ‖z_ua‖_{W⁻¹} from the whitened members Lᵀz_ua, and c the ``level`` quantile of
    max_ua ∣t_ua∣ simulated from θ̂ − θ ~ N(0, W⁻¹) (``method="max-t"``) or Bonferroni's
    Φ⁻¹(1 − (1 − level)/(2m)) (``"bonferroni"``); see the module docstring for the guarantee.
    The members are made, whitened and multiplied by the draws a block of rows at a time: neither
    W⁻¹ nor the k × m matrix of members is formed, only ε (k_eff × ``draws``, float32: 0.66 GB at
    LLM width) is held whole. The simulated c is capped at Bonferroni's, which bounds it for
    any correlation.

    Parameters
    ----------
    ellipsoid : EllipsoidSet or QuantileSet
        A calibrated ellipsoid (``wald``, ``credible``, ``sandwich``; also a factored Wald set):
        W is the inverse covariance of θ̂ (or of the posterior); its radius is not used. Or a
        posterior's pointwise quantile set, whose draws give the bands.
    population : Population
        The population the policy will be solved on: its rows × actions are the family.
    level : float or None
        α; None takes the ellipsoid's level.
    reference_action : int
        a_ref, as in :func:`~bayes_loco.pessimistic_policy`.
    method : {"max-t", "bonferroni"}
    draws : int
        Monte Carlo draws of max ∣t∣ (``"max-t"``); ``critical_low`` .. ``critical_high`` is the
        95% interval of the simulated quantile. The t are computed in float32, whose rounding
        (relative 10⁻⁷ √k) is far below that Monte Carlo error.
    seed : int or Generator

    Raises
    ------
    ValueError
        A Gram set (its W is not an inverse covariance), a level missing, a bad method or draws,
        or a population with no value to bound.

    Returns
    -------
    ValueFamilySet
        The intervals [lower, upper] of every row × action value, their critical value c, its
        Bonferroni cap and Monte Carlo interval, read by ``pessimistic_policy(..., objective="relaxed")``.

    Examples
    --------
    >>> family = bl.value_family(fit.calibrated_set(0.9), pop)  # calibrated_set(.9, "family", population=pop)
    >>> family
    ValueFamilySet(members=150, k=16, critical=2.8... (max-t; Bonferroni 3.403), level=0.9, source='wald')
    >>> policy = bl.pessimistic_policy(family, pop)
    >>> round(policy.pessimistic_value, 3)   # holds for every truth with probability >= 0.9
    0.121
    """
    if isinstance(ellipsoid, QuantileSet):
        return draws_family(ellipsoid.draws, ellipsoid.coordinates, population,
                            ellipsoid.level if level is None else level, reference_action=reference_action)
    if not isinstance(ellipsoid, EllipsoidSet):
        raise TypeError(f"ellipsoid must be an EllipsoidSet (or a QuantileSet of posterior draws), got "
                        f"{type(ellipsoid).__name__}")
    if ellipsoid.kind == "gram":
        raise ValueError("ellipsoid: the paper's Gram set (kind 'gram') has W = Σ z zᵀ, not the inverse "
                         "covariance of the estimate; use fit.calibrated_set(level) (a Wald set)")
    if level is None:
        if ellipsoid.level is None:
            raise ValueError(f"level: the {ellipsoid.kind!r} set has no level; give one")
        level = ellipsoid.level
    level, reference_action = _check_family_inputs(population, level, reference_action)
    check_option(method, "method", ("max-t", "bonferroni"))
    draws = check_int(draws, "draws", 100) if method == "max-t" else 0
    coordinates = check_set_coordinates(ellipsoid.coordinates, ellipsoid.dim, "ellipsoid")
    if (population.d_x, population.d_phi) != (coordinates.d_x, coordinates.d_phi):
        raise ValueError(f"population has (d_x, d_phi) = ({population.d_x}, {population.d_phi}), the set's "
                         f"coordinates ({coordinates.d_x}, {coordinates.d_phi})")
    k_eff = ellipsoid.effective_dim
    check_memory(4.0 * k_eff * draws, f"the {draws} Monte Carlo draws of ε ({k_eff} whitened coordinates, "
                 "float32)", "ask for fewer draws")
    rng = rng_from(seed)
    eps = rng.standard_normal((k_eff, draws), dtype=np.float32) if draws else None
    shape = (population.n, population.n_actions)
    estimate, scale, member = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    maxima = np.zeros(draws, dtype=np.float32)
    for lo, hi, z in candidate_blocks(coordinates, population, reference_action):
        whitened, inside = ellipsoid.whitened(z)
        estimate[lo:hi] = z @ ellipsoid.center
        se = np.linalg.norm(whitened, axis=-1)
        scale[lo:hi] = np.where(inside, se, np.inf)
        live = inside & (se > 0)
        live[:, reference_action] = False
        member[lo:hi] = live
        if draws and live.any():
            g = (whitened[live] / se[live][:, None]).astype(np.float32)
            np.maximum(maxima, np.abs(g @ eps).max(axis=0), out=maxima)
    # A candidate equal to the reference has z = 0 exactly (φ(s, a) − φ(s, a_ref) = 0): value 0, no member.
    zero = np.isfinite(scale) & ~member
    scale[zero], estimate[zero] = 0.0, 0.0
    m = int(member.sum())
    if m == 0:
        raise ValueError("population: every candidate's value equals the reference action's or is not "
                         "identified, so the family has no value to bound")
    bonferroni = bonferroni_critical(level, m)
    critical, low, high = bonferroni, float("nan"), float("nan")
    if method == "max-t":
        critical, low, high = quantile_interval(maxima.astype(float), level)
        # Bonferroni bounds the quantile for any correlation: above it only by Monte Carlo error.
        critical = min(critical, bonferroni)
    lower, upper = _interval(estimate, scale, critical, reference_action)
    return ValueFamilySet(population, estimate, scale, lower, upper, coordinates, float(level), critical,
                          method, reference_action, ellipsoid.kind, bonferroni, low, high, draws, m,
                          base=ellipsoid)


def max_rank(values: np.ndarray, level: float) -> int:
    """r of the simultaneous band from draws: the largest r with at least ``level`` of the draws inside
    [r-th, (J + 1 − r)-th smallest] for every column at once.

    ``values`` (J, m): m functionals' draws. Each draw's extremeness is min over columns of
    min(rank, J + 1 − rank); a draw lies in every column's band of order r iff its extremeness is
    ≥ r, so r is the ⌊(1 − level) J⌋ + 1-th smallest extremeness (Besag, Green, Higdon &
    Mengersen 1995; Montiel Olea & Plagborg-Møller 2019).

    Parameters
    ----------
    values : ndarray of shape (J, m)
        J draws of m functionals.
    level : float
        In (0, 1).

    Returns
    -------
    int
        r, between 1 and J // 2 + 1.

    Examples
    --------
    >>> values = np.random.default_rng(0).standard_normal((1000, 5))
    >>> r = bl.sets.max_rank(values, 0.9)
    >>> r
    11
    >>> ordered = np.sort(values, axis=0)
    >>> inside = ((values >= ordered[r - 1]) & (values <= ordered[1000 - r])).all(axis=1)
    >>> bool(inside.mean() >= 0.9)   # at least 90% of the draws inside all five bands at once
    True
    """
    ranks = draw_ranks(values)
    j = ranks.shape[0]
    extremeness = np.minimum(ranks, j + 1 - ranks).min(axis=1)
    return int(np.sort(extremeness)[math.floor((1 - level) * j + 1e-9)])


def draw_ranks(values: np.ndarray) -> np.ndarray:
    """Each draw's rank within its column, 1 for the smallest (ties by order of draws).

    The simultaneous bands from draws (:func:`max_rank`, :func:`bayes_loco.certify.min_rank`) are
    read from these ranks.

    Parameters
    ----------
    values : ndarray of shape (J, m)
        J draws of m functionals.

    Returns
    -------
    ndarray of int, shape (J, m)
        Ranks 1 … J of each column.

    Examples
    --------
    >>> bl.sets.draw_ranks(np.array([[0.3, 2.0], [0.1, 1.0], [0.2, 1.0]])).tolist()
    [[3, 3], [1, 1], [2, 2]]
    """
    values = np.asarray(values, dtype=float)
    j = values.shape[0]
    ranks = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(ranks, np.argsort(values, axis=0, kind="stable"), np.arange(1, j + 1)[:, None], axis=0)
    return ranks


def draws_family(draws: np.ndarray, coordinates: Coordinates, population: Population, level: float = LEVEL, *,
                 reference_action: int = 0) -> ValueFamilySet:
    """Simultaneous posterior bands for every row × action value of ``population``, from draws of θ.

    Each member's draws z_uaᵀθ_j are ranked; the band of order r is [r-th, (J + 1 − r)-th
    smallest] of every member, with r the largest for which at least ``level`` of the draws lie
    in every band at once (:func:`max_rank`). The guarantee is posterior: P(every member's value
    in its band | data) ≥ ``level`` up to the Monte Carlo error of J draws (the share of draws
    inside is ≥ ``level`` by construction). ``estimate`` and ``scale`` are the draws' mean and
    standard deviation. Members whose z is 0 (a candidate equal to the reference) are left out.
    The J × m values are held at once (0.29 GB for 2,000 draws of 18,000 members).

    Parameters
    ----------
    draws : ndarray, shape (J, k)
        Posterior draws of θ in ``coordinates``.
    coordinates : Coordinates
    population : Population
    level : float
    reference_action : int

    Returns
    -------
    ValueFamilySet
        Its ``critical`` is Φ⁻¹(1 − r/J), the bands' width in normal standard errors.

    Examples
    --------
    >>> bl.sets.draws_family(post.rtv_draws, post.basis, pop, 0.9)
    ValueFamilySet(members=150, k=16, critical=2.878 (max-rank; Bonferroni 3.403), level=0.9, source='draws')
    """
    level, reference_action = _check_family_inputs(population, level, reference_action)
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[1] != coordinates.dim or draws.shape[0] < 2:
        raise ValueError(f"draws must have shape (J >= 2, {coordinates.dim}), got {draws.shape}")
    if not np.isfinite(draws).all():
        raise ValueError("draws contain NaN or infinity")
    j = draws.shape[0]
    shape = (population.n, population.n_actions)
    norms = np.zeros(shape)
    for lo, hi, z in candidate_blocks(coordinates, population, reference_action):
        norms[lo:hi] = row_norms(z)
    member = norms > 0  # a candidate equal to the reference has z = 0 exactly: value 0, no member
    member[:, reference_action] = False
    m = int(member.sum())
    if m == 0:
        raise ValueError("population: every candidate's value equals the reference action's, so the family "
                         "has no value to bound")
    check_memory(8.0 * j * m, f"the {j} draws of the family's {m} values", "use fewer draws or fewer rows")
    values = np.empty((j, m))
    estimate, scale = np.zeros(shape), np.zeros(shape)
    filled = 0
    for lo, hi, z in candidate_blocks(coordinates, population, reference_action):
        live = member[lo:hi]
        block = z[live] @ draws.T  # (members of the block, J)
        values[:, filled: filled + block.shape[0]] = block.T
        filled += block.shape[0]
    r = max_rank(values, level)
    ordered = np.partition(values, (r - 1, j - r), axis=0)
    lower, upper = np.zeros(shape), np.zeros(shape)
    lower[member], upper[member] = ordered[r - 1], ordered[j - r]
    estimate[member], scale[member] = values.mean(axis=0), values.std(axis=0, ddof=1)
    critical = float(stats.norm.isf(r / j))
    return ValueFamilySet(population, estimate, scale, lower, upper, coordinates, float(level),
                          max(critical, 0.0), "max-rank", reference_action, "draws",
                          bonferroni_critical(level, m), draws=j, members=m, theta_draws=draws, rank=r)
