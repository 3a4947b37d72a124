"""Ties and weights in the Bayesian likelihood: the "half" quasi-likelihood and Davidson's model.

Labels are y_t ∈ {0, ½, 1} (½ a tie) with weights w_t > 0 (ones when the data
carry none), and η_t = x_tᵀ Θ Δφ_t. ``fit_posterior(..., ties=...)`` chooses the
likelihood:

``"half"``
    A tie counts half a win each way (arena-rank's convention): the log-likelihood
    term of comparison t is w_t [y_t log σ(η_t) + (1 − y_t) log σ(−η_t)]. With
    ties or weights this is a quasi-likelihood (no distribution of y_t has it as its
    log mass), used as the likelihood of the posterior. On data without ties and
    without weights (all w_t = 1) it is the Bernoulli likelihood and the model is
    exactly the one without this module: the observed Bernoulli ``y``
    (:func:`observe_bernoulli`; same graph, same draws for the same seed).
``"davidson"``
    Davidson's (1970) model with one tie parameter ν ≥ 0:
    P(y = 1) : P(tie) : P(y = 0) = e^η/2 : ν : e^−η/2, so the term of t is
    w_t [(y_t − ½) η_t + 1{y_t = ½} log ν − log(e^η_t/2 + ν + e^−η_t/2)]
    (:func:`bayes_loco.model.outcome_probabilities` is the NumPy reference).

**The prior of ν** is log ν ~ N(0, σ_ν²) with σ_ν = ``prior.nu_scale``
(``config["nu_scale"]`` = 1 by default): its median ν = 1 makes a third of the even
comparisons (η = 0) ties, about Chatbot Arena's share, and 95 % of its mass puts
that share between 6 % and 78 %. A log-normal rather than a HalfNormal on ν:
NUTS moves in log ν without a boundary at ν = 0, and on data with few ties the
posterior of ν stays away from 0 instead of piling up against it.

**Where ν starts.** The sampler moves in s = log ν − log ν₀ (``log_nu_shift``,
started at 0) with log ν₀ a data container (``log_nu_start``): ν starts at
ν₀ = 2τ/(1 − τ), the ν under which an even comparison ties with probability τ,
τ the data's weighted tie share smoothed as (Σ w_t 1{tie} + ½)/(Σ w_t + 1). The
prior is unchanged by the shift (s ~ N(−log ν₀, σ_ν²)), and a compiled model reused
on new data (:mod:`.samplers`) starts at the new data's ν₀.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import expit, log_expit, logsumexp

from ..config import get_config
from ..data import PreferenceData
from ..model import DAVIDSON, HALF, check_ties
from . import dims as D
from .dims import DATA_NU_START, DATA_WEIGHTS, NU, NU_SHIFT
from .settings import Prior

#: The likelihood of data without ties and without weights under ``"half"``: the observed Bernoulli.
BERNOULLI = "bernoulli"


def tie_prior(prior: Prior, ties: str) -> Prior:
    """``prior`` for the tie model ``ties``: Davidson's gets a prior on ν (σ_ν = ``config["nu_scale"]`` if
    unset).

    ``ties`` is the model; the prior only holds the hyperparameter σ_ν of ν, never the
    choice. Raises ValueError for ``"half"`` with a ``nu_scale``: that model has no ν.
    """
    check_ties(ties)
    if ties == DAVIDSON:
        return (prior if prior.nu_scale is not None
                else dataclasses.replace(prior, nu_scale=get_config()["nu_scale"]))
    if prior.nu_scale is not None:
        raise ValueError(f"prior.nu_scale={prior.nu_scale:g} is the prior of Davidson's tie parameter ν, but "
                         "ties='half' has no ν: pass ties='davidson', or leave nu_scale out")
    return prior


def likelihood_kind(data: PreferenceData, ties: str) -> str:
    """The likelihood the model uses: :data:`BERNOULLI`, ``"half"`` or ``"davidson"``.

    ``"half"`` on data without ties and without weights other than 1 is the
    Bernoulli likelihood, and is built as such.
    """
    if check_ties(ties) == HALF and not data.has_ties and not data.weighted and data.counts is None:
        return BERNOULLI
    return ties


def tie_record(data: PreferenceData, ties: str) -> dict:
    """``{"ties": model}`` for a fit's settings, or {} for the plain Bernoulli model (recorded as before)."""
    kind = likelihood_kind(data, ties)
    return {} if kind == BERNOULLI else {"ties": kind}


def log_nu_start(data: PreferenceData) -> float:
    """log ν₀ = log(2τ/(1 − τ)), τ the smoothed weighted tie share (see the module docstring)."""
    w = data.loss_weights
    tau = (float(w[data.ties].sum()) + 0.5) / (float(w.sum()) + 1.0)
    return float(np.log(2.0 * tau / (1.0 - tau)))


def log_likelihood_term(value, eta):
    """y log σ(η) + (1 − y) log σ(−η) as a graph, written (y − ½) η − ½|η| − log1p(e^−|η|).

    The value of PyMC's ``Bernoulli(logit_p=η)`` log mass on y ∈ {0, 1} (to rounding),
    at one exp and one log1p per comparison: softplus and the σ of its gradient take
    three, and PyMC's Bernoulli adds a check of y's support. The log density and
    gradient of N = 10,000 margins took 0.19 ms in this form and 0.31 ms as PyMC's
    Bernoulli (numba). ½|η| rather than max(η, 0) keeps the gradient y − σ(0) exact at η = 0.
    """
    size = pt.abs(eta)
    return (value - 0.5) * eta - 0.5 * size - pt.log1p(pt.exp(-size))


def _bernoulli_random(eta, rng=None, size=None):
    return (rng.random(size) < expit(eta)).astype(np.int64)


def observe_bernoulli(y, eta) -> None:
    """Inside a model context: the observed y_t ~ Bernoulli(σ(η_t)) (:func:`log_likelihood_term`).

    A ``CustomDist`` that draws as the Bernoulli does, so ``pm.sample_posterior_predictive``
    on a fit's model still replicates the labels.
    """
    pm.CustomDist(D.OBSERVED, eta, logp=log_likelihood_term, random=_bernoulli_random, observed=y,
                  dtype="int64", dims=D.COMPARISON)


def _half_logp(value, eta, weights):
    return weights * log_likelihood_term(value, eta)


def _davidson_logp(value, eta, weights, log_nu):
    log_nu = pt.broadcast_to(log_nu, eta.shape)
    normaliser = pt.logsumexp(pt.stack([-eta / 2.0, log_nu, eta / 2.0]), axis=0)
    return weights * ((value - 0.5) * eta + pt.eq(value, 0.5) * log_nu - normaliser)


def add_tie_likelihood(data: PreferenceData, eta, ties: str, prior: Prior) -> None:
    """Inside a model context: the observed ``y`` of the "half" or Davidson likelihood, with its containers.

    ``y`` is a CustomDist whose log density is the weighted term of the module
    docstring, observed at the float labels (container ``labels``), so PyMC's
    ``observed_data`` and ``pm.compute_log_likelihood`` see it. It cannot be
    forward-sampled (the "half" quasi-likelihood is no distribution); the tree's
    predictive groups are drawn by :mod:`.layout`. Davidson's ν has the prior
    log ν ~ N(0, ``prior.nu_scale``²).
    """
    y = pm.Data(D.DATA_LABELS, np.asarray(data.labels, dtype=float), dims=D.COMPARISON)
    weights = pm.Data(DATA_WEIGHTS, data.loss_weights, dims=D.COMPARISON)  # counts × sampling weights
    if ties == HALF:
        pm.CustomDist(D.OBSERVED, eta, weights, logp=_half_logp, observed=y, dims=D.COMPARISON)
        return
    start = pm.Data(DATA_NU_START, log_nu_start(data))
    shift = pm.Normal(NU_SHIFT, mu=-start, sigma=prior.nu_scale, initval=0.0)
    log_nu = start + shift
    pm.Deterministic(NU, pt.exp(log_nu))
    pm.CustomDist(D.OBSERVED, eta, weights, log_nu, logp=_davidson_logp, observed=y, dims=D.COMPARISON)


def pointwise_log_likelihood(eta: np.ndarray, labels: np.ndarray, weights: np.ndarray | None,
                             ties: str, nu=None) -> np.ndarray:
    """The weighted log-likelihood term of each comparison under ``ties`` (NumPy; broadcasts over draws).

    Parameters
    ----------
    eta : ndarray, shape (..., N)
        Margins η_t, any leading (draw) axes.
    labels : ndarray, shape (N,)
        y_t ∈ {0, ½, 1}.
    weights : ndarray, shape (N,), or None
        w_t (None: ones).
    ties : {"half", "davidson"}
        ``"half"`` is also the Bernoulli log mass on labels in {0, 1}.
    nu : float or ndarray, shape (...)
        ν, one per leading index of ``eta`` (Davidson only).
    """
    check_ties(ties)
    y = np.asarray(labels, dtype=float)
    if ties == HALF:
        term = y * log_expit(eta) + (1.0 - y) * log_expit(-eta)
    else:
        with np.errstate(divide="ignore"):
            log_nu = np.log(np.asarray(nu, dtype=float))[..., None]
        log_nu = np.broadcast_to(log_nu, np.shape(eta))
        normaliser = logsumexp(np.stack([-eta / 2.0, log_nu, eta / 2.0]), axis=0)
        term = (y - 0.5) * eta + np.where(y == 0.5, log_nu, 0.0) - normaliser
    return term if weights is None else term * weights
