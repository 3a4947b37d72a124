"""Plain Bradley–Terry: one reward vector for everyone, the leaderboard model the contextual one extends.

It is the contextual model with a single context x ≡ 1 (d_x = 1): Θ is one row θ (d_φ),
and P(a₁ ≻ a₂) = σ(θᵀ(φ(a₁) − φ(a₂))) whoever the user is. With one-hot features θ holds
the items' strengths, identified up to a common shift. It is the baseline against which
personalisation is judged on held-out users (notebook 06, and ``bayes-loco heldout``:
:mod:`bayes_loco.experiments.heldout`).

On item-indexed data (:meth:`~bayes_loco.PreferenceData.from_items`, ``from_frame`` with
``item_columns``, the readers) identical comparisons are first aggregated to counts
(:meth:`~bayes_loco.PreferenceData.aggregate`): a million Arena battles among 150 models are
a few tens of thousands of (pair, outcome) rows, and the fit and both covariances are those of
the battles themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse, stats

from .._checks import checks_data
from .._validation import LEVEL, check_level
from ..config import get_config
from ..data import PreferenceData
from ..model import Ties
from ..population import Population
from ..predict import Prediction
from ..results import Summary
from .mle import MLEResult, fit_mle


def one_context(data: PreferenceData) -> PreferenceData:
    """The same comparisons read with one context (x ≡ 1): plain Bradley–Terry's view of ``data``.

    Labels, ties, weights, counts, item indices and names are kept; the users' contexts are dropped.
    """
    ones = np.ones((data.n, 1))
    keep = {"weights": data.weights, "counts": data.counts, "feature_names": data.feature_names,
            "context_names": ("intercept",), "winner_first": data.winner_first}
    if data.indexed:
        return PreferenceData(ones, None, data.labels, data.actions, item_features=data.item_features,
                              comparison_features=data.comparison_features, item_names=data.item_names,
                              **keep)
    return PreferenceData(ones, data.differences, data.labels, data.actions, False, **keep)


def _compact(data: PreferenceData) -> PreferenceData:
    """``data`` aggregated to counts where that shrinks item-indexed rows to ``config["aggregate_share"]`` of
    N
    or less."""
    if not data.indexed or data.comparison_features is not None:
        return data
    compact = data.aggregate()
    return compact if compact.n <= get_config()["aggregate_share"] * data.n else data


@dataclass(frozen=True, eq=False)
class BradleyTerryFit:
    """A plain Bradley–Terry fit: the MLE of Θ on :func:`one_context` data.

    It predicts any comparisons, whatever their contexts, by reading them with x ≡ 1, so it
    plugs into :func:`~bayes_loco.cross_validate`, :func:`~bayes_loco.score`,
    :func:`~bayes_loco.best_actions` and :func:`~bayes_loco.pessimistic_policy` like the
    contextual fits (a population is read with x ≡ 1 too).

    Attributes
    ----------
    mle : MLEResult
        The fit on the one-context data (Θ̂ of shape 1 × d_φ, its Wald set and diagnostics);
        on item-indexed data, the data aggregated to counts.
    """

    mle: MLEResult

    def __post_init__(self):
        if not isinstance(self.mle, MLEResult) or self.mle.theta.shape[0] != 1:
            raise TypeError("mle must be an MLEResult of one context (from fit_bradley_terry)")

    @property
    def utilities(self) -> np.ndarray:
        """θ̂ (d_φ): every user's reward is θ̂ᵀφ(a). With one-hot features, the items' strengths."""
        return self.mle.theta[0]

    # The Fit protocol, through the MLE: the sets live in vec(Θ) coordinates of one context.
    @property
    def theta(self) -> np.ndarray:
        return self.mle.theta

    @property
    def coordinates(self):
        return self.mle.coordinates

    @property
    def estimate(self) -> np.ndarray:
        return self.mle.estimate

    @property
    def diagnostics(self):
        return self.mle.diagnostics

    @property
    def nll(self) -> float:
        """The loss at θ̂: Σ_t f_t w_t ℓ_t (a negative log-likelihood, or quasi- with half ties)."""
        return self.mle.nll

    @property
    def loglik(self) -> float:
        return self.mle.loglik

    @property
    def data(self) -> PreferenceData:
        return self.mle.data

    def penalty_set(self, c2: float = 5.0):
        """The MLE's tuned penalty set, ‖θ − θ̂‖_W ≤ C₂·sqrt(d_φ/N) (:meth:`MLEResult.penalty_set`).

        Parameters
        ----------
        c2 : float
            C₂ ≥ 0, the paper's 5 by default.

        Returns
        -------
        EllipsoidSet
            ``kind="gram"`` in vec(Θ) coordinates of one context (k = d_φ), no level.

        Examples
        --------
        >>> bl.fit_bradley_terry(data).penalty_set(c2=5.0)
        EllipsoidSet(kind='gram', k=7, k_eff=3, radius=0.7638)
        """
        return self.mle.penalty_set(c2)

    def calibrated_set(self, level: float = LEVEL, kind: str | None = None, *, cov_type: str | None = None):
        """The MLE's Wald set (:meth:`MLEResult.calibrated_set`): radius² = χ²_k_eff(level).

        Parameters
        ----------
        level : float
            Level in (0, 1).
        kind : {"wald"} or None
            The only kind (None means it).
        cov_type : {"model", "sandwich"}, optional
            Overrides the fit's covariance for this set.

        Returns
        -------
        EllipsoidSet
            ``kind="wald"``, ``.level`` is ``level``.

        Examples
        --------
        >>> bl.fit_bradley_terry(data).calibrated_set(0.9)
        EllipsoidSet(kind='wald', k=7, k_eff=3, radius=2.5, level=0.9)
        """
        return self.mle.calibrated_set(level, kind, cov_type=cov_type)

    def population(self, population: Population) -> Population:
        """``population`` read with x ≡ 1, as this fit reads every user.

        Parameters
        ----------
        population : Population
            Any population; its contexts are replaced, its features and states kept.

        Returns
        -------
        Population
            The same rows with contexts of shape (n, 1), all ones.

        Examples
        --------
        >>> pop.contexts.shape, bl.fit_bradley_terry(data).population(pop).contexts.shape
        ((50, 3), (50, 1))
        """
        if not isinstance(population, Population):
            raise TypeError(f"population must be a Population, got {type(population).__name__}")
        return Population(np.ones((population.n, 1)), population.features, population.states)

    def predict_proba(self, data: PreferenceData) -> np.ndarray:
        """P(a_t1 preferred) for each comparison of ``data``, its contexts ignored.

        σ(θ̂ᵀΔφ_t), a tie counting half under Davidson's model
        (:func:`bayes_loco.predict.predict_proba` on :func:`one_context` data).

        Parameters
        ----------
        data : PreferenceData
            The comparisons to predict; their labels are not read.

        Returns
        -------
        ndarray, shape (N,)

        Examples
        --------
        >>> p = bl.fit_bradley_terry(data).predict_proba(data)
        >>> p.shape, bool(((p > 0) & (p < 1)).all())
        ((300,), True)
        """
        return self.mle.predict_proba(one_context(data))

    def predict_interval(self, data: PreferenceData, level: float = LEVEL) -> Prediction:
        """Pointwise Wald ``level`` intervals of :meth:`predict_proba`.

        The delta method on the identified coordinates (:func:`bayes_loco.predict.predict_interval`),
        the contexts of ``data`` ignored.

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
        >>> bl.fit_bradley_terry(data).predict_interval(data, 0.9)
        Prediction(probability, shape=(300,), level=0.9, method='wald delta method')
        """
        return self.mle.predict_interval(one_context(data), level)

    def reward(self, contexts, features=None, level: float | None = None, *,
               reference: int = 0, action_names=None) -> Prediction:
        """Rewards θ̂ᵀ(φ(a) − φ(a_ref)) of candidate actions with Wald intervals
        (:func:`bayes_loco.predict.reward`), every row read with x ≡ 1.

        Parameters
        ----------
        contexts : Population or ndarray, shape (n, d_x)
            A population (it brings its features), or contexts whose values are ignored.
        features : ndarray, shape (n, A, d_φ), optional
            φ(s_i, a) of each row's candidate actions; left out with a Population.
        level : float, optional
            Pointwise level of the Wald intervals; None: estimates only.
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
        >>> bl.fit_bradley_terry(data).reward(pop, level=0.9)
        Prediction(reward, shape=(50, 4), level=0.9, reference=0, method='wald delta method')
        """
        if isinstance(contexts, Population):
            return self.mle.reward(self.population(contexts), level=level, reference=reference,
                                   action_names=action_names)
        n = np.shape(contexts)[0] if np.ndim(contexts) else 0
        return self.mle.reward(np.ones((n, 1)), features, level, reference=reference,
                               action_names=action_names)

    def summary(self, level: float = LEVEL) -> Summary:
        """The MLE's summary: θ̂ with its Wald intervals (:meth:`MLEResult.summary`).

        Parameters
        ----------
        level : float
            Level of the Wald intervals, in (0, 1).

        Returns
        -------
        Summary
            ``.to_frame()`` gives the table: the identified entries of θ̂, or the differences
            ``"[0,j] − [0,0]"`` where only those are identified.

        Examples
        --------
        >>> table = bl.fit_bradley_terry(data).summary(0.9).to_frame()
        >>> list(table.columns), len(table)
        (['estimate', 'std_err', 'lower', 'upper'], 3)
        """
        return self.mle.summary(level)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def leaderboard(self, level: float = LEVEL, *, cov_type: str | None = None) -> pd.DataFrame:
        """The items ranked by rating, with ``level`` Wald intervals and rank intervals.

        An item's rating is r_a = φ(a)ᵀθ̂ centred to mean 0 over the items (only
        differences are identified with one-hot features; the centred ratings are
        estimable contrasts), in log-odds: P(a ≻ b) = σ(r_a − r_b). Its interval is
        r_a ± z σ_a, σ_a² = cᵀ Σ c for the centring contrast c and Σ the Wald set's
        covariance (``cov_type``, else the fit's). Rank intervals follow LMArena:
        ``rank_upper`` (best possible rank) is 1 + the number of items whose lower end is
        above this item's upper end; ``rank_lower`` is A − the number of items whose upper
        end is below this item's lower end. Pointwise, not simultaneous.

        Parameters
        ----------
        level : float
        cov_type : {"model", "sandwich"}, optional

        Returns
        -------
        pandas.DataFrame
            Indexed by ``item`` (the data's item names), best first: ``rating``,
            ``std_err``, ``lower``, ``upper``, ``rank``, ``rank_upper``, ``rank_lower``,
            ``comparisons`` (how many comparisons the item is in).

        Raises
        ------
        ValueError
            On data that are not item-indexed (no item table to rate).

        Examples
        --------
        >>> import bayes_loco as bl
        >>> data = bl.PreferenceData.from_items([1, 0, 1, 0, 1, 1], item_1=[0, 0, 1, 1, 2, 2],
        ...                                     item_0=[1, 1, 2, 2, 0, 0], item_names=["a", "b", "c"])
        >>> board = bl.fit_bradley_terry(data).leaderboard(0.9)
        >>> list(board.columns)
        ['rating', 'std_err', 'lower', 'upper', 'rank', 'rank_upper', 'rank_lower', 'comparisons']
        """
        level = check_level(level)
        data = self.mle.data
        if not data.indexed:
            raise ValueError("leaderboard rates items: fit data read with items (PreferenceData.from_items, "
                             "from_frame(item_columns=...), read_arena); with dense differences use "
                             "summary()")
        phi = data.item_features
        phi = phi.toarray() if sparse.issparse(phi) else np.asarray(phi)
        n_items, d_item = phi.shape
        centred = phi - phi.mean(axis=0)  # r_a − mean r = (φ_a − φ̄)ᵀθ: a contrast of θ
        contrast = np.zeros((n_items, self.mle.coordinates.dim))
        contrast[:, :d_item] = centred
        wald = self.calibrated_set(level, cov_type=cov_type)
        rating = contrast @ self.estimate
        se = np.where(wald.identified(contrast), wald.dual_norm(contrast), np.inf)
        half = stats.norm.ppf(0.5 + level / 2) * se
        lower, upper = rating - half, rating + half
        rank_upper = 1 + (lower[None, :] > upper[:, None]).sum(axis=1)
        rank_lower = n_items - (upper[None, :] < lower[:, None]).sum(axis=1)
        weight = data.loss_weights if data.counts is not None else np.ones(data.n)
        compared = (np.bincount(data.actions[:, 0], weight, n_items) + np.bincount(data.actions[:, 1], weight,
                                                                                    n_items))
        names = data.item_names or tuple(f"item{a}" for a in range(n_items))
        board = pd.DataFrame({"rating": rating, "std_err": se, "lower": lower, "upper": upper,
                              "rank_upper": rank_upper, "rank_lower": rank_lower, "comparisons": compared},
                             index=pd.Index(names, name="item"))
        board = board.sort_values("rating", ascending=False, kind="stable")
        board.insert(4, "rank", np.arange(1, n_items + 1))
        return board


@checks_data
def fit_bradley_terry(data: PreferenceData, *, ridge: float = 0.0, ties: Ties = "half",
                      cov_type: str | None = None) -> BradleyTerryFit:
    """Fit plain Bradley–Terry (x ≡ 1) to ``data`` by maximum likelihood.

    Parameters
    ----------
    data : PreferenceData
        Comparisons; their contexts are ignored. Item-indexed data are aggregated to
        counts first where that pays (the same fit, fewer rows).
    ridge : float, default 0
        λ of the penalty (λ/2)‖θ‖²; needed where an item wins or loses every comparison it is in
        (the MLE does not exist then), as in :func:`~bayes_loco.fit_mle`.
    ties : {"half", "davidson"}, default "half"
        How tied labels (½) enter, as in :func:`~bayes_loco.fit_mle`.
    cov_type : {"model", "sandwich"} or None
        The covariance of intervals, as in :func:`~bayes_loco.fit_mle` (default: sandwich with
        half ties or sampling weights, model otherwise).

    Returns
    -------
    BradleyTerryFit

    Examples
    --------
    >>> import pandas as pd, bayes_loco as bl
    >>> games = pd.DataFrame({"winner": ["A", "A", "B", "C", "A", "B"],
    ...                       "loser": ["B", "C", "C", "A", "B", "A"]})
    >>> data = bl.PreferenceData.from_frame(games, item_columns=("winner", "loser"), label_column=None)
    >>> board = bl.fit_bradley_terry(data).leaderboard()
    >>> list(board.index)
    ['A', 'B', 'C']
    """
    return BradleyTerryFit(fit_mle(_compact(one_context(data)), ridge=ridge, ties=ties, cov_type=cov_type))
