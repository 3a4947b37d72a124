"""Figures of uncertainty sets, spectra and policies.

Geometry that ArviZ does not draw, in the coordinates the sets live in:

- :func:`plot_sets`: ellipsoids (Gram, Wald, credible, sandwich) and hulls of draws projected
  on two directions, with posterior draws and θ*; :func:`value_direction` gives a policy's
  value direction m(π) to project on;
- :func:`plot_spectrum`: the eigenvalues of W, which directions the data reach (k_eff);
- :func:`plot_reward_intervals`: each action's reward interval at one (x, s) under each set;
- :func:`plot_policies`: several methods' policies on one population, side by side;
- :func:`plot_reliability`: held-out reliability diagrams of predicted probabilities
  (:func:`bayes_loco.evaluate.calibration_curve`), no truth needed.

A study's figures, :func:`~bayes_loco.experiments.figures.plot_results` and
:func:`~bayes_loco.experiments.figures.plot_calibration` (with the coverage it draws,
:func:`~bayes_loco.experiments.figures.calibration`), live in :mod:`bayes_loco.experiments.figures`;
``bayes_loco.plots.plot_results`` and the others still reach them, importing the studies on first use.

For the posterior's own marginals, pairs and traces use ArviZ on the fit's tree, e.g.
``arviz_plots.plot_dist(post.tree, var_names=["theta_rtv"])``: those are not re-drawn here.

Every function draws on the Axes it is given (``ax=``) or on a new figure, and returns the
Axes. Nothing here selects a backend, shows a figure or changes rcParams: importing this module
leaves matplotlib as it was (without a display, matplotlib picks Agg itself), and the figures are
returned open, for the caller to show, save or close. The projections themselves (directions,
m(π), the projected ellipse) are computed in :mod:`bayes_loco._projection`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ._projection import (
    held_precision,
    project_ellipsoid,
    projection_directions,
    truth_vector,
    value_direction,
)
from ._validation import check_int
from .coordinates import RTVBasis
from .data import Population
from .design import candidate_features
from .evaluate import truth_theta
from .linalg import range_mask
from .model import rewards
from .policy import Policy
from .sets import DrawsSet, EllipsoidSet, QuantileSet

__all__ = ["plot_policies", "plot_reliability", "plot_reward_intervals", "plot_sets", "plot_spectrum",
           "value_direction"]

# Study figures that moved to experiments.figures; reached from here on first use, so that the geometry
# plots do not import the studies (and PyMC through their methods).
_MOVED = ("LEVELS", "calibration", "plot_calibration", "plot_results")

# Posterior draws, passed as ``draws`` or held by a hull, in plot_sets: grey, so that colours mark sets.
_DRAWS_COLOUR = "0.55"


def __getattr__(name: str):
    if name in _MOVED:
        from .experiments import figures

        return getattr(figures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# -------------------------------------------------------------------------------------- plot_sets


def plot_sets(sets, *, directions=None, draws=None, truth=None, labels=None, ax: Axes | None = None) -> Axes:
    """Uncertainty sets and draws projected on two directions, with θ* when known.

    An ellipsoid {θ : (θ − θ̂)ᵀW(θ − θ̂) ≤ R²} projected on the span of an orthonormal
    P (k × 2) is the ellipse Pᵀθ̂ + R (PᵀW⁺P)^½ u, ‖u‖ = 1, drawn as a closed line
    with a "+" at its centre. The projection is bounded only when P lies in range(W):
    along a direction that leaves it (a direction no comparison reaches) the set is a
    cylinder. Then what is bounded is drawn and the legend says so: a strip between two
    dashed lines when one direction of the plane is unbounded, only the centre when
    both are. A hull of draws (:class:`~bayes_loco.DrawsSet`) is drawn as the convex
    hull of its projected draws in the set's colour, its draws faintly in grey, like
    ``draws``: the colour marks the set, grey marks draws. The legend sits to the right of
    the axes, off the drawing (a figure with ``layout="constrained"`` makes room for it).

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

    Examples
    --------
    >>> ax = bl.plots.plot_sets({"PRS set, C₂ = 5": fit.penalty_set(), "Wald 90%": fit.calibrated_set(0.9)},
    ...                         truth=problem)
    >>> ax.figure.savefig("sets.png")
    """
    named = _check_sets(sets, drawable=True)
    coordinates = named[0][1].coordinates
    k = coordinates.dim
    p, names = projection_directions(directions, named, labels)
    star = None if truth is None else p.T @ truth_vector(truth, coordinates)
    if draws is not None:
        draws = np.asarray(draws, dtype=float)
        if draws.ndim != 2 or draws.shape[1] != k:
            raise ValueError(f"draws must have shape (J, {k}) to match the sets' coordinates, "
                             f"got {draws.shape}")
    ax = _new_axes(ax, (7.5, 5.0))  # wider than tall: the legend takes the right
    if draws is not None:
        projected = draws @ p
        ax.scatter(projected[:, 0], projected[:, 1], s=4, color=_DRAWS_COLOUR, alpha=0.25, linewidths=0,
                   rasterized=True, label=f"draws ({draws.shape[0]})", gid="draws")
    for i, (name, s) in enumerate(named):
        colour = f"C{i}"
        if isinstance(s, DrawsSet):
            _draw_hull(ax, s.draws @ p, name, colour, label_draws=draws is None)
            continue
        shape = project_ellipsoid(s, p)
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
    # Outside the axes, on the right: the sets fill the plane, so no corner of it is free of them.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def _draw_hull(ax: Axes, points: np.ndarray, name: str, colour: str, *, label_draws: bool) -> None:
    """The convex hull of 2-d points as a closed line in ``colour``, the points faintly in grey.

    ``label_draws``: give the points a legend entry (when no ``draws`` were passed, whose entry
    already says what grey points are).
    """
    from scipy.spatial import ConvexHull, QhullError

    ax.scatter(points[:, 0], points[:, 1], s=5, color=_DRAWS_COLOUR, alpha=0.3, linewidths=0, rasterized=True,
               label=f"{'' if label_draws else '_'}draws of {name} ({len(points)})", gid="hull draws")
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


def _precision_of(item, name: str) -> np.ndarray:
    if isinstance(item, EllipsoidSet):
        return held_precision(item, f"items[{name!r}]")
    if hasattr(item, "calibrated_set"):  # a Fit: its Wald set, or a posterior's credible ellipsoid
        s = item.calibrated_set(0.9)
        if not isinstance(s, EllipsoidSet):
            raise TypeError(f"items[{name!r}]: its calibrated_set(0.9) is a {type(s).__name__}, not an "
                            "ellipsoid with a W")
        return held_precision(s, f"items[{name!r}]")
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
    are directions no comparison reaches (:func:`bayes_loco.linalg.range_mask`): they are drawn
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

    Examples
    --------
    >>> ax = bl.plots.plot_spectrum({"Wald": fit.calibrated_set(0.9), "paper's Gram": fit.penalty_set()})
    >>> ax.get_yscale()
    'log'
    """
    named = _mapping_pairs(items, "items", "EllipsoidSet or Fit")
    ax = _new_axes(ax, (6.5, 4.2))
    for i, (name, item) in enumerate(named):
        w = np.asarray(_precision_of(item, str(name)), dtype=float)
        vals = np.linalg.eigvalsh(0.5 * (w + w.T))[::-1]
        top = max(float(vals[0]), np.finfo(float).tiny)
        identified = range_mask(vals)
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
    ax.legend(handles, names, fontsize="small", loc="best", framealpha=0.85)
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
    [min_(θ ∈ set) θᵀz_a, max_(θ ∈ set) θᵀz_a] with z_a = z(x, s, a) − z(x, s, a_ref)
    (:func:`~bayes_loco.design.candidate_features`): the lower end is
    ``lower_bound(z_a)``, the upper ``−lower_bound(−z_a)``. For an ellipsoid that is
    θ̂ᵀz_a ± R‖z_a‖_W⁻¹; for a hull of draws the range of θ_jᵀz_a; for a
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

    Examples
    --------
    >>> sets = {"PRS set, C₂ = 5": fit.penalty_set(), "Wald 90%": fit.calibrated_set(0.9)}
    >>> ax = bl.plots.plot_reward_intervals(sets, pop, row=0, truth=problem)
    >>> ax.get_title()
    'population row 0: reward intervals under each set'
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
    ax.set_title(f"population row {row}: reward intervals under each set", fontsize="medium")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize="small", loc="best", framealpha=0.85)
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

    Examples
    --------
    >>> greedy = bl.greedy_policy(fit.theta, pop)
    >>> exact = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")
    >>> ax = bl.plots.plot_policies({"greedy": greedy, "exact, Wald 90%": exact}, max_units=20)
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
    ax.set_yticks(np.arange(len(named)), ticks, fontsize="small")
    ax.set_ylim(len(named) - 0.5, -0.5)  # the first policy on top
    ax.set_xlim(-0.6, n_units - 0.4)
    ax.set_xlabel(f"{unit}, first {n_units}")
    ax.legend(handles=[Patch(color=colour[a], label=f"a = {a}") for a in range(n_actions)], fontsize="small",
              title="action (bar height: π(a | unit))", title_fontsize="small", loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


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

    Examples
    --------
    >>> train, test = data.split(200)
    >>> held_out = bl.fit_prs(train, rank=2, ridge=1.0).predict_proba(test)
    >>> ax = bl.plots.plot_reliability({"PRS": bl.calibration_curve(test, held_out, bins=5)})
    >>> ax.get_xlabel()
    'mean predicted P(a₁ preferred)'
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
            ax.annotate(f"{int(n)}", (x, y), textcoords="offset points", xytext=(4, -9), fontsize="x-small",
                        color=colour)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted P(a₁ preferred)")
    ax.set_ylabel("observed mean label (ties ½)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return ax
