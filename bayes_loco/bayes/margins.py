"""The margins η_t = x_tᵀ U Vᵀ Δφ_t of the model's likelihood, read from distinct rows where that is cheaper.

The plain graph is the row-wise dot of X U and ΔΦ V: N r (d_x + d_φ)
multiply-adds per log density, twice that with the gradient, and the whole of X
and ΔΦ read each time. Comparisons repeat rows: the paper's simulation and every
data set whose features are the actions' own have at most d_a(d_a − 1) distinct
differences Δφ (the §5.1 simulation at N = 10,000 has 9), and users repeat
contexts. With n_φ distinct differences D (rows of ΔΦ = D[p]) the margins are

    η_t = x_tᵀ (Θ Dᵀ)[:, p_t],  Θ Dᵀ = U (Vᵀ Dᵀ)  (d_x × n_φ),

N d_x + n_φ r (d_x + d_φ) multiply-adds; with n_x distinct contexts C (X = C[i])
symmetrically η_t = Δφ_tᵀ (Θᵀ Cᵀ)[:, i_t]; with both, η_t = E[i_t, p_t] for
E = (C U)(D V)ᵀ. :func:`row_layout` picks the cheapest of the four, and the
likelihood is unchanged to rounding (``tests/test_bayes_margins.py``). At the
paper's N = 10,000 the log density and its gradient took 2.3× (the default's
partial chart) to 4.2× (the factored model) less time than with the plain graph
(``benchmarks/bench_margins.py``).

The grouped graphs read other data containers (:data:`~.dims.DATA_CONTEXT_ROWS` and
:data:`~.dims.DATA_CONTEXT_INDEX`, :data:`~.dims.DATA_DIFFERENCE_ROWS` and
:data:`~.dims.DATA_DIFFERENCE_INDEX`), so :func:`~.model.build_model` builds them only
when asked (``group_rows=True``, as :func:`~.fit_posterior` does except where JAX runs on an
accelerator, :func:`~.samplers.reads_distinct_rows`): its documented ``contexts`` and
``differences`` containers stay the default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from ..data import PreferenceData
from . import dims as D

# Rows are grouped only where that cuts the margins' multiply-adds by at least this factor: the
# gathers and the scatter of their gradient cost more per multiply-add than the dense products.
GROUP_GAIN = 2.0


@dataclass(frozen=True)
class RowLayout:
    """How the model reads X and ΔΦ: as N rows, or as distinct rows and an index per comparison.

    Attributes
    ----------
    contexts, differences : tuple of (rows, index) or None
        The distinct rows (n × d) and each comparison's row (N,), for the side
        read grouped; None for a side read as N rows.
    """

    contexts: tuple[np.ndarray, np.ndarray] | None
    differences: tuple[np.ndarray, np.ndarray] | None

    @property
    def sizes(self) -> dict:
        """The distinct-row counts of each side, None for a side read as N rows."""
        return {name: None if side is None else side[0].shape[0]
                for name, side in (("contexts", self.contexts), ("differences", self.differences))}


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, index = np.unique(values, axis=0, return_inverse=True)
    return rows, index.reshape(-1).astype(np.int64)


def row_layout(data: PreferenceData, rank: int, group_rows: bool = True) -> RowLayout:
    """The cheapest of the module docstring's four graphs for ``data`` (N rows if ``group_rows`` is False)."""
    if not isinstance(group_rows, bool):
        raise TypeError(f"group_rows must be a bool, got {group_rows!r}")
    if not group_rows:
        return RowLayout(None, None)
    n, d_x, d_phi = data.n, data.d_x, data.d_phi
    contexts = _distinct(data.contexts)
    if data.indexed and data.comparison_features is None:  # the distinct compared pairs, never N × d_φ
        rows, index = data.delta.pair_rows()
        differences = rows, index.reshape(-1).astype(np.int64)
    else:
        differences = _distinct(data.differences)
    n_x, n_phi = contexts[0].shape[0], differences[0].shape[0]
    cost = {(False, False): n * rank * (d_x + d_phi),
            (True, False): n * d_phi + n_x * rank * (d_x + d_phi),
            (False, True): n * d_x + n_phi * rank * (d_x + d_phi),
            (True, True): n + rank * (n_x * d_x + n_phi * d_phi + n_x * n_phi)}
    best = min(cost, key=cost.get)
    if cost[best] * GROUP_GAIN > cost[(False, False)]:
        best = (False, False)
    return RowLayout(contexts if best[0] else None, differences if best[1] else None)


def add_margins(data: PreferenceData, u, v, layout: RowLayout):
    """Inside a model context: the data containers of ``layout`` and η (N,) as a graph of U and V."""
    if layout.contexts is None:
        x = pm.Data(D.DATA_CONTEXTS, data.contexts, dims=(D.COMPARISON, D.CONTEXT))
    else:
        x = pm.Data(D.DATA_CONTEXT_ROWS, layout.contexts[0], dims=(D.CONTEXT_ROW, D.CONTEXT))
        i = pm.Data(D.DATA_CONTEXT_INDEX, layout.contexts[1], dims=D.COMPARISON)
    if layout.differences is None:
        dphi = pm.Data(D.DATA_DIFFERENCES, data.differences, dims=(D.COMPARISON, D.FEATURE))
    else:
        dphi = pm.Data(D.DATA_DIFFERENCE_ROWS, layout.differences[0], dims=(D.DIFFERENCE_ROW, D.FEATURE))
        p = pm.Data(D.DATA_DIFFERENCE_INDEX, layout.differences[1], dims=D.COMPARISON)
    xu, dv = pt.dot(x, u), pt.dot(dphi, v)
    if layout.contexts is None and layout.differences is None:
        return pt.sum(xu * dv, axis=1)
    if layout.contexts is None:
        return pt.sum(x * pt.dot(dv, u.T)[p], axis=1)  # rows of (Θ Dᵀ)ᵀ = D V Uᵀ
    if layout.differences is None:
        return pt.sum(dphi * pt.dot(xu, v.T)[i], axis=1)  # rows of (Θᵀ Cᵀ)ᵀ = C U Vᵀ
    return pt.dot(xu, dv.T)[i, p]


def row_coords(layout: RowLayout) -> dict:
    """The coords of the distinct-row dims of ``layout`` (beside :func:`~.model.model_coords`'s)."""
    coords = {}
    if layout.contexts is not None:
        coords[D.CONTEXT_ROW] = np.arange(layout.contexts[0].shape[0])
    if layout.differences is not None:
        coords[D.DIFFERENCE_ROW] = np.arange(layout.differences[0].shape[0])
    return coords


def as_rows(constant: xr.Dataset, data: PreferenceData) -> xr.Dataset:
    """A tree's ``constant_data`` with X and ΔΦ as N rows (``contexts``, ``differences``).

    The tree records the data, not the sampler's layout of them: a fit's file is
    the same with or without ``group_rows``.
    """
    names = (D.DATA_CONTEXT_ROWS, D.DATA_CONTEXT_INDEX, D.DATA_DIFFERENCE_ROWS, D.DATA_DIFFERENCE_INDEX,
             D.CONTEXT_ROW, D.DIFFERENCE_ROW)
    grouped = [name for name in names if name in constant.variables]
    if not grouped:
        return constant
    rows = xr.Dataset({D.DATA_CONTEXTS: ((D.COMPARISON, D.CONTEXT), data.contexts),
                       D.DATA_DIFFERENCES: ((D.COMPARISON, D.FEATURE), data.differences)},
                      coords={name: constant.coords[name] for name in (D.COMPARISON, D.CONTEXT, D.FEATURE)
                              if name in constant.coords})
    rest = constant.drop_vars(grouped + [name for name in (D.DATA_CONTEXTS, D.DATA_DIFFERENCES)
                                         if name in constant.variables])
    return rows.merge(rest)
