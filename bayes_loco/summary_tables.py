"""The tables of a fit's summary: Wald intervals of coordinates and of contrasts, and their names.

Where only differences between features are identified (one-hot items), :func:`feature_contrasts`
lists them; where the data carry the user's names, rows are named by context and feature
(:func:`coordinate_names`), and fits in RTV coordinates list the entries of Θ̂ by those names
beside the rotated coordinates (:func:`named_theta_table`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .coordinates import Coordinates, VecCoordinates
from .data import PreferenceData
from .sets import EllipsoidSet


def wald_table(estimate: np.ndarray, information_set: EllipsoidSet, labels: list[str],
               level: float) -> tuple[pd.DataFrame, int]:
    """Estimates, standard errors and ``level`` Wald intervals of the identified coordinates.

    A coordinate e_i is identified when it lies in range(I) (``information_set``'s
    W); its standard error is ‖e_i‖_{I⁻¹}. Returns the table and the number of
    coordinates left out.
    """
    se = information_set.coordinate_widths()
    identified = np.isfinite(se)
    half = stats.norm.ppf(0.5 + level / 2) * se
    table = pd.DataFrame({"estimate": estimate, "std_err": se, "lower": estimate - half,
                          "upper": estimate + half}, index=pd.Index(labels, name="coordinate"))
    return table[identified], int((~identified).sum())


def contrast_wald_table(estimate: np.ndarray, information_set: EllipsoidSet, contrasts: np.ndarray,
                        labels: list[str], level: float) -> pd.DataFrame:
    """:func:`wald_table` of the functionals aᵀθ (rows of ``contrasts``) that lie in range(I)."""
    se = information_set.dual_norm(contrasts)
    keep = information_set.identified(contrasts)
    value = contrasts @ estimate
    half = stats.norm.ppf(0.5 + level / 2) * se
    table = pd.DataFrame({"estimate": value, "std_err": se, "lower": value - half, "upper": value + half},
                         index=pd.Index(labels, name="coordinate"))
    return table[keep]


# Bytes of the contrasts a summary lists at most.
CONTRAST_BYTES = 64 * 2**20


def feature_contrasts(coordinates: Coordinates, data: PreferenceData, n_identified: int,
                      k_eff: int) -> tuple[list[str], np.ndarray]:
    """The differences between features a summary lists where only differences are identified.

    When every comparison's Δφ_t sums to 0 (actions as one-hot features, as in
    Bradley–Terry), adding a constant to a row of Θ changes no margin: no entry
    Θ[c, j] is identified, only differences Θ[c, j] − Θ[c, j₀] within a row. When
    the ``n_identified`` identified coordinates do not span the ``k_eff``
    identified directions and the Δφ_t sum to 0, these are the rows to add: every
    reached feature j against the first reached one j₀, in every reached context c.

    Returns
    -------
    labels : list of str
        ``"[c,j] − [c,j₀]"``.
    contrasts : ndarray, shape (m, k)
        The functionals a with aᵀθ = e_cᵀ Θ (e_j − e_j₀) in ``coordinates``
        (Θ = ``to_theta(θ_rtv)`` for RTV coordinates); m = 0 when none apply (or
        when they would take more than :data:`CONTRAST_BYTES`).
    """
    none = [], np.empty((0, coordinates.dim))
    if n_identified >= k_eff:
        return none
    rows, cols = data.support
    if data.indexed:
        # The item block: its differences sum to 0 when every item's features sum to one constant.
        phi = data.item_features
        sums = np.asarray(phi.sum(axis=1)).ravel()
        if not np.allclose(sums, sums[0], atol=1e-12 * max(float(np.abs(sums).max()), 1.0)):
            return none
        cols = cols[cols < phi.shape[1]]
    else:
        diffs = data.differences
        scale = float(np.abs(diffs).max(initial=0.0))
        if not np.allclose(diffs.sum(axis=1), 0.0, atol=1e-12 * max(scale, 1.0)):
            return none
    ref, others = (cols[0], cols[1:]) if cols.size else (None, cols)
    m = rows.size * others.size
    if not m or m * coordinates.dim * 8 > CONTRAST_BYTES:
        return none
    contexts = np.zeros((m, data.d_x))
    contexts[np.arange(m), np.repeat(rows, others.size)] = 1.0
    features = np.zeros((m, data.d_phi))
    features[np.arange(m), np.tile(others, rows.size)] = 1.0
    features[:, ref] = -1.0
    if has_names(data):
        name = entry_namer(data)
        labels = [f"{name(c, j)} − {name(c, ref)}" for c in rows for j in others]
    else:
        labels = [f"[{c},{j}] − [{c},{ref}]" for c in rows for j in others]
    return labels, coordinates.transform(contexts, features)


def has_names(data: PreferenceData) -> bool:
    """True when the data carry the user's names of contexts or features."""
    return data.context_names is not None or data.feature_names is not None


def entry_namer(data: PreferenceData):
    """(c, j) ↦ the name of the entry Θ[c, j]: ``"feature"`` with one context, else ``"context:feature"``."""
    contexts = data.context_names or tuple(f"x{c}" for c in range(data.d_x))
    features = data.feature_names or tuple(f"phi{j}" for j in range(data.d_phi))
    if data.d_x == 1:
        return lambda c, j: features[j]
    return lambda c, j: f"{contexts[c]}:{features[j]}"


def coordinate_names(coordinates: Coordinates, data: PreferenceData) -> list[str]:
    """The summary's row labels: the data's names of Θ's entries in vec(Θ) coordinates, else the
    coordinates' own labels (RTV coordinates are rotations: they have no names of their own)."""
    if has_names(data) and isinstance(coordinates, VecCoordinates):
        name = entry_namer(data)
        return [name(c, j) for c in range(data.d_x) for j in range(data.d_phi)]
    return coordinates.labels()


def named_theta_table(fit, data: PreferenceData, wald: EllipsoidSet, level: float) -> pd.DataFrame:
    """Θ̂ by the data's names beside RTV coordinates: each identified entry e_cᵀΘe_j (a linear functional of
    θ_rtv) with its Wald interval, or where the features are identified only up to a shift, each entry minus
    the first feature's. Empty when the data have no names or the rows would take :data:`CONTRAST_BYTES`."""
    coordinates = fit.coordinates
    m = data.d_x * data.d_phi
    if not has_names(data) or m * coordinates.dim * 8 > CONTRAST_BYTES:
        return pd.DataFrame()
    contexts = np.repeat(np.eye(data.d_x), data.d_phi, axis=0)
    features = np.tile(np.eye(data.d_phi), (data.d_x, 1))
    labels = coordinate_names(VecCoordinates(data.d_x, data.d_phi), data)
    table = contrast_wald_table(fit.estimate, wald, coordinates.transform(contexts, features), labels, level)
    names, contrasts = feature_contrasts(coordinates, data, len(table), wald.effective_dim)
    if names:
        table = pd.concat([table, contrast_wald_table(fit.estimate, wald, contrasts, names, level)])
    return table


def unidentified_note(left_out: int, k: int, reached: int = 0) -> tuple[str, ...]:
    """A note for the coordinates a summary leaves out: ``reached`` of them some comparison reaches.

    A coordinate no comparison reaches is absent from every margin; one that
    comparisons reach but that is still not identified enters the margins only
    together with others (a row of Θ plus a constant, when Δφ_t sums to 0).
    """
    if not left_out:
        return ()
    if not reached:
        return (f"{left_out} of {k} coordinates are not identified (no comparison reaches them) and are "
                "left out; every set is a cylinder along them.",)
    unreached = (f" {left_out - reached} of them no comparison reaches;" if reached < left_out else "")
    return (f"{left_out} of {k} coordinates are not identified and are left out; every set is a cylinder "
            f"along them.{unreached} {reached} {'is' if reached == 1 else 'are'} reached by comparisons, "
            "but only in combination with other coordinates, and only such combinations are identified.",)


def contrast_note(labels: list[str]) -> tuple[str, ...]:
    """The note of a summary that lists differences between features (:func:`feature_contrasts`)."""
    if not labels:
        return ()
    return (f"Only differences between features are identified: every comparison's Δφ_t sums to 0, so "
            f"adding a constant to a row of Θ changes no prediction. Rows such as {labels[0]!r} are the "
            "entry (context, feature) of Θ minus the first feature's entry in the same row, with their "
            "standard errors and intervals.",)
