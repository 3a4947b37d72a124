"""Evaluation: policy value and sub-optimality against the truth Θ*, and held-out metrics without one.

With a truth (simulations): :func:`policy_value`, :func:`relative_value`, :func:`optimal_value`,
:func:`suboptimality`. Without one (your own data): :func:`log_loss`, :func:`accuracy`,
:func:`brier`, :func:`calibration_curve` and :func:`score` of predicted probabilities on held-out
comparisons; :func:`bayes_loco.crossval.cross_validate` runs them fold by fold.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._domains import is_integer
from ._validation import as_float_array, as_labels, as_weights, check_instance, check_int, check_option
from .config import get_config
from .data import PreferenceData
from .model import rewards
from .policy import Policy
from .population import SCOPES, Population


def truth_theta(truth, d_x: int, d_phi: int) -> np.ndarray:
    """Θ* from ``truth``: Θ* itself (d_x × d_φ) or a :class:`~bayes_loco.problems.Problem` (``.theta``)."""
    theta = as_float_array(getattr(truth, "theta", truth), "truth", 2)
    if theta.shape != (d_x, d_phi):
        raise ValueError(f"truth: Θ* must have shape (d_x, d_phi) = ({d_x}, {d_phi}), got {theta.shape}")
    return theta


def truth_rewards(truth, population: Population) -> np.ndarray:
    """True rewards r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a), shape (n, A); ``truth`` as in :func:`truth_theta`."""
    theta = truth_theta(truth, population.d_x, population.d_phi)
    return rewards(theta, population.contexts, population.features)


def check_policy(policy, population) -> Policy:
    """``policy`` as a :class:`Policy` solved on ``population``, or one error saying which was wrong."""
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy (from greedy_policy or pessimistic_policy), got "
                        f"{type(policy).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    if policy.unit_of_row.shape[0] != population.n:
        raise ValueError(f"population has {population.n} rows, but the policy was solved on "
                         f"{policy.unit_of_row.shape[0]}: evaluate it on the population it was solved on")
    if policy.probabilities.shape[1] != population.n_actions:
        raise ValueError(f"population has {population.n_actions} actions, but the policy chooses among "
                         f"{policy.probabilities.shape[1]}: evaluate it on the population it was solved on")
    if policy.population is not None and policy.population != population.fingerprint:
        raise ValueError("population is not the one the policy was solved on (its fingerprint differs, "
                         "though the sizes match): evaluate the policy on its own population, or solve a "
                         "policy on this one")
    return policy


def policy_value(policy: Policy, truth, population: Population) -> float:
    """E_ρ Σ_a π(a | x, s) r*(x, s, a): the policy's value under the true Θ*.

    Parameters
    ----------
    policy : Policy
        Solved on ``population`` (:func:`~bayes_loco.pessimistic_policy`,
        :func:`~bayes_loco.greedy_policy`).
    truth : ndarray of shape (d_x, d_φ), or a Problem
        Θ*, or anything with ``.theta`` (a simulated problem).
    population : Population
        The evaluation population ρ the policy was solved on.

    Returns
    -------
    float

    Examples
    --------
    >>> policy = bl.greedy_policy(fit.theta, pop)
    >>> round(bl.policy_value(policy, problem, pop), 3)
    0.413
    """
    check_policy(policy, population)
    r = truth_rewards(truth, population)
    return float(np.mean(np.sum(policy.row_probabilities * r, axis=1)))


def relative_value(policy: Policy, truth, population: Population) -> float:
    """The policy's true value minus that of always playing its reference action a_ref.

    The quantity ``policy.pessimistic_value`` bounds from below: the exact and relaxed
    objectives score actions relative to a_ref (:mod:`bayes_loco.policy`), so a
    pessimistic policy's guarantee holds when ``relative_value ≥ pessimistic_value``.

    Parameters
    ----------
    policy, truth, population
        As in :func:`policy_value`.

    Returns
    -------
    float

    Examples
    --------
    >>> policy = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")
    >>> bl.relative_value(policy, problem, pop) >= policy.pessimistic_value
    True
    """
    check_policy(policy, population)
    reference = truth_rewards(truth, population)[:, policy.reference_action]
    return policy_value(policy, truth, population) - float(np.mean(reference))


def optimal_value(truth, population: Population, scope: str = "personalised") -> float:
    """Value of the best policy of ``scope``: E_ρ max_a r* (personalised) or E_s max_a E_x|s r* (global).

    Parameters
    ----------
    truth : ndarray of shape (d_x, d_φ), or a Problem
        Θ*, or anything with ``.theta``.
    population : Population
    scope : {"personalised", "global"}
        One action per unit (x, s), or per state s for the contexts of that state.

    Returns
    -------
    float

    Examples
    --------
    >>> round(bl.optimal_value(problem, pop), 3)
    0.475
    """
    check_option(scope, "scope", SCOPES)
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    r = truth_rewards(truth, population)
    units = population.units(scope)
    return float(units.weights @ units.mean(r).max(axis=1))


def suboptimality(policy: Policy, truth, population: Population) -> float:
    """Optimal value minus the policy's value, for the policy's own scope (≥ 0; 0 is optimal).

    Parameters
    ----------
    policy, truth, population
        As in :func:`policy_value`.

    Returns
    -------
    float

    Examples
    --------
    >>> greedy = bl.greedy_policy(fit.theta, pop)
    >>> round(bl.suboptimality(greedy, problem, pop), 3)
    0.063
    """
    check_policy(policy, population)
    return optimal_value(truth, population, policy.scope) - policy_value(policy, truth, population)


# ------------------------------------------------------------------ held-out metrics (no truth needed)

#: The metrics :func:`score` computes, in order.
METRICS = ("log_loss", "accuracy", "brier")


def _labels_and_weights(labels, p, weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y (float, in {0, ½, 1}), p (in [0, 1]) and normalised weights w (Σ w = 1), or one error.

    ``labels`` may be a :class:`~bayes_loco.PreferenceData`: its labels, and its weights
    unless ``weights`` is given too, each row times its count (the comparisons it stands for).
    """
    counts = _counts(labels)
    if isinstance(labels, PreferenceData):
        if weights is not None and labels.weights is not None:
            raise ValueError("weights were given twice: labels is a PreferenceData that carries weights; "
                             "leave weights out (or pass data.labels)")
        weights = labels.weights if weights is None else weights
        labels = labels.labels
    y = as_labels(labels).astype(float)
    p = as_float_array(p, "p", 1)
    if p.shape != y.shape:
        raise ValueError(f"p has {p.shape[0]} entries, labels {y.shape[0]}: one probability per comparison")
    bad = (p < 0) | (p > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"p[{i}] = {p[i].item()!r} is not a probability (expected 0 <= p <= 1)")
    w = counts * (np.ones(y.shape[0]) if weights is None else as_weights(weights, y.shape[0]))
    return y, p, w / w.sum()


def _counts(labels) -> np.ndarray | float:
    """f_t of a PreferenceData's counted rows, else 1."""
    return labels.counts if isinstance(labels, PreferenceData) and labels.counts is not None else 1.0


def log_loss(labels, p, weights=None) -> float:
    """Mean negative log-likelihood −[y_t log p_t + (1 − y_t) log(1 − p_t)] of held-out labels.

    Parameters
    ----------
    labels : array_like of {0, ½, 1}, or PreferenceData
        y_t; a tie (½) scores −½[log p_t + log(1 − p_t)], the "half" tie convention
        (a tie counts half a win each way). A PreferenceData brings its weights, and each
        counted row weighs its count f_t (the comparisons it stands for).
    p : array_like, shape (N,)
        Predicted P(a_t1 preferred) (``fit.predict_proba(data)``), clipped to
        [``config["eps"]``, 1 − EPS] (p_t and 1 − p_t each at least EPS).
    weights : array_like, shape (N,), optional
        Positive w_t; the result is Σ w_t ℓ_t / Σ w_t.

    Returns
    -------
    float
        log 2 ≈ 0.693 is what a coin scores; lower is better.

    Examples
    --------
    >>> round(bl.log_loss([1, 0, 0.5], [0.9, 0.2, 0.5]), 4)
    0.3406
    >>> round(bl.log_loss(data, fit.predict_proba(data)), 3)  # in-sample here: hold data out in practice
    0.531
    """
    y, p, w = _labels_and_weights(labels, p, weights)
    # 1 − p clipped on its own: 1 − (1 − EPS) is not EPS in floating point
    eps = get_config()["eps"]
    return float(-w @ (y * np.log(np.clip(p, eps, 1)) + (1 - y) * np.log(np.clip(1 - p, eps, 1))))


def accuracy(labels, p, weights=None) -> float:
    """Weighted share of comparisons whose preferred answer p_t picks: 1 if right, 0 if wrong.

    A tie (y_t = ½) scores ½ whatever is predicted, and so does p_t = ½ exactly (no pick):
    both are what a coin would score.

    Parameters
    ----------
    labels, p, weights
        As in :func:`log_loss`.

    Returns
    -------
    float
        In [0, 1]; a coin scores ½.

    Examples
    --------
    >>> round(bl.accuracy([1, 0, 0.5], [0.9, 0.2, 0.5]), 4)
    0.8333
    """
    y, p, w = _labels_and_weights(labels, p, weights)
    hit = np.where((p > 0.5) == (y == 1), 1.0, 0.0)
    return float(w @ np.where((y == 0.5) | (p == 0.5), 0.5, hit))


def brier(labels, p, weights=None) -> float:
    """Weighted mean squared error Σ w_t (p_t − y_t)² / Σ w_t (a tie's y_t = ½).

    Parameters
    ----------
    labels, p, weights
        As in :func:`log_loss`.

    Returns
    -------
    float
        In [0, 1]; always predicting ½ scores 0.25.

    Examples
    --------
    >>> round(bl.brier([1, 0, 0.5], [0.9, 0.2, 0.5]), 4)
    0.0167
    """
    y, p, w = _labels_and_weights(labels, p, weights)
    return float(w @ (p - y) ** 2)


def calibration_curve(labels, p, bins=10, weights=None) -> pd.DataFrame:
    """Observed mean label against mean predicted probability, bin by bin (a reliability diagram's data).

    Parameters
    ----------
    labels, p, weights
        As in :func:`log_loss` (weights weight both means).
    bins : int or array_like
        Equal-width bins on [0, 1], or the increasing bin edges (first 0, last 1).

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bin: ``bin`` (its index), ``lower``, ``upper`` (edges),
        ``predicted`` (weighted mean p), ``observed`` (weighted mean y, ties ½),
        ``count`` (comparisons n = Σ f_t, counted rows standing for f_t each), ``std_err`` of
        ``observed``: sqrt(n/(n − 1) · Σ w_t² (y_t − ȳ)² / f_t) / Σ w_t, that of the comparisons
        the rows stand for, which is s/√n without weights and counts (NaN for a bin of one).
        A calibrated model has ``observed`` ≈ ``predicted`` within a few s.e.

    Examples
    --------
    >>> curve = bl.calibration_curve(data, fit.predict_proba(data), bins=4)
    >>> curve[["predicted", "observed", "count"]].round(2)
       predicted  observed  count
    0       0.17      0.13     63
    1       0.37      0.34     90
    2       0.63      0.66     83
    3       0.83      0.84     64
    """
    y, p, w = _labels_and_weights(labels, p, weights)
    counts = np.broadcast_to(_counts(labels), y.shape)
    if is_integer(bins):
        edges = np.linspace(0.0, 1.0, check_int(bins, "bins", 1) + 1)
    else:
        edges = as_float_array(bins, "bins", 1)
        if edges.size < 2 or np.any(np.diff(edges) <= 0) or edges[0] != 0 or edges[-1] != 1:
            raise ValueError(f"bins must be a number of bins or increasing edges from 0 to 1, got {edges}")
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, edges.size - 2)
    rows = []
    for b in np.unique(index):
        mask = index == b
        wb, yb, fb = w[mask], y[mask], counts[mask]
        n, total = float(fb.sum()), wb.sum()
        observed = float(wb @ yb / total)
        spread = np.sqrt(n / (n - 1) * np.sum(wb**2 / fb * (yb - observed) ** 2)) / total if n > 1 else np.nan
        rows.append((int(b), edges[b], edges[b + 1], float(wb @ p[mask] / total), observed, round(n),
                     float(spread)))
    return pd.DataFrame(rows, columns=["bin", "lower", "upper", "predicted", "observed", "count", "std_err"])


def score(fit, data: PreferenceData) -> dict[str, float]:
    """Held-out :data:`METRICS` of ``fit`` on ``data``: log-loss, accuracy and Brier score.

    Weighted by the data's weights when it carries them, each counted row by its count.

    Parameters
    ----------
    fit : Fit
        Anything with ``predict_proba(data)``: every fit of the package.
    data : PreferenceData
        Comparisons the fit did not see (``data.split``, or
        :func:`~bayes_loco.cross_validate` for every fold).

    Returns
    -------
    dict
        ``{"log_loss": ..., "accuracy": ..., "brier": ...}``.

    Examples
    --------
    >>> train, test = data.split(200)
    >>> held_out = bl.score(bl.fit_prs(train, rank=2, ridge=1.0), test)
    >>> sorted(held_out)
    ['accuracy', 'brier', 'log_loss']
    """
    check_instance(data, "data", PreferenceData)
    p = fit.predict_proba(data)
    return {"log_loss": log_loss(data, p), "accuracy": accuracy(data, p), "brier": brier(data, p)}
