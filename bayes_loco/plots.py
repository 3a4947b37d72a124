"""Figures of uncertainty sets, policies and study results.

Geometry that ArviZ does not draw, in the coordinates the sets live in:

- :func:`plot_sets`: ellipsoids (Gram, Wald, credible, sandwich) and hulls of draws projected
  on two directions, with posterior draws and θ*; :func:`value_direction` gives a policy's
  value direction m(π) to project on;
- :func:`plot_spectrum`: the eigenvalues of W, which directions the data reach (k_eff);
- :func:`plot_reward_intervals`: each action's reward interval at one (x, s) under each set;
- :func:`plot_policies`: several methods' policies on one population, side by side;
- :func:`plot_calibration` (with :func:`calibration`) and :func:`plot_results`: coverage against
  nominal level and study results, from a study's CSV or from
  :func:`bayes_loco.experiments.compare_policies`;
- :func:`plot_reliability`: held-out reliability diagrams of predicted probabilities
  (:func:`bayes_loco.evaluate.calibration_curve`), no truth needed.

For the posterior's own marginals, pairs and traces use ArviZ on the fit's tree, e.g.
``arviz_plots.plot_dist(post.tree, var_names=["theta_rtv"])``: those are not re-drawn here.

Every function draws on the Axes it is given (``ax=``) or on a new figure, and returns the
Axes (or, for the study figures, the Figure). Nothing here selects a backend, shows a figure or
changes rcParams: importing this module leaves matplotlib as it was (without a display,
matplotlib picks Agg itself), and the figures are returned open, for the caller to show, save
or close.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ._validation import check_int
from .coordinates import RANGE_RTOL, RTVBasis
from .data import Population
from .evaluate import truth_theta
from .model import rewards
from .policy import Policy, candidate_features
from .sets import DrawsSet, EllipsoidSet, QuantileSet
from .sets.ellipsoid import IDENTIFIED_RTOL

__all__ = ["LEVELS", "calibration", "plot_calibration", "plot_policies", "plot_reliability", "plot_results",
           "plot_reward_intervals", "plot_sets", "plot_spectrum", "value_direction"]

# Points on each projected ellipse.
ELLIPSE_POINTS = 361


# ---------------------------------------------------------------------------------------- helpers


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    """``ax``, or the Axes of a new pyplot figure (so that notebooks display it)."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _named(items, what: str) -> list[tuple[str, object]]:
    """(name, item) pairs of a Mapping, or of a sequence named by each item's ``kind``."""
    if isinstance(items, Mapping):
        pairs = [(str(name), item) for name, item in items.items()]
    elif hasattr(items, "lower_bound"):  # one set on its own
        pairs = [(str(getattr(items, "kind", "set")), items)]
    elif isinstance(items, Sequence) and not isinstance(items, str):
        pairs, seen = [], {}
        for item in items:
            base = str(getattr(item, "kind", type(item).__name__))
            seen[base] = seen.get(base, 0) + 1
            pairs.append((base if seen[base] == 1 else f"{base} ({seen[base]})", item))
    else:
        raise TypeError(f"{what} must be a mapping name -> set or a sequence of sets, got "
                        f"{type(items).__name__}")
    if not pairs:
        raise ValueError(f"{what} is empty: give at least one")
    return pairs


def _mapping_pairs(items, what: str, of: str) -> list[tuple[str, object]]:
    """The (name, item) pairs of a non-empty mapping ``what`` (name -> ``of``), or one error naming it."""
    if not isinstance(items, Mapping):
        raise TypeError(f"{what} must be a mapping name -> {of}, got {type(items).__name__}")
    if not items:
        raise ValueError(f"{what} is empty: give at least one")
    return list(items.items())


def _same_coordinates(a, b) -> bool:
    """Whether two Coordinates objects are the same map (RTV bases compared by value)."""
    if a is b:
        return True
    if type(a) is not type(b) or (a.d_x, a.d_phi, a.dim) != (b.d_x, b.d_phi, b.dim):
        return False
    if isinstance(a, RTVBasis):
        return a.rank == b.rank and np.allclose(a.left, b.left) and np.allclose(a.right, b.right)
    return True


def _check_sets(sets, *, drawable: bool) -> list[tuple[str, object]]:
    """Named sets, all in the same coordinates; ``drawable``: only ellipsoids and hulls of draws."""
    pairs = _named(sets, "sets")
    for name, s in pairs:
        if drawable and isinstance(s, QuantileSet):
            raise TypeError(f"sets[{name!r}] is a QuantileSet, a pointwise posterior quantile of θᵀz: it is "
                            "not a set of θ and has no shape to project. Use kind='draws' (the hull) or "
                            "'credible', or plot_reward_intervals for its pointwise intervals.")
        if drawable and not isinstance(s, EllipsoidSet | DrawsSet):
            raise TypeError(f"sets[{name!r}] must be an EllipsoidSet or a DrawsSet, got {type(s).__name__}")
        if not drawable and not (hasattr(s, "lower_bound") and hasattr(s, "coordinates")):
            raise TypeError(f"sets[{name!r}] must be an uncertainty set (coordinates and lower_bound), "
                            f"got {type(s).__name__}")
    first_name, first = pairs[0]
    for name, s in pairs[1:]:
        if s.coordinates.dim != first.coordinates.dim:
            raise ValueError(f"sets must live in the same coordinates: sets[{first_name!r}] has "
                             f"k = {first.coordinates.dim}, sets[{name!r}] has k = {s.coordinates.dim}")
        if not _same_coordinates(s.coordinates, first.coordinates):
            raise ValueError(f"sets must live in the same coordinates: sets[{name!r}] and "
                             f"sets[{first_name!r}] have different {type(s.coordinates).__name__}s (fit "
                             "the posterior with basis= or start= the frequentist fit's low-rank fit)")
    return pairs


def _theta_symbol(coordinates) -> str:
    return "θ_rtv" if isinstance(coordinates, RTVBasis) else "θ"


def _orthonormal(vectors: np.ndarray, what: str) -> np.ndarray:
    """Columns of ``vectors`` (k × 2) orthonormalised by Gram–Schmidt, keeping the first's direction."""
    q, r = np.linalg.qr(vectors)
    diag = np.abs(np.diag(r))
    if diag.min() <= 1e-10 * max(diag.max(), np.finfo(float).tiny):
        raise ValueError(f"{what}: the two directions are parallel (or one is zero); give two independent "
                         "directions")
    return q * np.sign(np.diag(r))


def _truth_vector(truth, coordinates, what: str = "truth") -> np.ndarray:
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


def _eigen(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues and vectors of a symmetric PSD matrix, split by the range rule of the sets."""
    vals, vecs = np.linalg.eigh(0.5 * (matrix + matrix.T))
    keep = vals > RANGE_RTOL * max(vals.max(), np.finfo(float).tiny)
    return vals, vecs, keep


def _shape(s) -> np.ndarray:
    """The set's spread matrix: R² W⁺ for an ellipsoid, the draws' covariance for a hull."""
    if isinstance(s, EllipsoidSet):
        return s.radius**2 * (s.factor @ s.factor.T)
    return np.atleast_2d(np.cov(s.draws, rowvar=False)) if s.draws.shape[0] > 1 else np.zeros((s.dim,) * 2)


def _widest(shape: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The two widest directions of ``shape`` within span(``basis``)."""
    _, vecs = np.linalg.eigh(basis.T @ shape @ basis)
    return basis @ vecs[:, [-1, -2]]


def _differing_directions(named) -> tuple[np.ndarray, list[str]]:
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
    shape_a = _shape(a)
    k = shape_a.shape[0]
    _, vecs, keep = _eigen(shape_a)
    range_a = vecs[:, keep]
    if rest:
        name_b, b = rest[0]
        shape_b = _shape(b)
        _, vecs_b, keep_b = _eigen(shape_b)
        # range(S_a) ∩ range(S_b): the null space of the sum of the two orthogonal projectors' complements.
        outside = (np.eye(k) - range_a @ range_a.T) + (np.eye(k) - vecs_b[:, keep_b] @ vecs_b[:, keep_b].T)
        vals_o, vecs_o = np.linalg.eigh(outside)
        common = vecs_o[:, vals_o < 1e-8]
        if common.shape[1] < 2:
            raise ValueError(f"directions=None: sets[{name_a!r}] and sets[{name_b!r}] bound fewer than two "
                             "common directions; pass directions=")
        from scipy import linalg

        reduced_a = common.T @ shape_a @ common
        reduced_b = common.T @ shape_b @ common
        ratio, gen = linalg.eigh(0.5 * (reduced_a + reduced_a.T), 0.5 * (reduced_b + reduced_b.T))
        if ratio[-1] > ratio[0] * (1 + 1e-6):
            p = _orthonormal(common @ gen[:, [-1, 0]], "directions")
            # Width ratio along the drawn (orthonormalised) directions.
            along = np.sqrt(np.einsum("ki,kl,li->i", p, shape_a, p) / np.einsum("ki,kl,li->i", p, shape_b, p))
            template = f"(width {name_a} / {name_b} = {{:.3g}})"
            return p, [f"where '{name_a}' is widest relative to '{name_b}'\n" + template.format(along[0]),
                       f"where '{name_b}' is widest relative to '{name_a}'\n" + template.format(along[1])]
        range_a = common
    if range_a.shape[1] < 2:
        raise ValueError(f"directions=None: sets[{name_a!r}] bounds fewer than two directions; "
                         "pass directions=")
    return (_orthonormal(_widest(shape_a, range_a), "directions"),
            [f"the widest direction of '{name_a}'", "its second widest direction"])


def _directions(directions, named, labels) -> tuple[np.ndarray, list[str]]:
    """(k × 2 orthonormal P, axis labels) from the ``directions`` argument of :func:`plot_sets`."""
    coordinates = named[0][1].coordinates
    k, symbol = coordinates.dim, _theta_symbol(coordinates)
    if directions is None:
        p, names = _differing_directions(named)
        names = [f"d{i}ᵀ{symbol}: {name}" for i, name in zip("₁₂", names, strict=True)]
    elif isinstance(directions, np.ndarray) and directions.ndim == 2:
        if directions.shape != (k, 2) or not np.isfinite(directions).all():
            raise ValueError(f"directions must be a finite ({k}, 2) array of direction vectors, got shape "
                             f"{directions.shape}")
        p = _orthonormal(np.asarray(directions, dtype=float), "directions")
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
            elif isinstance(d, int | np.integer) and not isinstance(d, bool):
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

    The exact objective's worst case over a set is min_{θ ∈ set} θᵀm(π), so projecting
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
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    if policy.unit_of_row.shape[0] != population.n:
        raise ValueError(f"policy was solved on {policy.unit_of_row.shape[0]} rows, population has "
                         f"{population.n}")
    units = population.units(policy.scope)
    z = units.mean(candidate_features(uncertainty_set, population, policy.reference_action))
    return np.einsum("u,ua,uak->k", units.weights, policy.probabilities, z)


# -------------------------------------------------------------------------------------- plot_sets


def _ellipse(s: EllipsoidSet, p: np.ndarray):
    """The projection {Pᵀθ : θ ∈ s}: ("ellipse", points), ("strip", centre, along, across, half) or
    ("plane", centre)."""
    centre = p.T @ s.center
    _, vecs, keep = _eigen(_held_precision(s, "plot_sets"))
    null = vecs[:, ~keep]
    u, sv, _ = np.linalg.svd(p.T @ null) if null.shape[1] else (np.eye(2), np.zeros(0), None)
    unbounded = int((sv > IDENTIFIED_RTOL).sum())
    if unbounded == 2:
        return ("plane", centre)
    if unbounded == 1:
        along, across = u[:, 0], u[:, 1]
        half = s.radius * float(np.linalg.norm(s.factor.T @ (p @ across)))
        return ("strip", centre, along, across, half)
    m = s.radius * (p.T @ s.factor)  # 2 × k_eff: the projection of the unit ball
    vals, vecs2 = np.linalg.eigh(m @ m.T)
    root = vecs2 @ np.diag(np.sqrt(np.maximum(vals, 0.0))) @ vecs2.T  # (R² Pᵀ W⁺ P)^{1/2}
    t = np.linspace(0.0, 2.0 * np.pi, ELLIPSE_POINTS)
    return ("ellipse", centre[:, None] + root @ np.vstack([np.cos(t), np.sin(t)]))


def plot_sets(sets, *, directions=None, draws=None, truth=None, labels=None, ax: Axes | None = None) -> Axes:
    """Uncertainty sets and draws projected on two directions, with θ* when known.

    An ellipsoid {θ : (θ − θ̂)ᵀW(θ − θ̂) ≤ R²} projected on the span of an orthonormal
    P (k × 2) is the ellipse Pᵀθ̂ + R (PᵀW⁺P)^{1/2} u, ‖u‖ = 1, drawn as a closed line
    with a "+" at its centre. The projection is bounded only when P lies in range(W):
    along a direction that leaves it (a direction no comparison reaches) the set is a
    cylinder. Then what is bounded is drawn and the legend says so: a strip between two
    dashed lines when one direction of the plane is unbounded, only the centre when
    both are. A hull of draws (:class:`~bayes_loco.DrawsSet`) is drawn as the convex
    hull of its projected draws, its draws faintly.

    Parameters
    ----------
    sets : mapping name -> set, or sequence of sets
        :class:`~bayes_loco.EllipsoidSet` and :class:`~bayes_loco.DrawsSet` in the same
        coordinates; a sequence is named by each set's ``kind``. A
        :class:`~bayes_loco.QuantileSet` is not a set of θ and is refused.
    directions : None, pair of int or str, or ndarray of shape (k, 2)
        None: the two directions where the first two sets differ most — the top and
        bottom generalised eigenvectors of their spread matrices (R²W⁺, or the draws'
        covariance) on the directions both bound, where the ratio of their widths is
        largest each way; with one set, its two widest directions. A pair of
        coordinate indices or labels (``set.coordinates.labels()``, e.g. ``"11 (u0, v0)"``).
        A (k, 2) array of direction vectors, orthonormalised (the first kept), e.g.
        ``np.column_stack([value_direction(policy, s, pop), other])``.
    draws : ndarray of shape (J, k), optional
        Draws to scatter faintly, e.g. ``post.rtv_draws``.
    truth : ndarray or Problem, optional
        θ* in the sets' coordinates (k,), or Θ* (d_x × d_φ), or anything with ``.theta``
        (a Problem); mapped by ``coordinates.to_coordinates`` and drawn as a black star
        labelled "θ*".
    labels : pair of str, optional
        Axis labels for the two directions (default: the coordinate labels, or what each
        direction is).
    ax : matplotlib Axes, optional
        Where to draw; a new figure when None.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        A QuantileSet or another object in ``sets``; malformed ``directions``.
    ValueError
        Sets of different dimensions or coordinates, a direction label that is not a
        coordinate label, parallel directions, ``draws`` or ``truth`` of the wrong shape.
    """
    named = _check_sets(sets, drawable=True)
    coordinates = named[0][1].coordinates
    k = coordinates.dim
    p, names = _directions(directions, named, labels)
    star = None if truth is None else p.T @ _truth_vector(truth, coordinates)
    if draws is not None:
        draws = np.asarray(draws, dtype=float)
        if draws.ndim != 2 or draws.shape[1] != k:
            raise ValueError(f"draws must have shape (J, {k}) to match the sets' coordinates, "
                             f"got {draws.shape}")
    ax = _new_axes(ax, (6.0, 5.0))
    if draws is not None:
        projected = draws @ p
        ax.scatter(projected[:, 0], projected[:, 1], s=4, color="0.55", alpha=0.25, linewidths=0,
                   rasterized=True, label=f"draws ({draws.shape[0]})", gid="draws")
    for i, (name, s) in enumerate(named):
        colour = f"C{i}"
        if isinstance(s, DrawsSet):
            _draw_hull(ax, s.draws @ p, name, colour)
            continue
        shape = _ellipse(s, p)
        centre = shape[1] if shape[0] != "ellipse" else p.T @ s.center
        if shape[0] == "ellipse":
            ax.plot(shape[1][0], shape[1][1], color=colour, lw=1.8, label=name, gid="ellipse")
            ax.plot(*centre, marker="+", ms=9, color=colour, ls="none", label=f"_{name} centre", gid="centre")
        elif shape[0] == "strip":
            _, _, along, across, half = shape
            for j, sign in enumerate((-1.0, 1.0)):
                start = centre + sign * half * across
                ax.axline(tuple(start), tuple(start + along), color=colour, lw=1.5, ls="--", gid="strip",
                          label=f"{name} (unbounded along one direction: a strip)" if j == 0 else f"_{name}")
            ax.plot(*centre, marker="+", ms=9, color=colour, ls="none", label=f"_{name} centre", gid="centre")
        else:
            ax.plot(*centre, marker="+", ms=9, color=colour, ls="none", gid="centre",
                    label=f"{name} (unbounded in this plane: centre only)")
    if star is not None:
        ax.plot(*star, marker="*", ms=15, color="black", markeredgecolor="white", ls="none", zorder=5,
                label="θ*", gid="truth")
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", framealpha=0.85)
    return ax


def _draw_hull(ax: Axes, points: np.ndarray, name: str, colour: str) -> None:
    """The convex hull of 2-d points as a closed line, the points faintly."""
    from scipy.spatial import ConvexHull, QhullError

    ax.scatter(points[:, 0], points[:, 1], s=5, color=colour, alpha=0.3, linewidths=0, rasterized=True,
               label=f"_{name} draws", gid="hull draws")
    try:
        hull = ConvexHull(points)
        ring = points[np.append(hull.vertices, hull.vertices[0])]
        label = name
    except (QhullError, ValueError):  # fewer than 3 draws, or all on a line: the segment they span
        centred = points - points.mean(axis=0)
        axis = np.linalg.svd(centred, full_matrices=False)[2][0] if len(points) > 1 else np.zeros(2)
        t = centred @ axis
        ring = points[[int(t.argmin()), int(t.argmax())]]
        label = f"{name} (degenerate hull)"
    ax.plot(ring[:, 0], ring[:, 1], color=colour, lw=1.8, label=label, gid="hull")


# ----------------------------------------------------------------------------------- plot_spectrum


def _held_precision(s: EllipsoidSet, name: str) -> np.ndarray:
    """The set's W; a set that holds only W's factor (EllipsoidSet.factored, LLM width) is refused."""
    if s.precision is None:
        raise ValueError(f"{name}: the set holds only W's Cholesky factor (k = {s.dim}, "
                         "EllipsoidSet.factored), not the W this plot decomposes")
    return s.precision


def _precision_of(item, name: str) -> np.ndarray:
    if isinstance(item, EllipsoidSet):
        return _held_precision(item, f"items[{name!r}]")
    if hasattr(item, "calibrated_set"):  # a Fit: its Wald set, or a posterior's credible ellipsoid
        s = item.calibrated_set(0.9)
        if not isinstance(s, EllipsoidSet):
            raise TypeError(f"items[{name!r}]: its calibrated_set(0.9) is a {type(s).__name__}, not an "
                            "ellipsoid with a W")
        return _held_precision(s, f"items[{name!r}]")
    if isinstance(item, np.ndarray) and item.ndim == 2 and item.shape[0] == item.shape[1]:
        return item
    raise TypeError(f"items[{name!r}] must be an EllipsoidSet, a Fit or a square precision matrix, got "
                    f"{type(item).__name__}")


def plot_spectrum(items, *, ax: Axes | None = None) -> Axes:
    """Eigenvalues of W in decreasing order, log scale: which directions the data reach.

    Each item's eigenvalues λ₁ ≥ … ≥ λ_k of its W (the precision of its ellipsoid: the
    Gram matrix of the paper's set, the Fisher information of a Wald set, the inverse
    posterior covariance of a credible set on the identified directions) are drawn
    against their rank. Eigenvalues at or below ``RANGE_RTOL`` = 1e-10 of the largest
    are directions no comparison reaches (:mod:`bayes_loco.coordinates`): they are drawn
    as hollow triangles at the floor 1e-12·λ₁, and a dashed vertical line in the item's
    colour at k_eff + ½ marks the cut (none when every direction is identified).

    Parameters
    ----------
    items : mapping name -> EllipsoidSet, Fit or ndarray
        A Fit contributes the W of ``fit.calibrated_set(0.9)`` (a Wald set, or a
        posterior's credible ellipsoid); an array is taken as W itself.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    named = _mapping_pairs(items, "items", "EllipsoidSet or Fit")
    ax = _new_axes(ax, (6.5, 4.2))
    for i, (name, item) in enumerate(named):
        w = np.asarray(_precision_of(item, str(name)), dtype=float)
        vals = np.linalg.eigvalsh(0.5 * (w + w.T))[::-1]
        top = max(float(vals[0]), np.finfo(float).tiny)
        identified = vals > RANGE_RTOL * top
        k_eff, k = int(identified.sum()), vals.size
        rank = np.arange(1, k + 1)
        colour = f"C{i}"
        ax.plot(rank[identified], vals[identified], marker="o", ms=3.5, lw=1.2, color=colour, gid="spectrum",
                label=f"{name} (k = {k}, k_eff = {k_eff})")
        if k_eff < k:
            ax.plot(rank[~identified], np.full(k - k_eff, 1e-12 * top), marker="v", ms=4, ls="none",
                    markerfacecolor="none", color=colour, gid="unidentified", label=f"_{name} unidentified")
        if k_eff < k:  # the cut between the last identified and the first unidentified direction
            ax.axvline(k_eff + 0.5, color=colour, ls="--", lw=1.0, gid="k_eff", label=f"_{name} k_eff")
    ax.set_yscale("log")
    ax.set_xlabel("i (eigenvalues in decreasing order)")
    ax.set_ylabel("eigenvalue λᵢ of W")
    ax.grid(alpha=0.3, which="major")
    handles, names = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls="--", lw=1.0),
                Line2D([], [], color="0.3", marker="v", markerfacecolor="none", ls="none")]
    names += ["k_eff cut (λ ≤ 1e-10·λ₁: not identified)", "unidentified λ (drawn at 1e-12·λ₁)"]
    ax.legend(handles, names, fontsize=8, loc="best", framealpha=0.85)
    return ax


# --------------------------------------------------------------------------- plot_reward_intervals


def _point(s, z: np.ndarray) -> np.ndarray | None:
    """The set's point estimate of θᵀz: the ellipsoid's centre, the mean of the draws."""
    if isinstance(s, EllipsoidSet):
        return z @ s.center
    draws = getattr(s, "draws", None)
    return None if draws is None else z @ np.asarray(draws).mean(axis=0)


def plot_reward_intervals(sets, population: Population, row: int, *, truth=None, reference_action: int = 0,
                          ax: Axes | None = None) -> Axes:
    """Each action's reward interval at one (x, s) under each set, against the truth when known.

    For population row ``row`` and each action a the interval is
    [min_{θ ∈ set} θᵀz_a, max_{θ ∈ set} θᵀz_a] with z_a = z(x, s, a) − z(x, s, a_ref)
    (:func:`~bayes_loco.policy.candidate_features`): the lower end is
    ``lower_bound(z_a)``, the upper ``−lower_bound(−z_a)``. For an ellipsoid that is
    θ̂ᵀz_a ± R‖z_a‖_{W⁻¹}; for a hull of draws the range of θ_jᵀz_a; for a
    QuantileSet the pointwise central interval of the posterior of θᵀz_a. The marker
    is the set's point estimate (centre, mean of the draws). The reference action's
    interval is the point 0. An unbounded end (z_a outside range(W)) is drawn to the
    edge of the axes with an arrow head.

    Parameters
    ----------
    sets : mapping name -> set, or sequence of sets
        Any uncertainty sets (a sequence is named by ``kind``), in the same coordinates.
    population : Population
    row : int
        The row (x, s) of ``population``.
    truth : Problem or ndarray, optional
        Θ* (d_x × d_φ) or anything with ``.theta``: the true reward difference
        r*(x, s, a) − r*(x, s, a_ref) = xᵀΘ*(φ(s, a) − φ(s, a_ref)) is marked with a black
        diamond. (The sets bound the RTV part of it; the truncated block is second order.)
    reference_action : int
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    named = _check_sets(sets, drawable=False)
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    row = check_int(row, "row", 0, population.n - 1)
    reference_action = check_int(reference_action, "reference_action", 0, population.n_actions - 1)
    one = Population(population.contexts[row:row + 1], population.features[row:row + 1],
                     population.states[row:row + 1])
    n_actions, m = population.n_actions, len(named)
    step = 0.8 / m
    found = []
    for name, s in named:
        z = candidate_features(s, one, reference_action)[0]
        lower, upper = s.lower_bound(z), -s.lower_bound(-z)
        point = _point(s, z)
        found.append((name, lower, upper, point))
    true_difference = None
    if truth is not None:
        r = rewards(truth_theta(truth, population.d_x, population.d_phi), one.contexts, one.features)[0]
        true_difference = r - r[reference_action]
    finite = np.concatenate([np.r_[lo[np.isfinite(lo)], up[np.isfinite(up)]] for _, lo, up, _ in found]
                            + ([] if true_difference is None else [true_difference]))
    span = (finite.min(), finite.max()) if finite.size else (-1.0, 1.0)
    pad = 0.08 * max(span[1] - span[0], 1e-12)
    left, right = span[0] - pad, span[1] + pad
    y_base = np.arange(n_actions, dtype=float)
    ax = _new_axes(ax, (6.5, 1.4 + n_actions * (0.25 + 0.12 * m)))
    for j, (name, lower, upper, point) in enumerate(found):
        y = y_base + (j - (m - 1) / 2) * step
        lo, up = np.where(np.isfinite(lower), lower, left), np.where(np.isfinite(upper), upper, right)
        mid = np.where(np.isfinite(point), point, 0.5 * (lo + up)) if point is not None else 0.5 * (lo + up)
        mid = np.clip(mid, lo, up)
        ax.errorbar(mid, y, xerr=np.vstack([mid - lo, up - mid]), fmt="o", ms=4, capsize=3, lw=1.5,
                    color=f"C{j}", label=name, gid=f"interval {name}")
        for ends, arrow in ((~np.isfinite(lower), "<"), (~np.isfinite(upper), ">")):
            if ends.any():
                ax.plot(np.full(ends.sum(), left if arrow == "<" else right), y[ends], marker=arrow,
                        ls="none", color=f"C{j}", label=f"_{name} unbounded")
    if true_difference is not None:
        ax.plot(true_difference, y_base, marker="D", ms=6, color="black", ls="none", zorder=5,
                label="true r*(a) − r*(a_ref)", gid="truth")
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_yticks(y_base, [f"a = {a}" + (" (ref.)" if a == reference_action else "")
                           for a in range(n_actions)])
    ax.set_ylim(n_actions - 0.5, -0.5)  # action 0 on top
    ax.set_xlim(left, right)
    ax.set_xlabel("reward difference θᵀz(x, s, a) = r(x, s, a) − r(x, s, a_ref)")
    ax.set_ylabel("action")
    ax.set_title(f"population row {row}: reward intervals under each set", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="best", framealpha=0.85)
    return ax


# ----------------------------------------------------------------------------------- plot_policies


def plot_policies(policies, *, max_units: int = 40, ax: Axes | None = None) -> Axes:
    """The policies of several methods on one population, one band each, side by side.

    Each band is a policy; each column a unit (a population row (x, s) for personalised
    policies, a state for global ones; rows when the policies' units differ). A column
    stacks π(a | unit) in the action's colour, so a deterministic unit is one colour and
    a mixed unit shows its probabilities as the heights of several. The tick label of a
    band gives the policy's name and its number of mixed units among those shown.

    Parameters
    ----------
    policies : mapping name -> Policy
        Solved on the same population (same rows and actions).
    max_units : int
        Show the first ``max_units`` units.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    named = _mapping_pairs(policies, "policies", "Policy")
    max_units = check_int(max_units, "max_units", 1)
    for name, policy in named:
        if not isinstance(policy, Policy):
            raise TypeError(f"policies[{name!r}] must be a Policy, got {type(policy).__name__}")
    first_name, first = named[0]
    for name, policy in named[1:]:
        if policy.unit_of_row.shape != first.unit_of_row.shape or \
                policy.probabilities.shape[1] != first.probabilities.shape[1]:
            raise ValueError(f"policies must be solved on one population: policies[{name!r}] has "
                             f"{policy.unit_of_row.shape[0]} rows and {policy.probabilities.shape[1]} "
                             "actions, "
                             f"policies[{first_name!r}] {first.unit_of_row.shape[0]} and "
                             f"{first.probabilities.shape[1]}")
    same_units = all(np.array_equal(p.unit_of_row, first.unit_of_row) for _, p in named)
    if same_units:
        tables = [p.probabilities[:max_units] for _, p in named]
        unit = "state s" if first.scope == "global" else "population row (x, s)"
    else:
        tables = [p.row_probabilities[:max_units] for _, p in named]
        unit = "population row (x, s) (the policies' units differ)"
    n_units, n_actions = tables[0].shape
    ax = _new_axes(ax, (min(0.2 * n_units + 3.5, 14.0), 0.55 * len(named) + 1.6))
    colours = plt.get_cmap("tab10" if n_actions <= 10 else "tab20" if n_actions <= 20 else "turbo")
    colour = [colours(a if n_actions <= 20 else a / max(n_actions - 1, 1)) for a in range(n_actions)]
    x = np.arange(n_units)
    ticks = []
    for j, ((name, _), table) in enumerate(zip(named, tables, strict=True)):
        bottom = j - 0.4 + 0.8 * np.concatenate([np.zeros((n_units, 1)), np.cumsum(table, axis=1)[:, :-1]], 1)
        for a in range(n_actions):
            show = table[:, a] > 1e-9
            if show.any():
                ax.bar(x[show], 0.8 * table[show, a], bottom=bottom[show, a], width=0.9, color=colour[a],
                       linewidth=0, gid=f"policy {name}")
        mixed = int((table.max(axis=1) < 1 - 1e-9).sum())
        ticks.append(f"{name}\n({mixed} of {n_units} mixed)")
    ax.set_yticks(np.arange(len(named)), ticks, fontsize=8)
    ax.set_ylim(len(named) - 0.5, -0.5)  # the first policy on top
    ax.set_xlim(-0.6, n_units - 0.4)
    ax.set_xlabel(f"{unit}, first {n_units}")
    ax.legend(handles=[Patch(color=colour[a], label=f"a = {a}") for a in range(n_actions)], fontsize=8,
              title="action (bar height: π(a | unit))", title_fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


# ------------------------------------------------------------------ study results and calibration


def _finish(fig: Figure, title: str, n_panels: int, out: str | Path | None) -> Figure:
    """Title, layout, and ``<out>.png`` / ``<out>.pdf`` when ``out`` is given."""
    if title:
        # About 11 characters of 9-point text per inch of figure.
        fig.suptitle(textwrap.fill(title, width=max(45 * n_panels, int(11 * fig.get_figwidth()))), fontsize=9)
    fig.tight_layout()
    if out is not None:
        out = Path(out)
        for ext in ("png", "pdf"):
            fig.savefig(out.with_suffix(f".{ext}"), dpi=130)
    return fig


def _format_value(value) -> str:
    return f"{value:g}" if isinstance(value, float | int | np.floating | np.integer) else f"{value}"


def plot_results(results: pd.DataFrame, *, x: str = "n", panel: str | None = "imbalance",
                 y: str = "suboptimality", scope: str = "personalised", title: str = "",
                 out: str | Path | None = None) -> Figure:
    """Mean ± s.e. of ``y`` against ``x`` per method, one panel per value of ``panel``.

    Works on a study's results (``run_study``, its CSVs) and on the table of
    :func:`bayes_loco.experiments.compare_policies`: when ``x`` is not a column, or takes
    one value, the methods are compared side by side on a categorical axis; a ``panel``
    that is not a column gives one panel.

    Parameters
    ----------
    results : pandas.DataFrame
        One row per method × scope × task, with ``method`` and ``y`` (and ``scope``).
    x : str
        The horizontal axis (log scale when its grid spans a decade or more).
    panel : str or None
        One panel per value of this column.
    y : str
        The plotted column.
    scope : str
        Keep the rows of this ``scope`` (when the column exists).
    title : str
        The figure's title.
    out : path, optional
        Save ``<out>.png`` and ``<out>.pdf``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``y`` is not a column, or no row has ``scope``.
    """
    if y not in results:
        raise ValueError(f"y={y!r} is not a column of results (columns: "
                         f"{', '.join(map(str, results.columns))})")
    data = results[results["scope"] == scope] if "scope" in results else results
    if data.empty:
        raise ValueError(f"no results for scope={scope!r}")
    panels = [None] if panel is None or panel not in data else sorted(data[panel].dropna().unique())
    # No x (compare_policies' table) or one value of it (a single setting, as in the demo): compare
    # the methods side by side instead.
    has_x = x in data
    categorical = not has_x or data[x].nunique() <= 1
    n_methods = data["method"].nunique()
    width = max(4.2, 0.42 * n_methods + 1.6) if categorical else 4.2
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 3.6 + 0.9 * categorical),
                             sharey=True, squeeze=False)
    for ax, value in zip(axes[0], panels, strict=True):
        part = data if value is None else data[data[panel] == value]
        for i, (method, rows) in enumerate(part.groupby("method", sort=False)):
            if categorical:
                values = rows[y].astype(float)
                count = values.count()
                mean, se = values.mean(), values.std() / np.sqrt(count) if count > 1 else 0.0
                ax.errorbar([i], [mean], yerr=[0.0 if np.isnan(se) else se], marker="o", ms=5, capsize=3,
                            label=method)
                continue
            stats = rows.groupby(x)[y].agg(["mean", "std", "count"])
            se = stats["std"].fillna(0) / np.sqrt(stats["count"])
            ax.errorbar(stats.index, stats["mean"], yerr=se, marker="o", ms=5, capsize=3, label=method)
        if categorical:
            names = list(part.groupby("method", sort=False).groups)
            ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
            ax.set_xlabel(f"method ({x} = {_format_value(data[x].iloc[0])})" if has_x else "method")
        else:
            ax.set_xlabel(x)
            grid = part[x].dropna().to_numpy(dtype=float)
            if grid.min() > 0 and grid.max() >= 10 * grid.min():  # N, C₂: grids spanning a decade or more
                ax.set_xscale("log")
        ax.set_title("" if value is None else f"{panel} = {_format_value(value)}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{y} ({scope})")
    if not categorical:  # the tick labels name the methods already
        axes[0][-1].legend(fontsize=8)
    return _finish(fig, title, len(panels), out)


LEVELS = np.linspace(0.05, 0.99, 48)


def calibration(results: pd.DataFrame, levels=LEVELS, *,
                by: tuple[str, ...] = ("method",)) -> pd.DataFrame:
    """Frequentist coverage of θ* against nominal level, for every ellipsoid method in ``results``.

    θ* lies in the level-α set (Wald or credible ellipsoid, radius² = χ²_{k_eff}(α))
    iff its W-distance² ≤ χ²_{k_eff}(α), so one run at any level gives the whole
    curve from the ``truth_distance`` and ``k_eff`` columns. Rows with no distance
    (greedy, hull, quantile sets; the paper's Gram set, whose radius is not a level)
    are left out.

    Parameters
    ----------
    results : pandas.DataFrame
        A study's results or :func:`~bayes_loco.experiments.compare_policies`' table, with
        ``truth_distance``, ``k_eff``, ``level`` and the ``by`` columns.
    levels : sequence of float
        Nominal levels in (0, 1).
    by : tuple of str
        One curve per group of these columns.

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, ``level``, ``coverage`` and ``seeds``.
    """
    from scipy import stats

    need = {"truth_distance", "k_eff", "level", *by}
    missing = need - set(results.columns)
    if missing:
        raise ValueError(f"results lack the columns {sorted(missing)}")
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 1 or levels.size == 0 or not ((levels > 0) & (levels < 1)).all():
        raise ValueError("levels must be a non-empty 1-d sequence in (0, 1)")
    rows = results[results["truth_distance"].notna() & results["k_eff"].notna() & results["level"].notna()]
    # One row per fitted set: the personalised and global rows of a task share it.
    keys = [c for c in ("study", "cell", "rep", *by) if c in rows]
    rows = rows.drop_duplicates(keys)
    out = []
    for group, part in rows.groupby(list(by), sort=False):
        d2 = part["truth_distance"].to_numpy() ** 2
        k = part["k_eff"].to_numpy()
        inside = d2[None, :] <= stats.chi2.ppf(levels[:, None], k[None, :])
        labels = dict(zip(by, group if isinstance(group, tuple) else (group,), strict=True))
        out.append(pd.DataFrame({**labels, "level": levels, "coverage": inside.mean(axis=1),
                                 "seeds": len(part)}))
    if not out:
        raise ValueError("results hold no ellipsoid with a level (Wald or credible) and a truth distance")
    return pd.concat(out, ignore_index=True)


def plot_calibration(results: pd.DataFrame, *, panel: str | None = None, title: str = "",
                     out: str | Path | None = None) -> Figure:
    """Coverage of θ* against nominal level per ellipsoid method, one panel per value of ``panel``.

    The grey band is the 95% binomial band around the diagonal for the number of
    seeds: a curve inside it is calibrated as far as the seeds can tell. The curves
    come from :func:`calibration`.

    Parameters
    ----------
    results : pandas.DataFrame
        As for :func:`calibration`.
    panel : str or None
        One panel per value of this column (e.g. ``"n"``).
    title : str
    out : path, optional
        Save ``<out>.png`` and ``<out>.pdf``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    by = ("method",) if panel is None or panel not in results else ("method", panel)
    table = calibration(results, by=by)
    panels = [None] if len(by) == 1 else sorted(table[panel].unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    for ax, value in zip(axes[0], panels, strict=True):
        part = table if value is None else table[table[panel] == value]
        seeds = int(part["seeds"].min())
        level = np.sort(part["level"].unique())
        half = 1.96 * np.sqrt(level * (1 - level) / seeds)
        ax.fill_between(level, level - half, level + half, color="0.85", label=f"±1.96 s.e. ({seeds} seeds)")
        ax.plot([0, 1], [0, 1], color="0.5", lw=0.8)
        for method, rows in part.groupby("method", sort=False):
            ax.plot(rows["level"], rows["coverage"], lw=1.8, label=method)
        ax.set_xlabel("nominal level")
        ax.set_title("" if value is None else f"{panel} = {value}")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("coverage of θ*_rtv")
    axes[0][-1].legend(fontsize=8, loc="best")
    return _finish(fig, title, len(panels), out)


# ------------------------------------------------------------------------------ reliability diagram

RELIABILITY_COLUMNS = ("predicted", "observed", "count", "std_err")


def plot_reliability(curves, *, ax: Axes | None = None) -> Axes:
    """Reliability diagram: observed mean label against mean predicted probability, bin by bin.

    Each curve is a :func:`bayes_loco.evaluate.calibration_curve` table. Its points carry
    error bars of ±1.96 s.e. of the observed mean and are labelled with the bin's count; a
    calibrated model's points sit on the diagonal within their bars.

    Parameters
    ----------
    curves : pandas.DataFrame or mapping name -> DataFrame
        One curve, or several named ones (e.g. ``{"PRS r=2": ..., "plain BT": ...}``).
    ax : Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    pairs = [("model", curves)] if isinstance(curves, pd.DataFrame) else _mapping_pairs(
        curves, "curves", "calibration_curve DataFrame")
    for name, curve in pairs:
        if not isinstance(curve, pd.DataFrame):
            raise TypeError(f"curves[{name!r}] must be a DataFrame from calibration_curve, got "
                            f"{type(curve).__name__}")
        missing = [c for c in RELIABILITY_COLUMNS if c not in curve]
        if missing:
            raise ValueError(f"curves[{name!r}] lacks the columns {missing} of a calibration_curve table")
    ax = _new_axes(ax, (4.6, 4.4))
    ax.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls="--", label="perfect calibration")
    for i, (name, curve) in enumerate(pairs):
        colour = f"C{i}"
        predicted, observed = curve["predicted"].to_numpy(float), curve["observed"].to_numpy(float)
        bars = 1.96 * np.nan_to_num(curve["std_err"].to_numpy(float))
        ax.errorbar(predicted, observed, yerr=bars, fmt="o-", color=colour, ms=4, lw=1.4, capsize=2,
                    label=f"{name} (±1.96 s.e.)")
        for x, y, n in zip(predicted, observed, curve["count"], strict=True):
            ax.annotate(f"{int(n)}", (x, y), textcoords="offset points", xytext=(4, -9), fontsize=6,
                        color=colour)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted P(a₁ preferred)")
    ax.set_ylabel("observed mean label (ties ½)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax
