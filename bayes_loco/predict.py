"""Predictions of a fit on comparisons it has not seen: probabilities, intervals and rewards.

Every fit (the frequentist ones through :class:`~bayes_loco.results.WaldFit`, the
posterior) inherits :class:`Predictive`, so ``fit.predict_proba(data)``,
``fit.predict_interval(data, level)`` and ``fit.reward(contexts, features, level)`` work
on a fit just made and on one read back with :func:`bayes_loco.load`.

Two roads, one answer shape:

- a frequentist fit (Wald) predicts at its estimate: η̂_t = x_tᵀ Θ̂ Δφ_t, and its
  intervals are the delta method on the identified coordinates, η̂_t ± z_{(1+level)/2}
  ‖z_t‖_Σ with Σ the covariance of the fit's own Wald set (``fit.calibrated_set``), so
  the interval follows whatever covariance that set uses;
- a posterior (a :class:`DrawsPredictive`, e.g. :class:`bayes_loco.bayes.Posterior`)
  averages over its draws Θ_j (and, for Davidson's model, ν_j): the posterior mean of
  the probability, not the probability at the posterior mean, and equal-tailed
  posterior quantiles for intervals.

Intervals are pointwise: each holds at ``level`` for its own comparison or action, not
simultaneously over all of them. A :class:`Prediction` carries the user's names (the items of
each comparison, the candidate actions) into :meth:`Prediction.to_frame` and
:meth:`Prediction.to_xarray` (dimensions ``comparison`` or ``row`` × ``action``, the
interval's ends along ``ci_bound``, as ArviZ labels them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from ._validation import LEVEL, as_float_array, as_names, check_instance, check_int, check_level
from .config import get_config
from .data import PreferenceData
from .model import expected_label, margins
from .population import Population

# The sample dims of a posterior's draws, in the order Posterior.theta_draws stacks them.
SAMPLE_DIMS = ("chain", "draw")


@dataclass(frozen=True, eq=False)
class Prediction:
    """Point predictions with (optionally) pointwise intervals.

    Attributes
    ----------
    estimate : ndarray
        Per comparison (N,) for probabilities; per row and candidate action (n, A) for rewards.
    lower, upper : ndarray or None
        The interval's ends, same shape as ``estimate``; None when no level was asked for.
    level : float or None
        Pointwise level of each interval.
    quantity : {"probability", "reward"}
        What is predicted: the probability that a_t1 is preferred (a tie counting half),
        or the reward r(x, s, a) − r(x, s, a_ref) relative to the reference action.
    method : str
        ``"plug-in"``/``"wald delta method"`` (frequentist fits) or ``"posterior mean"``/
        ``"posterior quantiles"`` (posteriors).
    reference : int or None
        Rewards only: the index of the reference action a_ref (its column is 0).
    action_names : tuple of str or None
        Rewards only: the user's name of each of the A candidate actions.
    item_names : tuple of (ndarray of str, ndarray of str) or None
        Probabilities of item-indexed comparisons only: the names of each comparison's two
        items (a_t1, a_t0), when the data name their items.
    """

    estimate: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    level: float | None = None
    quantity: str = "probability"
    method: str = ""
    reference: int | None = None
    action_names: tuple[str, ...] | None = None
    item_names: tuple[np.ndarray, np.ndarray] | None = None

    def _item_columns(self) -> dict[str, np.ndarray]:
        if self.item_names is None:
            return {}
        return dict(zip(("item_1", "item_0"), map(np.asarray, self.item_names), strict=True))

    def _action_labels(self, action_names) -> tuple | range:
        a = self.estimate.shape[1]
        if action_names is not None:
            return as_names(action_names, "action_names", a)
        return range(a) if self.action_names is None else self.action_names

    def to_frame(self, action_names=None) -> pd.DataFrame:
        """One row per comparison (``comparison``), or per row and action (``row``, ``action``).

        Parameters
        ----------
        action_names : sequence of str, optional
            Rewards only: a name for each of the A actions (e.g. a fit's ``data.item_names``),
            used in the ``action`` level of the index; default the prediction's own
            ``action_names``, else the actions' indices.

        Returns
        -------
        pandas.DataFrame
            ``estimate`` (and ``lower``, ``upper`` when a level was asked for), indexed by
            ``comparison`` (with columns ``item_1`` and ``item_0`` when the comparisons'
            items are named), or for rewards by (``row``, ``action``): n·A rows.

        Examples
        --------
        >>> fit.predict_interval(data, 0.9).to_frame().shape
        (300, 3)
        >>> fit.reward(pop, level=0.9).to_frame().index.names
        FrozenList(['row', 'action'])
        """
        columns = {"estimate": self.estimate}
        if self.lower is not None:
            columns |= {"lower": self.lower, "upper": self.upper}
        if self.estimate.ndim == 1:
            frame = pd.DataFrame(self._item_columns() | columns)
            frame.index.name = "comparison"
            return frame
        n = self.estimate.shape[0]
        index = pd.MultiIndex.from_product([range(n), self._action_labels(action_names)],
                                           names=["row", "action"])
        return pd.DataFrame({k: v.ravel() for k, v in columns.items()}, index=index)

    def to_xarray(self, action_names=None) -> xr.Dataset:
        """The prediction as a labelled xarray Dataset, dimensions named as ArviZ names them.

        Parameters
        ----------
        action_names : sequence of str, optional
            Rewards only: a name for each of the A actions (the ``action`` coordinate);
            default the prediction's own ``action_names``, else the actions' indices.

        Returns
        -------
        xarray.Dataset
            ``estimate`` over ``comparison`` (probabilities; coordinates ``item_1`` and
            ``item_0`` when the items are named) or over (``row``, ``action``) (rewards),
            and, when a level was asked for, ``interval`` with a last dimension ``ci_bound``
            = (``"lower"``, ``"upper"``). The attributes hold ``quantity``, ``method``,
            ``level`` and, for rewards, ``reference``.

        Examples
        --------
        >>> ds = fit.predict_interval(data, 0.9).to_xarray()
        >>> dict(ds["interval"].sizes)
        {'comparison': 300, 'ci_bound': 2}
        >>> fit.reward(pop, level=0.9).to_xarray(["a", "b", "c", "d"])["estimate"].dims
        ('row', 'action')
        """
        if self.estimate.ndim == 1:
            dims = ("comparison",)
            coords = {"comparison": np.arange(self.estimate.shape[0])}
            coords |= {name: ("comparison", v) for name, v in self._item_columns().items()}
        else:
            dims = ("row", "action")
            coords = {"row": np.arange(self.estimate.shape[0]),
                      "action": list(self._action_labels(action_names))}
        variables = {"estimate": (dims, self.estimate)}
        if self.lower is not None:
            variables["interval"] = ((*dims, "ci_bound"), np.stack([self.lower, self.upper], axis=-1))
            coords["ci_bound"] = ["lower", "upper"]
        attrs = {"quantity": self.quantity, "method": self.method}
        attrs |= {} if self.level is None else {"level": self.level}
        attrs |= {} if self.reference is None else {"reference": self.reference}
        return xr.Dataset(variables, coords=coords, attrs=attrs)

    def __repr__(self) -> str:
        level = "" if self.level is None else f", level={self.level:g}"
        ref = "" if self.reference is None else f", reference={self.reference}"
        return (f"Prediction({self.quantity}, shape={self.estimate.shape}{level}{ref}, "
                f"method={self.method!r})")


def _is_posterior(fit) -> bool:
    """A fit with draws of Θ (a posterior) predicts by averaging over them; anything else at its Θ̂."""
    return isinstance(fit, DrawsPredictive)


def _item_names(data: PreferenceData) -> tuple[np.ndarray, np.ndarray] | None:
    """The names of each comparison's two items, where the data are item-indexed and name them."""
    if not data.indexed or data.item_names is None:
        return None
    names = np.asarray(data.item_names, dtype=str)
    return names[data.actions[:, 1]], names[data.actions[:, 0]]  # actions are (a_t0, a_t1)


def _check_sizes(fit, d_x: int, d_phi: int, what: str) -> np.ndarray:
    """Θ̂ of ``fit`` (a fit of either road), refused unless it is d_x × d_φ as ``what`` is."""
    check_instance(fit, "fit", Predictive)
    theta = np.asarray(fit.theta)
    if theta.shape != (d_x, d_phi):
        raise ValueError(f"{what} has d_x = {d_x}, d_phi = {d_phi}; the fit's Θ is "
                         f"{theta.shape[0]} × {theta.shape[1]}")
    return theta


def on_fit_items(fit, data: PreferenceData) -> PreferenceData:
    """``data`` on the item table of the data ``fit`` was made on, items matched by name
    (:meth:`~bayes_loco.PreferenceData.on_items`); as given where either has no item names."""
    fitted = getattr(fit, "data", None)
    return data.on_items(fitted) if isinstance(fitted, PreferenceData) else data


def _posterior_nu(fit, draws: int):
    """Davidson's ν of a posterior: per draw (shape (draws, 1)) from the tree's ``posterior.nu``, else
    the MAP's ``point_estimate.nu`` held for every Laplace draw, else ``fit.nu`` (None: no tie model)."""
    tree = getattr(fit, "tree", None)
    if tree is not None and "posterior" in tree.children and "nu" in tree["posterior"].data_vars:
        da = tree["posterior"]["nu"]
        nu = np.asarray(da.transpose(*[d for d in SAMPLE_DIMS if d in da.dims]).values, dtype=float).ravel()
        if nu.shape[0] != draws:
            raise ValueError(f"the posterior has {draws} draws of Θ but {nu.shape[0]} of ν")
        return nu[:, None]
    if tree is not None and "point_estimate" in tree.children and "nu" in tree["point_estimate"].data_vars:
        return float(tree["point_estimate"]["nu"])
    return getattr(fit, "nu", None)


def _draw_blocks(draws: np.ndarray, n: int, width: int):
    """Row blocks [lo, hi) of ``n`` rows: all draws × a block × ``width`` within a margin block."""
    rows = max(1, get_config()["margin_block_bytes"] // (8 * draws.shape[0] * max(1, width)))
    return ((lo, min(lo + rows, n)) for lo in range(0, n, rows))


def _posterior_probabilities(fit, data: PreferenceData, level: float | None):
    """Posterior mean (and ``level`` equal-tailed quantiles) of E[y_t] = P(y_t = 1) + ½ P(tie) over draws."""
    draws = np.asarray(fit.theta_draws, dtype=float)
    nu = _posterior_nu(fit, draws.shape[0])
    mean = np.empty(data.n)
    lower = upper = None
    if level is not None:
        lower, upper = np.empty(data.n), np.empty(data.n)
    for lo, hi in _draw_blocks(draws, data.n, data.d_phi):
        eta = np.einsum("jtb,tb->jt", np.matmul(data.contexts[lo:hi], draws), data.difference_rows(lo, hi))
        p = expected_label(eta, nu)
        mean[lo:hi] = p.mean(axis=0)
        if level is not None:
            lower[lo:hi], upper[lo:hi] = np.quantile(p, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return mean, lower, upper


def predict_proba(fit, data: PreferenceData) -> np.ndarray:
    """The probability that a_t1 is preferred, a tie counting half, for every comparison of ``data``.

    That is E[y_t] = P(y_t = 1) + ½ P(tie) (:func:`bayes_loco.model.expected_label`), which
    is P(y_t = 1) = σ(η_t) without a tie model. A frequentist fit gives it at η̂_t =
    x_tᵀ Θ̂ Δφ_t and its ν̂ (``fit.nu``; None for Bradley–Terry and ``ties="half"``); a
    posterior gives its posterior mean over the draws of Θ (and of ν, when the tree's
    ``posterior`` holds ``nu``; a MAP fit's Laplace draws use its ``point_estimate.nu``).
    The labels of ``data`` are not read.

    Returns
    -------
    ndarray, shape (N,)
    """
    check_instance(data, "data", PreferenceData)
    data = on_fit_items(fit, data)
    theta = _check_sizes(fit, data.d_x, data.d_phi, "data")
    if _is_posterior(fit):
        return _posterior_probabilities(fit, data, None)[0]
    return expected_label(margins(theta, data.contexts, data.delta), getattr(fit, "nu", None))


def _wald_widths(fit, rows_of, n: int, level: float) -> np.ndarray:
    """‖z‖_Σ of each of ``n`` rows z (from ``rows_of(lo, hi)``, shape (hi − lo, k)) under the fit's Wald set.

    inf where z leaves the identified range. The set's ``lower_bound`` is θ̂ᵀz − R‖z‖_Σ,
    so ‖z‖_Σ = (θ̂ᵀz − lower_bound)/R: one product with the set's factor per block,
    whatever form (eigenvectors or Cholesky factor) the set holds it in.
    """
    wald = fit.calibrated_set(level)
    k = wald.dim
    widths = np.empty(n)
    rows = max(1, get_config()["design_block_bytes"] // (8 * k))
    for lo in range(0, n, rows):
        hi = min(lo + rows, n)
        z = rows_of(lo, hi)
        bound = wald.lower_bound(z)
        with np.errstate(invalid="ignore"):
            widths[lo:hi] = np.where(np.isfinite(bound), (z @ wald.center - bound) / wald.radius, np.inf)
    return widths


def predict_interval(fit, data: PreferenceData, level: float = LEVEL) -> Prediction:
    """Pointwise ``level`` intervals for the probabilities of :func:`predict_proba`.

    Frequentist fits: the delta method on the identified coordinates. With z_t the
    comparison's coordinates in the fit's (``fit.coordinates``), η̂_t = x_tᵀ Θ̂ Δφ_t and
    var(η̂_t) = z_tᵀ Σ z_t, Σ the covariance of the fit's Wald set (the pseudo-inverse of
    its precision on the identified range: the Fisher information, the sandwich's inverse
    under ``ties="half"`` with ties or weights, Davidson's with ν profiled out), the
    interval η̂_t ± z_{(1+level)/2} sd(η̂_t) is mapped through the (increasing) link
    η ↦ E[y | η, ν̂]; ν̂ is plugged in. A comparison outside the identified range gets
    (0, 1): the data say nothing about it. The design is formed a block
    of rows at a time (``config["design_block_bytes"]``).

    Posteriors: equal-tailed posterior quantiles of the per-draw probability.

    Returns
    -------
    Prediction
        ``estimate`` is :func:`predict_proba`; ``lower``, ``upper`` shape (N,).
    """
    check_instance(data, "data", PreferenceData)
    level = check_level(level)
    data = on_fit_items(fit, data)
    theta = _check_sizes(fit, data.d_x, data.d_phi, "data")
    if _is_posterior(fit):
        mean, lower, upper = _posterior_probabilities(fit, data, level)
        return Prediction(mean, lower, upper, level, "probability", "posterior quantiles",
                          item_names=_item_names(data))
    nu = getattr(fit, "nu", None)
    eta = margins(theta, data.contexts, data.delta)
    coordinates = fit.coordinates
    sd = _wald_widths(fit, lambda lo, hi: coordinates.transform(data.contexts[lo:hi],
                                                                data.difference_rows(lo, hi)), data.n, level)
    half = stats.norm.ppf(0.5 + level / 2) * sd
    known = np.isfinite(half)
    # E[y | η] runs from 0 to 1 as η does (Davidson's too): the limits where η is not identified
    lower = np.where(known, expected_label(eta - np.where(known, half, 0.0), nu), 0.0)
    upper = np.where(known, expected_label(eta + np.where(known, half, 0.0), nu), 1.0)
    return Prediction(expected_label(eta, nu), lower, upper, level, "probability", "wald delta method",
                      item_names=_item_names(data))


def _reward_inputs(contexts, features, reference) -> tuple[np.ndarray, np.ndarray, int]:
    if isinstance(contexts, Population):
        if features is not None:
            raise ValueError("features must be left out when contexts is a Population (it holds them)")
        contexts, features = contexts.contexts, contexts.features
    contexts = as_float_array(contexts, "contexts", 2)
    if features is None:
        raise TypeError("features (n, A, d_phi) are required: φ(s_i, a) of each row's candidate actions")
    features = as_float_array(features, "features", 3)
    if features.shape[0] != contexts.shape[0]:
        raise ValueError(f"contexts has {contexts.shape[0]} rows, features has {features.shape[0]}")
    reference = check_int(reference, "reference", 0, features.shape[1] - 1)
    return contexts, features - features[:, reference: reference + 1], reference


def reward(fit, contexts, features=None, level: float | None = None, *, reference: int = 0,
           action_names=None) -> Prediction:
    """Rewards of candidate actions relative to a reference action: r(x_i, s_i, a) − r(x_i, s_i, a_ref).

    r(x, s, a) = xᵀ Θ φ(s, a) is the paper's reward; only differences of rewards are
    identified (the likelihood sees Θ through Δφ), so each is stated against a_ref,
    whose own column is 0.

    Parameters
    ----------
    fit : a fit of either road
    contexts : ndarray, shape (n, d_x), or Population
        x_i; a :class:`~bayes_loco.Population` brings its contexts and features (leave
        ``features`` out then).
    features : ndarray, shape (n, A, d_φ)
        φ(s_i, a) of the A candidate actions of row i.
    level : float, optional
        Pointwise level of the intervals (per row and action): the Wald delta method on
        the fit's identified coordinates (z of x_i (φ(s_i, a) − φ(s_i, a_ref))ᵀ) for a
        frequentist fit, equal-tailed posterior quantiles for a posterior. None: estimates only.
    reference : int
        The index a_ref among the candidates (default the first).
    action_names : sequence of str, optional
        A name for each of the A candidate actions, carried into ``to_frame`` and ``to_xarray``.

    Returns
    -------
    Prediction
        ``estimate`` (and ``lower``, ``upper``) of shape (n, A): the fit's point estimate
        (Θ̂; the posterior mean of the reward for a posterior, which is the reward at Θ̄).
    """
    contexts, relative, reference = _reward_inputs(contexts, features, reference)
    theta = _check_sizes(fit, contexts.shape[1], relative.shape[2], "contexts/features")
    if level is not None:
        level = check_level(level)
    n, a, d_phi = relative.shape
    names = None if action_names is None else as_names(action_names, "action_names", a)
    if _is_posterior(fit):
        draws = np.asarray(fit.theta_draws, dtype=float)
        estimate = np.empty((n, a))
        lower = upper = None
        if level is not None:
            lower, upper = np.empty((n, a)), np.empty((n, a))
        for lo, hi in _draw_blocks(draws, n, a * d_phi):
            r = np.einsum("jib,iab->jia", np.matmul(contexts[lo:hi], draws), relative[lo:hi])
            estimate[lo:hi] = r.mean(axis=0)
            if level is not None:
                lower[lo:hi], upper[lo:hi] = np.quantile(r, [(1 - level) / 2, (1 + level) / 2], axis=0)
        method = "posterior mean" if level is None else "posterior quantiles"
        return Prediction(estimate, lower, upper, level, "reward", method, reference, names)
    estimate = np.einsum("ib,iab->ia", contexts @ theta, relative)
    if level is None:
        return Prediction(estimate, None, None, None, "reward", "plug-in", reference, names)
    coordinates = fit.coordinates

    def rows_of(lo, hi):
        # rows (i, a) of the flattened candidates; each block spans whole rows i where it can
        first, last = lo // a, -(-hi // a)
        z = coordinates.transform(contexts[first:last], relative[first:last]).reshape(-1, coordinates.dim)
        return z[lo - first * a: hi - first * a]

    sd = _wald_widths(fit, rows_of, n * a, level).reshape(n, a)
    half = stats.norm.ppf(0.5 + level / 2) * sd
    return Prediction(estimate, estimate - half, estimate + half, level, "reward", "wald delta method",
                      reference, names)


class Predictive:
    """The prediction methods every fit has; each calls this module's function of the same name.

    A fit predicts at its point estimate ``theta``; a :class:`DrawsPredictive` averages over
    its ``theta_draws``.
    """

    def predict_proba(self, data: PreferenceData) -> np.ndarray:
        """P(a_t1 preferred), a tie counting half (:func:`bayes_loco.predict.predict_proba`).

        σ(x_tᵀ Θ̂ Δφ_t) at a frequentist fit's estimate; a posterior's mean over its draws of Θ.

        Parameters
        ----------
        data : PreferenceData
            The comparisons to predict (d_x and d_φ of the fit's); their labels are not read.

        Returns
        -------
        ndarray, shape (N,)

        Examples
        --------
        >>> p = fit.predict_proba(data)
        >>> p.shape, bool(((p > 0) & (p < 1)).all())
        ((300,), True)
        """
        return predict_proba(self, data)

    def predict_interval(self, data: PreferenceData, level: float = LEVEL) -> Prediction:
        """Pointwise ``level`` intervals of them (:func:`bayes_loco.predict.predict_interval`).

        The Wald delta method on the identified coordinates for a frequentist fit,
        equal-tailed posterior quantiles for a posterior.

        Parameters
        ----------
        data : PreferenceData
            The comparisons to predict; their labels are not read.
        level : float
            Pointwise level in (0, 1).

        Returns
        -------
        Prediction
            ``estimate`` (:meth:`predict_proba`), ``lower`` and ``upper``, each of shape (N,).

        Examples
        --------
        >>> interval = fit.predict_interval(data, 0.9)
        >>> interval
        Prediction(probability, shape=(300,), level=0.9, method='wald delta method')
        >>> bool((interval.lower <= interval.estimate).all() and (interval.estimate <= interval.upper).all())
        True
        """
        return predict_interval(self, data, level)

    def reward(self, contexts, features=None, level: float | None = None, *,
               reference: int = 0, action_names=None) -> Prediction:
        """Rewards relative to the reference action, with intervals (:func:`bayes_loco.predict.reward`).

        r(x_i, s_i, a) − r(x_i, s_i, a_ref) with r(x, s, a) = xᵀ Θ φ(s, a).

        Parameters
        ----------
        contexts : Population or ndarray, shape (n, d_x)
            A population (it brings its features), or the contexts x_i.
        features : ndarray, shape (n, A, d_φ), optional
            φ(s_i, a) of each row's candidate actions; left out with a Population.
        level : float, optional
            Pointwise level of the intervals; None: estimates only.
        reference : int
            The index of a_ref among the candidates (its column is 0).
        action_names : sequence of str, optional
            A name for each candidate action, carried into ``to_frame`` and ``to_xarray``.

        Returns
        -------
        Prediction
            ``estimate`` (and ``lower``, ``upper``) of shape (n, A).

        Examples
        --------
        >>> fit.reward(pop, level=0.9)
        Prediction(reward, shape=(50, 4), level=0.9, reference=0, method='wald delta method')
        >>> bool((fit.reward(pop).estimate[:, 0] == 0).all())       # a_ref's own column
        True
        """
        return reward(self, contexts, features, level, reference=reference, action_names=action_names)


class DrawsPredictive(Predictive):
    """A fit that predicts by averaging over its draws of Θ (``theta_draws``, shape (draws, d_x, d_φ)):
    posterior means and equal-tailed posterior quantiles (:class:`bayes_loco.bayes.Posterior`)."""
