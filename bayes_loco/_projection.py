"""Two-dimensional views of sets in the k coordinates of θ, for :mod:`bayes_loco.plots`.

Numbers only, no drawing: which two directions to project on (:func:`projection_directions`:
given ones, coordinates, or where two sets differ most), a policy's value direction m(π)
(:func:`value_direction`), and the projection of an ellipsoid on the plane of two directions
(:func:`project_ellipsoid`: an ellipse, a strip or the plane, as W's range allows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import linalg

from ._domains import is_integer
from .config import get_config
from .coordinates import RTVBasis
from .design import mean_candidate_features
from .linalg import range_mask
from .policy import Policy
from .population import Population
from .sets import EllipsoidSet


def theta_symbol(coordinates) -> str:
    return "θ_rtv" if isinstance(coordinates, RTVBasis) else "θ"


def orthonormal(vectors: np.ndarray, what: str) -> np.ndarray:
    """Columns of ``vectors`` (k × 2) orthonormalised by Gram–Schmidt, keeping the first's direction."""
    q, r = np.linalg.qr(vectors)
    diag = np.abs(np.diag(r))
    if diag.min() <= 1e-10 * max(diag.max(), np.finfo(float).tiny):
        raise ValueError(f"{what}: the two directions are parallel (or one is zero); give two independent "
                         "directions")
    return q * np.sign(np.diag(r))


def truth_vector(truth, coordinates, what: str = "truth") -> np.ndarray:
    """θ* in the sets' coordinates from a (k,) vector, Θ* (d_x × d_φ) or anything with ``.theta``."""
    value = np.asarray(getattr(truth, "theta", truth), dtype=float)
    k = coordinates.dim
    if value.shape == (k,):
        return value
    if value.shape == (coordinates.d_x, coordinates.d_phi):
        return np.asarray(coordinates.to_coordinates(value), dtype=float)
    raise ValueError(f"{what} must be θ* in the sets' coordinates (shape ({k},)) or Θ* (shape "
                     f"({coordinates.d_x}, {coordinates.d_phi})), got shape {value.shape}")


# ------------------------------------------------------------------------------------ directions


def eigen(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues and vectors of a symmetric PSD matrix, split by the range rule of the sets."""
    vals, vecs = np.linalg.eigh(0.5 * (matrix + matrix.T))
    keep = range_mask(vals)
    return vals, vecs, keep


def spread(s) -> np.ndarray:
    """The set's spread matrix: R² W⁺ for an ellipsoid, the draws' covariance for a hull."""
    if isinstance(s, EllipsoidSet):
        return s.radius**2 * (s.factor @ s.factor.T)
    return np.atleast_2d(np.cov(s.draws, rowvar=False)) if s.draws.shape[0] > 1 else np.zeros((s.dim,) * 2)


def widest(shape: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The two widest directions of ``shape`` within span(``basis``)."""
    _, vecs = np.linalg.eigh(basis.T @ shape @ basis)
    return basis @ vecs[:, [-1, -2]]


def differing_directions(named) -> tuple[np.ndarray, list[str]]:
    """The two directions where the first two sets differ most, and what each axis shows.

    With spread matrices S₁, S₂ (R² W⁺ for an ellipsoid, the covariance for draws), the
    width of set i along a direction v is ∝ sqrt(vᵀ S_i v). The ratio of the widths is
    extreme at the generalised eigenvectors of (S₁, S₂) on the directions both bound:
    the top one is where set 1 is widest relative to set 2, the bottom one the reverse.
    This is scale-free (a Gram penalty and a Wald set differ in size by orders of
    magnitude, and the difference S₁ − S₂ would only find the larger set's longest axes)
    and stays in directions where both projections are bounded. When the two shapes are
    proportional, or only one set is given, the set's two widest directions are used.
    """
    (name_a, a), rest = named[0], named[1:]
    shape_a = spread(a)
    k = shape_a.shape[0]
    _, vecs, keep = eigen(shape_a)
    range_a = vecs[:, keep]
    if rest:
        name_b, b = rest[0]
        shape_b = spread(b)
        _, vecs_b, keep_b = eigen(shape_b)
        # range(S_a) ∩ range(S_b): the null space of the sum of the two orthogonal projectors' complements.
        outside = (np.eye(k) - range_a @ range_a.T) + (np.eye(k) - vecs_b[:, keep_b] @ vecs_b[:, keep_b].T)
        vals_o, vecs_o = np.linalg.eigh(outside)
        common = vecs_o[:, vals_o < 1e-8]
        if common.shape[1] < 2:
            raise ValueError(f"directions=None: sets[{name_a!r}] and sets[{name_b!r}] bound fewer than two "
                             "common directions; pass directions=")
        reduced_a = common.T @ shape_a @ common
        reduced_b = common.T @ shape_b @ common
        ratio, gen = linalg.eigh(0.5 * (reduced_a + reduced_a.T), 0.5 * (reduced_b + reduced_b.T))
        if ratio[-1] > ratio[0] * (1 + 1e-6):
            p = orthonormal(common @ gen[:, [-1, 0]], "directions")
            # Width ratio along the drawn (orthonormalised) directions.
            along = np.sqrt(np.einsum("ki,kl,li->i", p, shape_a, p) / np.einsum("ki,kl,li->i", p, shape_b, p))
            template = f"(width {name_a} / {name_b} = {{:.3g}})"
            return p, [f"where '{name_a}' is widest relative to '{name_b}'\n" + template.format(along[0]),
                       f"where '{name_b}' is widest relative to '{name_a}'\n" + template.format(along[1])]
        range_a = common
    if range_a.shape[1] < 2:
        raise ValueError(f"directions=None: sets[{name_a!r}] bounds fewer than two directions; "
                         "pass directions=")
    return (orthonormal(widest(shape_a, range_a), "directions"),
            [f"the widest direction of '{name_a}'", "its second widest direction"])


def projection_directions(directions, named, labels) -> tuple[np.ndarray, list[str]]:
    """(k × 2 orthonormal P, axis labels) from the ``directions`` argument of :func:`plot_sets`."""
    coordinates = named[0][1].coordinates
    k, symbol = coordinates.dim, theta_symbol(coordinates)
    if directions is None:
        p, names = differing_directions(named)
        names = [f"d{i}ᵀ{symbol}: {name}" for i, name in zip("₁₂", names, strict=True)]
    elif isinstance(directions, np.ndarray) and directions.ndim == 2:
        if directions.shape != (k, 2) or not np.isfinite(directions).all():
            raise ValueError(f"directions must be a finite ({k}, 2) array of direction vectors, got shape "
                             f"{directions.shape}")
        p = orthonormal(np.asarray(directions, dtype=float), "directions")
        names = [f"d₁ᵀ{symbol} (direction 1)", f"d₂ᵀ{symbol} (direction 2, orthonormalised)"]
    else:
        if isinstance(directions, str) or not isinstance(directions, Sequence | np.ndarray) \
                or len(directions) != 2:
            raise TypeError("directions must be None, a pair of coordinate indices or labels, or a (k, 2) "
                            f"array; got {directions!r}")
        all_labels = coordinates.labels()
        index = []
        for d in directions:
            if isinstance(d, str):
                if d not in all_labels:
                    shown = ", ".join(all_labels[:6]) + (", …" if len(all_labels) > 6 else "")
                    raise ValueError(f"directions: {d!r} is not a coordinate label of the sets' "
                                     f"{type(coordinates).__name__} (labels: {shown})")
                index.append(all_labels.index(d))
            elif is_integer(d):
                if not 0 <= d < k:
                    raise ValueError(f"directions: coordinate index {d} is outside 0..{k - 1}")
                index.append(int(d))
            else:
                raise TypeError(f"directions: each coordinate must be an int index or a str label, got {d!r}")
        if index[0] == index[1]:
            raise ValueError(f"directions: the two coordinates are the same ({all_labels[index[0]]!r})")
        p = np.eye(k)[:, index]
        names = [f"{symbol} {all_labels[i]}" for i in index]
    if labels is not None:
        if isinstance(labels, str) or len(labels) != 2:
            raise ValueError(f"labels must be two axis labels, got {labels!r}")
        names = [str(lab) for lab in labels]
    return p, names


def value_direction(policy: Policy, uncertainty_set, population: Population) -> np.ndarray:
    """m(π) = E_ρ Σ_a π(a | x, s) z(x, s, a): the direction along which a policy's value θᵀm(π) is read.

    The exact objective's worst case over a set is min_(θ ∈ set) θᵀm(π), so projecting
    the sets on m(π) (and another direction) shows the pessimistic value of the policy
    as the lowest point of each set along the first axis (``plot_sets(..., directions=
    np.column_stack([m, other]))``).

    Parameters
    ----------
    policy : Policy
        Solved on ``population``.
    uncertainty_set : set
        Gives the coordinates of z (any set of the fit).
    population : Population

    Returns
    -------
    ndarray, shape (k,)
        Not normalised: θᵀm(π) is the policy's value relative to the reference action.

    Examples
    --------
    >>> wald = fit.calibrated_set(0.9)
    >>> exact = bl.pessimistic_policy(wald, pop, objective="exact")
    >>> m = bl.plots.value_direction(exact, wald, pop)
    >>> bool(np.isclose(wald.lower_bound(m), exact.pessimistic_value, rtol=1e-3))  # the worst case along m(π)
    True
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    if policy.unit_of_row.shape[0] != population.n:
        raise ValueError(f"policy was solved on {policy.unit_of_row.shape[0]} rows, population has "
                         f"{population.n}")
    units = population.units(policy.scope)
    z = mean_candidate_features(uncertainty_set, population, units, policy.reference_action)
    return np.einsum("u,ua,uak->k", units.weights, policy.probabilities, z)


def held_precision(s: EllipsoidSet, name: str) -> np.ndarray:
    """The set's W; a set that holds only W's factor (EllipsoidSet.factored, LLM width) is refused."""
    if s.precision is None:
        raise ValueError(f"{name}: the set holds only W's Cholesky factor (k = {s.dim}, "
                         "EllipsoidSet.factored), not the W this plot decomposes")
    return s.precision


def project_ellipsoid(s: EllipsoidSet, p: np.ndarray):
    """The projection {Pᵀθ : θ ∈ s}: ("ellipse", points), ("strip", centre, along, across, half) or
    ("plane", centre)."""
    centre = p.T @ s.center
    _, vecs, keep = eigen(held_precision(s, "plot_sets"))
    null = vecs[:, ~keep]
    u, sv, _ = np.linalg.svd(p.T @ null) if null.shape[1] else (np.eye(2), np.zeros(0), None)
    unbounded = int((sv > get_config()["identified_rtol"]).sum())
    if unbounded == 2:
        return ("plane", centre)
    if unbounded == 1:
        along, across = u[:, 0], u[:, 1]
        half = s.radius * float(np.linalg.norm(s.factor.T @ (p @ across)))
        return ("strip", centre, along, across, half)
    m = s.radius * (p.T @ s.factor)  # 2 × k_eff: the projection of the unit ball
    vals, vecs2 = np.linalg.eigh(m @ m.T)
    root = vecs2 @ np.diag(np.sqrt(np.maximum(vals, 0.0))) @ vecs2.T  # (R² Pᵀ W⁺ P)^½
    t = np.linspace(0.0, 2.0 * np.pi, get_config()["ellipse_points"])
    return ("ellipse", centre[:, None] + root @ np.vstack([np.cos(t), np.sin(t)]))
