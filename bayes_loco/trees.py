"""The ArviZ DataTree layout both roads share: names, the θ_rtv coordinates, and the frequentist export.

A posterior's ``tree`` (:class:`bayes_loco.bayes.Posterior`) and a frequentist
fit's :meth:`to_datatree` (:class:`~bayes_loco.MLEResult`,
:class:`~bayes_loco.LowRankResult`, :class:`~bayes_loco.PRSResult`) use the same
group, variable and dimension names, so one ArviZ call can show both roads::

    post = bl.bayes.fit_posterior(data, 3, start=low_rank)           # basis: low_rank's
    az.plot_forest({"NUTS": post.tree, "Wald (FGD)": low_rank.to_datatree(chains=4, draws=1000)},
                   var_names=["theta_rtv"], combined=True)

Layout
------
``posterior``
    Identified quantities only (docs/design.md, convention 6): ``theta`` = Θ
    (dims ``chain, draw, context, feature``) and ``theta_rtv`` = θ_rtv (``chain,
    draw, rtv_coord``). ``rtv_coord`` is labelled ``"11 (u0, v0)"``: block 11,
    the entry û_0ᵀ Θ v̂_0 between the basis fit's first left (context) and right
    (feature) singular directions.
``constant_data``
    What each θ_rtv coordinate is, on the ``rtv_coord`` dim (:func:`rtv_chart`):
    ``rtv_identified`` (bool: some comparison reaches the coordinate, e_i in the
    range of the design's Gram matrix; along the others the posterior is the
    prior's and the Wald variance is infinite), ``rtv_block`` ("11", "12",
    "21"), ``rtv_context_direction`` (i) and ``rtv_feature_direction`` (j).
    They are variables of this group, not coordinates of ``theta_rtv``:
    ``az.summary`` stacks ``theta`` and ``theta_rtv`` into one table, and
    xarray refuses to stack a non-index coordinate that only one of them has.
    Select the identified coordinates with
    ``post.tree.posterior.theta_rtv[..., tree.constant_data.rtv_identified.values]``.
``point_estimate``
    The fit's point estimate, without sample dims: the MLE, FGD or PRS
    estimate, or the MAP (``theta``, ``theta_rtv``; frequentist fits add
    ``std_err``, inf where not identified).

The Bayesian groups (``factors``, ``prior``, ``posterior_predictive``,
``preference_probability``, ``sample_stats``, ``vi_loss``, …) are described in
:mod:`bayes_loco.bayes.layout`.

Frequentist trees
-----------------
A frequentist fit has no posterior. :func:`fit_tree` represents its Wald
approximation the way ArviZ reads a posterior: ``chains × draws`` independent
draws of θ from N(θ̂, I⁺), I the Fisher information of ``fit.calibrated_set``
(Σ p̂(1 − p̂) z zᵀ), so that ``az.summary`` gives θ̂ (up to Monte Carlo error),
the Wald standard errors and intervals, and ``az.plot_forest`` draws them
beside a posterior. Coordinates the data do not identify have infinite Wald
variance: their draws are NaN (and ``rtv_identified`` is False). The RTV fits
export ``theta_rtv`` only (Θ would mix identified and unidentified
coordinates); the MLE exports ``theta`` in its own vec(Θ) coordinates. To share
one forest plot with a posterior, give the same ``chains`` and ``draws`` (ArviZ
aligns the trees on them) and fit the posterior in the same basis
(``fit_posterior(start=low_rank)`` or ``basis=``).

Nothing here imports PyMC.
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from ._validation import LEVEL, check_int
from ._version import __version__
from .coordinates import RTVBasis, VecCoordinates
from .linalg import in_range

# ------------------------------------------------------------------------------------------ names

#: Sample dims, as ArviZ names them.
CHAIN = "chain"
DRAW = "draw"
SAMPLE_DIMS = (CHAIN, DRAW)

#: Rows of the comparison data (t = 1 … N).
COMPARISON = "comparison"
#: Context coordinates x (d_x of them): rows of Θ and of U.
CONTEXT = "context"
#: Feature coordinates φ (d_φ of them): columns of Θ and rows of V.
FEATURE = "feature"
#: Latent rank r: columns of U and V.
RANK = "rank"
#: Reduced (RTV) coordinates θ_rtv, k = (d_x + d_φ) r − r² of them.
RTV_COORD = "rtv_coord"
#: Iterations of an optimiser (the VI loss history).
ITERATION = "iteration"

#: Non-index coordinates on ``rtv_coord``.
BLOCK = "block"
CONTEXT_DIRECTION = "context_direction"
FEATURE_DIRECTION = "feature_direction"
IDENTIFIED = "identified"

#: Variables.
THETA = "theta"
THETA_RTV = "theta_rtv"
STD_ERR = "std_err"
OBSERVED = "y"
PROBABILITY = "p"
LOSS = "loss"

#: Groups.
POSTERIOR = "posterior"
POINT_ESTIMATE = "point_estimate"
FACTORS = "factors"
PRIOR = "prior"
POSTERIOR_PREDICTIVE = "posterior_predictive"
PREFERENCE_PROBABILITY = "preference_probability"
OBSERVED_DATA = "observed_data"
CONSTANT_DATA = "constant_data"
SAMPLE_STATS = "sample_stats"
VI_LOSS = "vi_loss"
OPTIMIZER_RESULT = "optimizer_result"

# ------------------------------------------------------------------------------------ coordinates


def identified_coordinates(directions: np.ndarray) -> np.ndarray:
    """Whether each coordinate e_i lies in the span of the orthonormal ``directions`` P (k × k_eff)."""
    p = np.asarray(directions, dtype=float)
    outside = np.eye(p.shape[0]) - p @ p.T
    return in_range(np.ones(p.shape[0]), np.einsum("ij,ij->j", outside, outside))


def rtv_coords(basis: RTVBasis) -> dict:
    """The coords of the ``rtv_coord`` dim: :meth:`~bayes_loco.RTVBasis.labels`."""
    return {RTV_COORD: basis.labels()}


def rtv_chart(basis: RTVBasis, identified: np.ndarray) -> xr.Dataset:
    """What each θ_rtv coordinate is: ``rtv_identified``, ``rtv_block``, ``rtv_context_direction``, ….

    Variables on the ``rtv_coord`` dim, for a tree's ``constant_data`` group.
    """
    identified = np.asarray(identified, dtype=bool)
    if identified.shape != (basis.dim,):
        raise ValueError(f"identified must have shape ({basis.dim},), got {identified.shape}")
    entries = basis.entries()
    coords = rtv_coords(basis)
    columns = {IDENTIFIED: identified, BLOCK: np.array([b for b, _, _ in entries]),
               CONTEXT_DIRECTION: np.array([i for _, i, _ in entries], dtype=np.int64),
               FEATURE_DIRECTION: np.array([j for _, _, j in entries], dtype=np.int64)}
    return xr.Dataset({f"rtv_{name}": xr.DataArray(values, dims=(RTV_COORD,), coords=coords,
                                                   attrs={"description": _CHART[name]})
                       for name, values in columns.items()})


_CHART = {IDENTIFIED: "True where some comparison reaches θ_rtv's coordinate (e_i in the range of the "
                      "design's Gram matrix); elsewhere the posterior is the prior's and the Wald variance "
                      "is infinite",
          BLOCK: "block of Θ' = Ûᵀ Θ V̂ that holds the coordinate: 11, 12 or 21",
          CONTEXT_DIRECTION: "i: the coordinate is û_iᵀ Θ v̂_j, û_i the basis fit's i-th left singular vector",
          FEATURE_DIRECTION: "j: the coordinate is û_iᵀ Θ v̂_j, v̂_j the basis fit's j-th right singular "
                             "vector"}


def rtv_attrs() -> dict:
    """The attrs of a ``theta_rtv`` variable: what the coordinates mean."""
    return {"description": "Θ in the RTV coordinates of a fixed basis fit: blocks 11, 12, 21 of Θ' = Ûᵀ Θ V̂ "
                           "(docs/design.md, 'The identified chart'); identified, unlike the factors U and V",
            "labels": "'12 (u1, v4)' is û_1ᵀ Θ v̂_4: the basis fit's left (context) singular direction 1 "
                      "against its right (feature) singular direction 4",
            "identified": "constant_data.rtv_identified says which coordinates some comparison reaches"}


def sample_coords(chains: int, draws: int) -> dict:
    return {CHAIN: np.arange(chains), DRAW: np.arange(draws)}


# -------------------------------------------------------------------------------- frequentist fits


def identified_coords(tree: xr.DataTree) -> dict[str, list[str]]:
    """``coords=`` for ArviZ keeping a tree's identified θ_rtv coordinates (docs/design.md, convention 6).

    Works on a posterior's tree and on a frequentist fit's ``to_datatree()``:
    ``az.summary(tree, var_names=["theta_rtv"], coords=identified_coords(tree))`` lists
    the k_eff coordinates the data reach, not the k − k_eff where the posterior is the
    prior's (and the Wald variance is infinite); ``az.plot_trace``, ``az.plot_rank`` and
    the others take the same ``coords``.
    """
    if not isinstance(tree, xr.DataTree):
        raise TypeError("tree must be an xarray DataTree (post.tree, fit.to_datatree()), got "
                        f"{type(tree).__name__}")
    chart = tree[CONSTANT_DATA] if CONSTANT_DATA in tree.children else None
    if chart is None or "rtv_identified" not in chart.data_vars:
        raise ValueError("tree has no constant_data.rtv_identified: it is not a tree of an RTV fit (a "
                         "posterior, or a low-rank or PRS fit's to_datatree())")
    mask = np.asarray(chart["rtv_identified"].values, dtype=bool)
    labels = np.asarray(chart[RTV_COORD].values)
    return {RTV_COORD: [str(label) for label in labels[mask]]}


def fit_tree(fit, *, chains: int = 4, draws: int = 1000, seed: int = 0, level: float = LEVEL) -> xr.DataTree:
    """A frequentist fit as an ArviZ DataTree: Wald draws N(θ̂, I⁺) in ``posterior``, θ̂ in ``point_estimate``.

    See the module docstring for the layout. The draws are exact samples of the
    Wald normal (not MCMC): ``az.summary`` gives θ̂ and the Wald standard errors
    up to Monte Carlo error sd/sqrt(chains·draws), and ESS ≈ chains·draws.

    Parameters
    ----------
    fit : MLEResult, LowRankResult or PRSResult
        Any fit whose ``calibrated_set`` is a Wald :class:`~bayes_loco.EllipsoidSet`.
    chains, draws : int
        The shape of the draws; match a posterior's to put both in one ArviZ plot
        (the NUTS default is 4 × 1000).
    seed : int
        Seeds the draws.
    level : float
        Only recorded: the Wald set's information does not depend on it.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (``theta_rtv`` for the RTV fits, ``theta`` for the MLE),
        ``point_estimate`` (θ̂, Θ̂ and ``std_err``), ``constant_data`` (which
        coordinates are identified: ``rtv_identified`` …, or for the MLE
        ``theta_identified``), typed root attrs.

    Raises
    ------
    MemoryError
        The MLE baseline's information matrix is above its size limit.
    """
    if "wald" not in getattr(fit, "calibrated_kinds", ()):
        raise TypeError(f"fit_tree exports a fit whose calibrated set is a Wald set (MLE, low rank, PRS), "
                        f"got a {type(fit).__name__}; a posterior has its own tree (post.tree)")
    chains = check_int(chains, "chains", 1)
    draws = check_int(draws, "draws", 1)
    seed = check_int(seed, "seed", 0)
    wald = fit.calibrated_set(level, "wald")
    coordinates = fit.coordinates
    k = coordinates.dim
    se = wald.coordinate_widths()
    identified = np.isfinite(se)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((chains, draws, wald.effective_dim))
    values = wald.center + z @ wald.factor.T
    values[..., ~identified] = np.nan
    sample = sample_coords(chains, draws)
    attrs = {"description": "independent draws of the Wald normal N(θ̂, I⁺), I the Fisher information at θ̂; "
                            "NaN where the data do not identify the coordinate (infinite variance)"}
    if isinstance(coordinates, RTVBasis):
        coords = rtv_coords(coordinates)
        posterior = xr.Dataset({THETA_RTV: xr.DataArray(values, dims=(*SAMPLE_DIMS, RTV_COORD),
                                                        coords=sample | coords, attrs=rtv_attrs() | attrs)})
        point = xr.Dataset({THETA_RTV: xr.DataArray(wald.center, dims=(RTV_COORD,), coords=coords,
                                                    attrs=rtv_attrs()),
                            STD_ERR: xr.DataArray(se, dims=(RTV_COORD,), coords=coords),
                            THETA: xr.DataArray(np.asarray(fit.theta, dtype=float), dims=(CONTEXT, FEATURE),
                                                coords=_theta_coords(coordinates.d_x, coordinates.d_phi))})
        constant = rtv_chart(coordinates, identified)
    elif isinstance(coordinates, VecCoordinates):
        d_x, d_phi = coordinates.d_x, coordinates.d_phi
        coords = _theta_coords(d_x, d_phi)
        posterior = xr.Dataset({THETA: xr.DataArray(values.reshape(chains, draws, d_x, d_phi),
                                                    dims=(*SAMPLE_DIMS, CONTEXT, FEATURE),
                                                    coords=sample | coords, attrs=attrs)})
        point = xr.Dataset({THETA: xr.DataArray(wald.center.reshape(d_x, d_phi), dims=(CONTEXT, FEATURE),
                                                coords=coords),
                            STD_ERR: xr.DataArray(se.reshape(d_x, d_phi), dims=(CONTEXT, FEATURE),
                                                  coords=coords)})
        constant = xr.Dataset({f"theta_{IDENTIFIED}": xr.DataArray(
            identified.reshape(d_x, d_phi), dims=(CONTEXT, FEATURE), coords=coords,
            attrs={"description": "True where the data identify the entry of Θ (vec(Θ) coordinates)"})})
    else:
        raise TypeError(f"fit_tree takes a fit in RTV or vec(Θ) coordinates, got "
                        f"{type(coordinates).__name__}")
    rank = getattr(fit, "rank", None)
    root = {"bayes_loco_version": __version__, "model": "contextual BTL", "method": fit.diagnostics.method,
            "representation": "Wald normal draws", "chains": chains, "draws": draws, "random_seed": seed,
            "k": int(k), "k_eff": int(wald.effective_dim),
            "settings": json.dumps({"chains": chains, "draws": draws, "seed": seed, "level": float(level),
                                    "rank": rank})}
    if rank is not None:
        root["rank"] = int(rank)
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs=root), POSTERIOR: posterior, POINT_ESTIMATE: point,
                                  CONSTANT_DATA: constant})


def _theta_coords(d_x: int, d_phi: int) -> dict:
    return {CONTEXT: np.arange(d_x), FEATURE: np.arange(d_phi)}
