"""The MAP of the factored posterior and its Laplace approximation (``fit_posterior(..., method="map")``).

:func:`find_map` runs ``pm.find_MAP`` (L-BFGS-B) from the balanced factors of the
frequentist start; :func:`laplace_theta` draws Θ from the Gaussian on the tangent
space of the rank-r matrices at the MAP that the curvature of the log posterior
there defines, so that a MAP fit's tree has a ``posterior`` ArviZ can summarise.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from . import dims as D
from .samplers import exact_arithmetic, rms

# Eigenvalues of the MAP's negative Hessian at or below this fraction of the largest are its null space
# (the rotations U R, V R): the Laplace approximation puts no mass along them.
LAPLACE_RTOL = 1e-10


def find_map(model, u0, v0, seed: int, progressbar: bool) -> xr.DataTree:
    """``pm.find_MAP`` (L-BFGS-B) from the balanced factors; the DataTree keeps its ``optimizer_result``."""
    with exact_arithmetic():
        return pm.find_MAP(initvals={D.LEFT: u0, D.RIGHT: v0}, jitter=False, return_inferencedata=True,
                           progressbar=progressbar, random_seed=seed, model=model)



def _value_point(model: pm.Model, posterior: xr.DataTree) -> dict:
    """The MAP (chain 0, draw 0 of ``posterior``) as a point of the model's value variables (transformed)."""
    point = {}
    for rv in model.free_RVs:
        value = np.asarray(posterior[rv.name].values)[0, 0]
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(pt.as_tensor_variable(value), *rv.owner.inputs).eval()
        point[model.rvs_to_values[rv].name] = np.asarray(value, dtype=model.rvs_to_values[rv].dtype)
    return point



def _negative_hessian(model: pm.Model, point: dict, u_star: np.ndarray, v_star: np.ndarray) -> np.ndarray:
    """−∇² log p(U, V | y) at (U*, V*), by central differences of the model's compiled gradient.

    2·(d_x + d_φ)·r gradient evaluations: PyTensor's symbolic Hessian took ~30 s to
    compile on a 20-parameter model, the gradient well under one.
    """
    grad = model.compile_dlogp(vars=[model[D.LEFT], model[D.RIGHT]], jacobian=False)
    x0 = np.concatenate([u_star.ravel(), v_star.ravel()])
    n_u = u_star.size
    step = 1e-5 * max(1.0, rms(x0))

    def gradient(x):
        at = dict(point)
        at[D.LEFT] = x[:n_u].reshape(u_star.shape)
        at[D.RIGHT] = x[n_u:].reshape(v_star.shape)
        return np.asarray(grad(at), dtype=float)

    columns = []
    for i in range(x0.size):
        e = np.zeros_like(x0)
        e[i] = step
        columns.append((gradient(x0 + e) - gradient(x0 - e)) / (2 * step))
    hessian = -np.stack(columns, axis=1)
    return 0.5 * (hessian + hessian.T)


def laplace_theta(model: pm.Model, map_tree: xr.DataTree, draws: int, seed: int) -> xr.DataArray:
    """Draws of Θ from the Laplace approximation of the factored posterior at the MAP (chain 1).

    H is the negative Hessian of log p(U, V | y) (prior included; with
    ``prior.hyper`` the scales are held at their MAP values) at the MAP (U*, V*).
    Its null space holds the rotations U R, V R, which do not move Θ; the
    approximation is N(0, H⁺) for (dU, dV) on the rest (eigenvalues of H at or
    below :data:`LAPLACE_RTOL` of the largest, or negative, are left out), pushed
    to Θ through the linearisation Θ* + dU V*ᵀ + U* dVᵀ: a Gaussian on the
    tangent space of the rank-r matrices at the MAP, centred there, so θ_rtv
    (linear in Θ) is Gaussian around the MAP's θ_rtv. Along directions no
    comparison reaches H is the prior's curvature alone, so there the spread is
    the prior's.

    Parameters
    ----------
    model : pymc.Model
        The factored model (:func:`~bayes_loco.bayes.build_model`).
    map_tree : xarray.DataTree
        ``pm.find_MAP``'s result on it (chain 0, draw 0 of its ``posterior``).
    draws : int
    seed : int

    Returns
    -------
    xarray.DataArray
        Θ of dims (chain, draw, context, feature), one chain.

    Examples
    --------
    ``fit_posterior(..., method="map")`` calls it; by hand:

    >>> from bayes_loco.bayes.laplace import find_map
    >>> model = bl.bayes.build_model(data, 2)
    >>> map_tree = find_map(model, *bl.bayes.balanced_factors(fit.theta, 2), seed=0, progressbar=False)
    >>> bl.bayes.laplace_theta(model, map_tree, draws=100, seed=0).sizes["draw"]
    100
    """
    post = map_tree[D.POSTERIOR]
    u_star = np.asarray(post[D.LEFT].values, dtype=float)[0, 0]
    v_star = np.asarray(post[D.RIGHT].values, dtype=float)[0, 0]
    hessian = _negative_hessian(model, _value_point(model, post), u_star, v_star)
    vals, vecs = np.linalg.eigh(hessian)
    keep = vals > LAPLACE_RTOL * max(vals.max(), np.finfo(float).tiny)
    factor = vecs[:, keep] / np.sqrt(vals[keep])
    rng = np.random.default_rng([seed, 31337])
    steps = rng.standard_normal((draws, factor.shape[1])) @ factor.T
    n_u = u_star.size
    d_u = steps[:, :n_u].reshape(draws, *u_star.shape)
    d_v = steps[:, n_u:].reshape(draws, *v_star.shape)
    theta = u_star @ v_star.T + d_u @ v_star.T + u_star @ d_v.transpose(0, 2, 1)
    like = post[D.THETA]
    coords = {"chain": [0], "draw": np.arange(draws), D.CONTEXT: like.coords[D.CONTEXT].values,
              D.FEATURE: like.coords[D.FEATURE].values}
    return xr.DataArray(theta[None], dims=("chain", "draw", D.CONTEXT, D.FEATURE), coords=coords)
