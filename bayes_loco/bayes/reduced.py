"""Posterior draws of Θ in the reduced coordinates θ_rtv of a fixed RTV basis.

U and V are not identified, Θ = U Vᵀ is; and the pessimistic solver works in
the RTV coordinates of a fixed fit Θ̂ (docs/design.md, convention 6). This module
maps every posterior draw Θ_j to θ_rtv,j = RTV(Ûᵀ Θ_j V̂) with the Û, V̂ of the
reference and stores the result in the DataTree with its own named dim
(labels and non-index coordinates of :func:`bayes_loco.trees.rtv_coords`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..coordinates import RTVBasis
from ..trees import SAMPLE_DIMS, rtv_attrs, rtv_coords
from . import dims as D


def theta_rtv_array(theta: xr.DataArray, basis: RTVBasis) -> xr.DataArray:
    """θ_rtv of every draw of Θ (dims …, context, feature) → (…, rtv_coord).

    ``rtv_coord`` is labelled by :meth:`~bayes_loco.RTVBasis.labels` (``"12 (u0, v3)"``).

    Parameters
    ----------
    theta : xarray.DataArray
        Draws of Θ whose last two dims are ``context`` and ``feature``.
    basis : RTVBasis

    Returns
    -------
    xarray.DataArray
        ``theta_rtv``, dims (…, ``rtv_coord``).

    Examples
    --------
    >>> bl.bayes.theta_rtv_array(post.tree.posterior["theta"], post.basis).dims
    ('chain', 'draw', 'rtv_coord')
    """
    if theta.dims[-2:] != (D.CONTEXT, D.FEATURE):
        raise ValueError(f"theta must end with dims ({D.CONTEXT!r}, {D.FEATURE!r}), got {theta.dims}")
    if theta.shape[-2:] != (basis.d_x, basis.d_phi):
        raise ValueError(f"theta has shape {theta.shape[-2:]} per draw, the basis expects "
                         f"({basis.d_x}, {basis.d_phi})")
    values = basis.to_coordinates(np.asarray(theta.values, dtype=float))
    lead = theta.dims[:-2]
    coords = {d: theta.coords[d] for d in lead if d in theta.coords}
    coords |= rtv_coords(basis)
    return xr.DataArray(values, dims=(*lead, D.RTV_COORD), coords=coords, name=D.THETA_RTV,
                        attrs=rtv_attrs())


def add_theta_rtv(tree: xr.DataTree, basis: RTVBasis, group: str = "posterior") -> xr.DataTree:
    """Store θ_rtv of ``tree[group].theta`` as ``tree[group].theta_rtv`` (in place; returns ``tree``).

    Parameters
    ----------
    tree : xarray.DataTree
    basis : RTVBasis
    group : str
        The group holding ``theta``.

    Returns
    -------
    xarray.DataTree
        ``tree``.

    Examples
    --------
    >>> tree = bl.bayes.add_theta_rtv(post.tree.copy(), post.basis)
    >>> tree["posterior"]["theta_rtv"].sizes["rtv_coord"]
    16
    """
    if group not in tree.children:
        raise ValueError(f"tree has no group {group!r}; groups: {list(tree.children)}")
    node = tree[group]
    if D.THETA not in node.data_vars:
        raise ValueError(f"group {group!r} has no variable {D.THETA!r}")
    node[D.THETA_RTV] = theta_rtv_array(node[D.THETA], basis)
    return tree


def stacked_draws(tree: xr.DataTree, var: str = D.THETA_RTV, group: str = "posterior") -> np.ndarray:
    """All draws of ``var`` with chains concatenated: shape (chains·draws, …)."""
    da = tree[group][var]
    sample = [d for d in SAMPLE_DIMS if d in da.dims]
    da = da.transpose(*sample, *[d for d in da.dims if d not in sample])
    return np.asarray(da.values, dtype=float).reshape(-1, *da.shape[len(sample):])


def draws_moments(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (ddof = 1) of draws of shape (J, k)."""
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 2 or draws.shape[0] < 2:
        raise ValueError(f"draws must be (J, k) with J >= 2, got shape {draws.shape}")
    return draws.mean(axis=0), np.atleast_2d(np.cov(draws, rowvar=False))
