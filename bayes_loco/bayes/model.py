"""The factored Bayesian contextual BTL model as a PyMC model builder.

Θ = U Vᵀ with U (d_x × r) and V (d_φ × r) under independent Normal priors, and
y_t ~ Bernoulli(σ(η_t)) with η_t = x_tᵀ Θ Δφ_t computed as the row-wise dot of
X U and ΔΦ V: two GEMMs, never the N × d_x·d_φ Kronecker design (docs/design.md,
convention 7), or from the distinct rows of X and ΔΦ (:mod:`.margins`). U and V are
not identified (U R, V R give the same Θ for any orthogonal R); Θ and its reduced
coordinates θ_rtv are, and those are what :func:`bayes_loco.bayes.fit_posterior`
diagnoses (docs/design.md, convention 6).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .._validation import check_int, check_rank, check_real, rng_from
from ..data import PreferenceData
from ..model import Ties, check_ties
from . import dims as D
from .margins import RowLayout, add_margins, row_coords, row_layout
from .settings import Prior, settings_group
from .ties import BERNOULLI, add_tie_likelihood, likelihood_kind, observe_bernoulli, tie_prior


def model_coords(data: PreferenceData, rank: int, *, context_names=None, feature_names=None) -> dict:
    """The coords of :func:`build_model`: comparisons, context and feature coordinates, rank.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    context_names, feature_names : sequence of str, optional
        Labels of the d_x context and d_φ feature coordinates; integers 0 … d−1
        by default.

    Returns
    -------
    dict
        ``comparison``, ``context``, ``feature`` and ``rank`` labels.

    Examples
    --------
    >>> sorted(bl.bayes.model_coords(data, 2))
    ['comparison', 'context', 'feature', 'rank']
    """
    coords = {D.COMPARISON: np.arange(data.n), D.RANK: np.arange(rank)}
    for dim, names, size, arg in ((D.CONTEXT, context_names, data.d_x, "context_names"),
                                  (D.FEATURE, feature_names, data.d_phi, "feature_names")):
        if names is None:
            coords[dim] = np.arange(size)
        else:
            names = list(names)
            if len(names) != size or len(set(names)) != size:
                raise ValueError(f"{arg} must hold {size} distinct labels, got {len(names)} "
                                 f"({len(set(names))} distinct)")
            coords[dim] = names
    return coords


def build_model(data: PreferenceData, rank: int, *, prior=None, ties: Ties = "half",
                store_margins: bool = False, context_names=None, feature_names=None,
                group_rows: bool = False) -> pm.Model:
    """PyMC model of the contextual BTL likelihood with a factored rank-r Θ = U Vᵀ.

    Priors (the :class:`~bayes_loco.bayes.Prior` ``prior``): U_ik ~ N(0, s_U²),
    V_jk ~ N(0, s_V²), independent, with s_U = s_V = ``prior.scale`` or, with
    ``prior.hyper=True``, s_U, s_V ~ HalfNormal(``prior.scale``). The implied
    prior on Θ has mean 0, entries of variance r·s_U²·s_V² that are
    uncorrelated but not independent and not Gaussian (each is a sum of r
    products of Normals), and its mass concentrates on rank-r matrices.

    Likelihood: y_t ~ Bernoulli(σ(η_t)), η_t = Σ_k (X U)_tk (ΔΦ V)_tk, on data
    without ties and weights; with ties or weights, or with ``ties="davidson"``,
    the weighted "half" quasi-likelihood or Davidson's model of
    :mod:`bayes_loco.bayes.ties`.

    Parameters
    ----------
    data : PreferenceData
        Enters through ``pm.Data`` containers named ``"contexts"``,
        ``"differences"`` and ``"labels"`` (dims ``comparison × context``,
        ``comparison × feature``, ``comparison``), so the model can be reused on
        new data with ``pm.set_data`` (pass ``coords={"comparison": ...}`` when N
        changes).
    rank : int
        r, 1 ≤ r ≤ min(d_x, d_φ).
    prior : Prior, dict or None
        The prior settings (a dict of :class:`~bayes_loco.bayes.Prior`'s fields,
        or None for the defaults):

        - ``scale`` (1.0): s > 0, the prior standard deviation of the factor
          entries (or the scale of their HalfNormal hyper-prior);
        - ``hyper`` (False): put HalfNormal(``scale``) hyper-priors on s_U and s_V;
        - ``balance`` (0.0): c ≥ 0 of an optional balancing potential
          −(c/8)‖UᵀU − VᵀV‖²_F, the Bayesian counterpart of FGD's balancing
          term. It removes the scale ridge U → UA, V → VA⁻ᵀ but not the
          rotations (the Normal prior already penalises the scale ridge). 0
          (default) leaves the factors free. Measured with nutpie, 4 chains ×
          (1000 + 1000) from the frequentist start, paper simulation N = 3000,
          r = 3, q = 1 (2 shared cores): §5.1 Θ — free 183 s, min ESS(Θ, θ_rtv)
          1051, mean tree depth 5.05; c = 1: 204 s, 1295, 5.15. Diagonal Θ —
          free 199 s, 1944, 4.92; c = 1: 261 s, 1942, 5.00. No divergences,
          R-hat ≤ 1.007 in all four. Neither wins consistently, so the simpler
          free model is the default.
        - ``nu_scale`` (None): σ_ν of Davidson's prior log ν ~ N(0, σ_ν²); set
          (to 1 unless given) by ``ties="davidson"``.
    ties : {"half", "davidson"}
        The tie model (:mod:`bayes_loco.bayes.ties`); ``prior.nu_scale`` is only the
        σ_ν of Davidson's ν, refused with ``"half"``.
    store_margins : bool
        Also keep η (dims ``comparison``) as a Deterministic; off by default as
        it stores N numbers per draw.
    context_names, feature_names : sequence of str, optional
        Coordinate labels of the context and feature dims.
    group_rows : bool
        Read X and ΔΦ as distinct rows and an index per comparison where that
        is cheaper (:mod:`bayes_loco.bayes.margins`; the same likelihood, its
        gradient 2.3–4.2× faster on the paper's simulation). The containers are then
        ``context_rows`` and ``context_index``, or ``difference_rows`` and
        ``difference_index``, in place of ``contexts`` or ``differences``.
        :func:`~bayes_loco.bayes.fit_posterior` builds its models so.

    Returns
    -------
    pymc.Model
        Free variables ``U`` (context × rank) and ``V`` (feature × rank)
        (and ``sigma_U``, ``sigma_V`` with ``prior.hyper``); Deterministic
        ``theta`` = Θ (context × feature); observed ``y``; for Davidson's model
        ``log_nu_shift`` (free) and ``nu`` = ν (Deterministic).

    Examples
    --------
    >>> model = bl.bayes.build_model(data, 2)
    >>> sorted(v.name for v in model.free_RVs)
    ['U', 'V']
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rank = check_rank(rank, data.d_x, data.d_phi)
    ties = check_ties(ties)
    prior = tie_prior(settings_group(prior, Prior, "prior"), ties)
    layout = row_layout(data, rank, group_rows)
    coords = model_coords(data, rank, context_names=context_names, feature_names=feature_names)
    with pm.Model(coords=coords | row_coords(layout)) as model:
        s_u, s_v = prior_scales(prior)
        u = pm.Normal(D.LEFT, mu=0.0, sigma=s_u, dims=(D.CONTEXT, D.RANK))
        v = pm.Normal(D.RIGHT, mu=0.0, sigma=s_v, dims=(D.FEATURE, D.RANK))
        add_likelihood(data, u, v, prior, ties, store_margins, layout)
    return model


def prior_scales(prior):
    """s_U, s_V inside a model context: ``prior.scale``, or HalfNormal(``prior.scale``) variables."""
    if prior.hyper:
        return (pm.HalfNormal(D.LEFT_SCALE, sigma=prior.scale),
                pm.HalfNormal(D.RIGHT_SCALE, sigma=prior.scale))
    return prior.scale, prior.scale


def add_likelihood(data: PreferenceData, u, v, prior, ties: str, store_margins: bool,
                   layout: RowLayout) -> None:
    """Inside a model context: the data containers, the balancing potential, Θ = U Vᵀ and y's likelihood.

    Shared by the factored model and its chart (:mod:`bayes_loco.bayes.chart`),
    which differ only in how U and V are parametrised. The likelihood is y's
    Bernoulli, or where :func:`~.ties.likelihood_kind` says so the tie model's
    (:func:`~.ties.add_tie_likelihood`), chosen by ``data`` and ``ties``; the
    margins are read as ``layout`` says (:mod:`.margins`).
    """
    if not isinstance(store_margins, bool):
        raise TypeError(f"store_margins must be a bool, got {store_margins!r}")
    eta = add_margins(data, u, v, layout)
    bernoulli = likelihood_kind(data, ties) == BERNOULLI
    if bernoulli:
        y = pm.Data(D.DATA_LABELS, np.asarray(data.labels, dtype=np.int64), dims=D.COMPARISON)
    if prior.balance > 0:
        gap = pt.dot(u.T, u) - pt.dot(v.T, v)
        pm.Potential(D.BALANCE, -(prior.balance / 8.0) * pt.sum(gap * gap))
    pm.Deterministic(D.THETA, pt.dot(u, v.T), dims=(D.CONTEXT, D.FEATURE))
    if store_margins:
        eta = pm.Deterministic(D.MARGINS, eta, dims=D.COMPARISON)
    if bernoulli:
        observe_bernoulli(y, eta)
    else:
        add_tie_likelihood(data, eta, ties, prior)


def balanced_factors(theta: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """U = P_r S_r^½, V = Q_r S_r^½ from the SVD Θ = P S Qᵀ: balanced (UᵀU = VᵀV).

    The start of every fit (docs/design.md, convention 5: U = V = 0 is a saddle).

    Parameters
    ----------
    theta : ndarray of shape (d_x, d_φ)
    rank : int
        r.

    Returns
    -------
    U : ndarray of shape (d_x, r)
    V : ndarray of shape (d_φ, r)

    Examples
    --------
    >>> u, v = bl.bayes.balanced_factors(fit.theta, 2)
    >>> np.allclose(u @ v.T, fit.theta), np.allclose(u.T @ u, v.T @ v)
    (True, True)
    """
    p, s, qt = np.linalg.svd(np.asarray(theta, dtype=float), full_matrices=False)
    root = np.sqrt(s[:rank])
    return p[:, :rank] * root, qt[:rank].T * root


def prior_draw(d_x: int, d_phi: int, rank: int, seed, *, scale: float = 1.0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One draw (Θ, U, V) from the prior of :func:`build_model` with fixed scales.

    Used by simulation-based calibration: data simulated from Θ drawn this way
    make the posterior rank statistics of Θ's entries uniform.

    Parameters
    ----------
    d_x, d_phi, rank : int
    seed : int, SeedSequence or Generator
    scale : float
        s_U = s_V.

    Returns
    -------
    theta : ndarray of shape (d_x, d_φ)
    U : ndarray of shape (d_x, rank)
    V : ndarray of shape (d_φ, rank)

    Examples
    --------
    >>> theta, u, v = bl.bayes.prior_draw(3, 7, 2, seed=0)
    >>> theta.shape, np.allclose(theta, u @ v.T)
    ((3, 7), True)
    """
    d_x = check_int(d_x, "d_x", 1)
    d_phi = check_int(d_phi, "d_phi", 1)
    rank = check_rank(rank, d_x, d_phi)
    scale = check_real(scale, "scale", 0.0, low_open=True)
    rng = rng_from(seed)
    u = scale * rng.standard_normal((d_x, rank))
    v = scale * rng.standard_normal((d_phi, rank))
    return u @ v.T, u, v
