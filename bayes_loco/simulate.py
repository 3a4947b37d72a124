"""The paper's simulation (LoCo-RLHF §5.1) and its evaluation populations.

x, s ~ Unif[−1, 1]; φ(s, a) = (one-hot(a) for a ≥ 1 and zeros for a = 0, 0.1·M s)
with M's entries Unif[−1, 1] and ‖M‖_F = 1, so d_φ = d_a − 1 + d_s. Θ's action
columns are 2·v_k, v_k = w_k/‖w_k‖ with w_k = (1/k, …, 1/(k+r−1), 0, …), and its
state columns are zero. Every comparison is (0, a₁): a fraction 1/q has a₁
uniform over the non-zero actions, the rest a₁ = 1 (imbalance q).

Distribution shift (docs/design.md, "Distribution shift"): ``covered_action``
moves the (1 − 1/q) share from a₁ = 1 to another action, and the deployment law
``context_law="target"`` centres the contexts outside the training support,
where the §5.1 Θ*'s actions are worth a ladder (a = 1 best, then 2, …), so that
covering action 1 covers the deployment-optimal policy and covering action 2
covers only its runner-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import expit

from ._validation import check_int, check_option, check_real, rng_from
from .config import get_config
from .data import PreferenceData
from .model import margins, rewards
from .population import Population

__all__ = ["CONTEXT_LAWS", "TARGET_SHIFT", "THETA_KINDS", "PaperProblem", "decaying_columns",
           "effective_rank", "paper_problem", "paper_theta", "random_theta"]

#: The kinds of Θ* a problem may have: §5.1's (``"paper"``), the rank appendix's diagonal one, and one
#: drawn afresh from each seed (``"random"``, :func:`random_theta`).
THETA_KINDS = ("paper", "diagonal", "random")
#: The laws of the contexts x of an evaluation population (:meth:`PaperProblem.population`).
CONTEXT_LAWS = ("uniform", "shifted", "target")
#: The ``"target"`` context law's centre is (TARGET_SHIFT, −TARGET_SHIFT, 0, …).
TARGET_SHIFT = 1.0


def paper_theta(d_x: int, d_a: int, d_s: int, rank: int, kind: str = "paper") -> np.ndarray:
    """The true Θ* (d_x × d_φ) of §5.1 (``kind="paper"``) or of the rank appendix.

    ``kind="diagonal"`` is the rank-selection appendix's Θ: Θ_ii = 2 for i ≤ r on
    the action columns. The §5.1 Θ has nearly parallel columns (singular values
    5.96, 0.65, 0.038 for r = 3), so its effective rank is below its nominal rank
    (docs/design.md, convention 8). ``kind="random"`` draws a fresh Θ* from a seed:
    :func:`random_theta` (``paper_problem(theta_kind="random", seed=...)``).

    Parameters
    ----------
    d_x, d_a, d_s : int
        Context dimension, number of actions and state dimension; d_φ = d_a − 1 + d_s.
    rank : int
        Nominal rank r.
    kind : {"paper", "diagonal"}
        ``"random"`` is refused here: it needs a seed (:func:`random_theta`).

    Returns
    -------
    ndarray of shape (d_x, d_φ)
        Θ*, with zero state columns (the state features cancel in every comparison).

    Examples
    --------
    >>> theta = bl.simulate.paper_theta(d_x=20, d_a=10, d_s=20, rank=3)
    >>> theta.shape
    (20, 29)
    >>> np.round(np.linalg.svd(theta, compute_uv=False)[:4], 3)
    array([5.965, 0.648, 0.038, 0.   ])
    """
    check_option(kind, "kind", THETA_KINDS)
    if kind == "random":
        raise ValueError("kind='random' draws Θ* from a seed: use random_theta, or "
                         "paper_problem(theta_kind='random', seed=...)")
    d_x = check_int(d_x, "d_x", 1)
    d_a = check_int(d_a, "d_a", 2)
    d_s = check_int(d_s, "d_s", 1)
    rank = check_int(rank, "rank", 1, d_x)
    theta = np.zeros((d_x, d_a - 1 + d_s))
    if kind == "paper":
        theta[:, : d_a - 1] = decaying_columns(d_x, d_a - 1, rank)
    else:
        if rank > d_a - 1:
            raise ValueError(f"rank must be <= d_a - 1 = {d_a - 1} for kind='diagonal', got {rank}")
        theta[np.arange(rank), np.arange(rank)] = 2.0
    return theta


def random_theta(d_x: int, d_a: int, d_s: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh Θ* (d_x × d_φ) of exact rank r on the action columns, zero state columns.

    Θ*'s action block is U diag(σ) Vᵀ with U (d_x × r) and V ((d_a − 1) × r) uniform on their
    Stiefel manifolds and σ_j ∝ 1/j, scaled to the §5.1 Θ*'s Frobenius norm 2√(d_a − 1): a
    truth whose singular values are all well away from 0, unlike the §5.1 Θ*'s third (0.038).

    Parameters
    ----------
    d_x, d_a, d_s : int
        As in :func:`paper_theta`.
    rank : int
        r ≤ min(d_x, d_a − 1).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (d_x, d_a − 1 + d_s)

    Examples
    --------
    >>> theta = bl.simulate.random_theta(d_x=3, d_a=4, d_s=2, rank=2, rng=np.random.default_rng(0))
    >>> theta.shape, np.round(np.linalg.svd(theta, compute_uv=False), 3)
    ((3, 5), array([3.098, 1.549, 0.   ]))
    >>> round(float(np.linalg.norm(theta)), 3)   # 2 √(d_a − 1)
    3.464
    """
    if rank > min(d_x, d_a - 1):
        raise ValueError(f"rank must be <= min(d_x, d_a - 1) = {min(d_x, d_a - 1)} for theta_kind='random', "
                         f"got {rank}")
    u = np.linalg.qr(rng.standard_normal((d_x, rank)))[0]
    v = np.linalg.qr(rng.standard_normal((d_a - 1, rank)))[0]
    sigma = 1.0 / np.arange(1, rank + 1)
    sigma *= 2.0 * np.sqrt(d_a - 1) / np.linalg.norm(sigma)
    theta = np.zeros((d_x, d_a - 1 + d_s))
    theta[:, : d_a - 1] = (u * sigma) @ v.T
    return theta


def decaying_columns(d_x: int, n_columns: int, rank: int) -> np.ndarray:
    """Columns 2·w_k/‖w_k‖ with w_k = (1/k, …, 1/(k+r−1), 0, …), k = 1 … n_columns (rank ≤ r).

    The §5.1 Θ*'s action columns: nearly parallel, so the rank is nominal.

    Parameters
    ----------
    d_x : int
        Rows.
    n_columns : int
    rank : int
        r: the non-zero rows.

    Returns
    -------
    ndarray of shape (d_x, n_columns)

    Examples
    --------
    >>> np.round(bl.simulate.decaying_columns(3, 2, 2), 3)
    array([[1.789, 1.664],
           [0.894, 1.109],
           [0.   , 0.   ]])
    """
    k = np.arange(1, n_columns + 1)
    w = np.zeros((d_x, n_columns))
    w[:rank] = 1.0 / (k[None, :] + np.arange(rank)[:, None])
    return 2.0 * w / np.linalg.norm(w, axis=0)


def effective_rank(theta: np.ndarray, rtol: float = 0.01) -> int:
    """Number of singular values of Θ at least ``rtol`` times the largest.

    Parameters
    ----------
    theta : ndarray of shape (d_x, d_φ)
    rtol : float

    Returns
    -------
    int

    Examples
    --------
    >>> bl.simulate.effective_rank(bl.simulate.paper_theta(20, 10, 20, rank=3))   # σ₃/σ₁ < 1%
    2
    """
    sv = np.linalg.svd(theta, compute_uv=False)
    return int((sv >= rtol * sv[0]).sum()) if sv[0] > 0 else 0


@dataclass(frozen=True, eq=False)
class PaperProblem:
    """A fixed instance of the §5.1 simulation: the truth Θ*, M and the data law.

    Build with :func:`paper_problem`. ``d_phi = d_a − 1 + d_s + noise_dims``. It is a
    :class:`~bayes_loco.problems.Problem` whose populations can hold several contexts per
    state (``has_global_populations``).

    Examples
    --------
    >>> problem                                  # the reference's small problem
    PaperProblem(d_x=3, d_a=4, d_s=4, d_phi=7, rank=2 (effective 2; σ = 3.45, 0.26), imbalance=3, ...)
    >>> problem.sample(100, seed=1)
    PreferenceData(N=100, d_x=3, d_phi=7, mean(y)=0.510)
    """

    has_global_populations: ClassVar[bool] = True

    d_s: int
    d_a: int
    d_x: int
    rank: int
    imbalance: float
    theta_kind: str
    noise_dims: int
    theta: np.ndarray
    state_map: np.ndarray
    covered_action: int = 1

    @property
    def d_phi(self) -> int:
        return self.theta.shape[1]

    @property
    def singular_values(self) -> np.ndarray:
        return np.linalg.svd(self.theta, compute_uv=False)[: self.rank]

    def __repr__(self) -> str:
        sv = ", ".join(f"{v:.3g}" for v in self.singular_values)
        return (f"PaperProblem(d_x={self.d_x}, d_a={self.d_a}, d_s={self.d_s}, d_phi={self.d_phi}, "
                f"rank={self.rank} (effective {effective_rank(self.theta)}; σ = {sv}), "
                f"imbalance={self.imbalance:g}, covered_action={self.covered_action}, "
                f"theta_kind={self.theta_kind!r})")

    def features(self, states: np.ndarray, actions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """φ(s, a): the one-hot of a ≥ 1, then 0.1·M s, then the noise dimensions drawn from ``rng``.

        Parameters
        ----------
        states : ndarray of shape (..., d_s)
        actions : ndarray of int, shape (...)
        rng : numpy.random.Generator
            Draws the pure-noise dimensions, if any.

        Returns
        -------
        ndarray of shape (..., d_φ)

        Examples
        --------
        >>> phi = problem.features(np.zeros((2, 4)), np.array([0, 2]), np.random.default_rng(0))
        >>> phi[:, :3]                            # the one-hots of actions 0 (none) and 2
        array([[0., 0., 0.],
               [0., 1., 0.]])
        """
        out = np.zeros((*actions.shape, self.d_phi))
        nz = actions > 0
        out[nz, actions[nz] - 1] = 1.0
        out[..., self.d_a - 1: self.d_a - 1 + self.d_s] = 0.1 * states @ self.state_map.T
        self._noise(out, rng, np.add)
        return out

    def _noise(self, out: np.ndarray, rng: np.random.Generator, combine) -> None:
        """``combine`` (np.add or np.subtract) Unif[−1, 1] draws into the noise dims of ``out``, in place.

        A block of leading rows at a time, in the order one call for all rows would draw
        them: memory of one block, where drawing all at once holds another array of out's size
        (3.3 GB at N = 100,000 comparisons with 4,067 noise dims).
        """
        if not self.noise_dims:
            return
        rows = max(1, get_config()["noise_block"] // (out[:1].size or 1))
        for lo in range(0, out.shape[0], rows):
            block = out[lo: lo + rows, ..., self.d_phi - self.noise_dims:]
            combine(block, rng.uniform(-1.0, 1.0, size=block.shape), out=block)

    def sample(self, n: int, seed) -> PreferenceData:
        """N comparisons with Bradley–Terry labels from Θ*.

        Each pair is (0, ``covered_action``), or with probability 1/q (0, a₁) for a
        uniform a₁; contexts and states are uniform on [−1, 1].

        Parameters
        ----------
        n : int
            N.
        seed : int, SeedSequence or Generator

        Returns
        -------
        PreferenceData

        Examples
        --------
        >>> problem.sample(100, seed=1)
        PreferenceData(N=100, d_x=3, d_phi=7, mean(y)=0.510)
        """
        n = check_int(n, "n", 1)
        rng = rng_from(seed)
        x = rng.uniform(-1.0, 1.0, size=(n, self.d_x))
        s = rng.uniform(-1.0, 1.0, size=(n, self.d_s))
        a1 = np.full(n, self.covered_action, dtype=np.int64)
        spread = rng.random(n) < 1.0 / self.imbalance
        a1[spread] = rng.integers(1, self.d_a, size=int(spread.sum()))
        a0 = np.zeros(n, dtype=np.int64)
        differences = self.features(s, a1, rng)
        # φ(s, a₀ = 0) has no one-hot entry, the same state part (which cancels exactly) and
        # its own noise, drawn after a₁'s: Δφ without a second N × d_φ array.
        differences[:, self.d_a - 1: self.d_a - 1 + self.d_s] = 0.0
        self._noise(differences, rng, np.subtract)
        eta = margins(self.theta, x, differences)
        y = (rng.random(n) < expit(eta)).astype(np.int8)
        return PreferenceData.from_arrays(x, y, differences=differences, actions=np.stack([a0, a1], axis=1),
                                          copy=False)

    def population(self, n_states: int, seed, *, contexts_per_state: int = 1,
                   context_law: str = "uniform") -> Population:
        """An evaluation population ρ with every action as a candidate.

        Parameters
        ----------
        n_states : int
            Number of states s.
        contexts_per_state : int
            Contexts x drawn for each state; 1 gives the paper's i.i.d. (x, s) pairs.
            A global policy π(s) needs several (docs/design.md, pessimism point 6).
        context_law : {"uniform", "shifted", "target"}
            x ~ Unif[−1, 1]^d_x (the paper's ρ), Unif[0, 1]^d_x, or
            ``"target"``: x ~ μ + Unif[−½, ½]^d_x with μ = (1, −1, 0, …, 0),
            partly outside the training support [−1, 1]^d_x, along the two
            context directions the §5.1 Θ* reads most. Under the paper's law
            E_x|s r(x, s, a) = 0 for every action, so a global policy is only
            meaningful under the other two. Under ``"shifted"`` the actions are
            worth nearly the same (1.56–1.72); under ``"target"`` they form a
            ladder (0.86 for a = 1, 0.51, 0.36, …, 0.12 for a = 9).

        Returns
        -------
        Population
            n_states × contexts_per_state rows, each with every action's features.

        Examples
        --------
        >>> problem.population(10, seed=2)
        Population(n=10, states=10, actions=4, d_x=3, d_phi=7)
        >>> shifted = problem.population(5, seed=2, contexts_per_state=4, context_law="target")
        >>> shifted.n, shifted.n_states          # for global policies: 4 contexts per state
        (20, 5)
        """
        n_states = check_int(n_states, "n_states", 1)
        m = check_int(contexts_per_state, "contexts_per_state", 1)
        check_option(context_law, "context_law", CONTEXT_LAWS)
        rng = rng_from(seed)
        if context_law == "target":
            if self.d_x < 2:
                raise ValueError(f"context_law='target' needs d_x >= 2, the problem has d_x = {self.d_x}")
            centre = np.zeros(self.d_x)
            centre[:2] = TARGET_SHIFT, -TARGET_SHIFT
            x = centre + rng.uniform(-0.5, 0.5, size=(n_states * m, self.d_x))
        else:
            low = -1.0 if context_law == "uniform" else 0.0
            x = rng.uniform(low, 1.0, size=(n_states * m, self.d_x))
        s = np.repeat(rng.uniform(-1.0, 1.0, size=(n_states, self.d_s)), m, axis=0)
        actions = np.broadcast_to(np.arange(self.d_a), (n_states * m, self.d_a))
        feats = self.features(s[:, None, :].repeat(self.d_a, axis=1), actions, rng)
        return Population(x, feats, np.repeat(np.arange(n_states), m))

    def rewards(self, population: Population) -> np.ndarray:
        """True rewards r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a).

        Parameters
        ----------
        population : Population
            Drawn by :meth:`population`.

        Returns
        -------
        ndarray of shape (n, A)

        Examples
        --------
        >>> problem.rewards(pop).shape
        (50, 4)
        """
        if not isinstance(population, Population):
            raise TypeError(f"population must be a Population, got {type(population).__name__}")
        if (population.d_x, population.d_phi) != (self.d_x, self.d_phi):
            raise ValueError(f"population has (d_x, d_phi) = ({population.d_x}, {population.d_phi}), the "
                             f"problem ({self.d_x}, {self.d_phi}): draw it with problem.population(...)")
        return rewards(self.theta, population.contexts, population.features)


def paper_problem(d_s: int = 20, d_a: int = 10, d_x: int = 20, rank: int = 3, imbalance: float = 1.0,
                  seed=0, *, theta_kind: str = "paper", noise_dims: int = 0,
                  covered_action: int = 1) -> PaperProblem:
    """The §5.1 simulation problem.

    Parameters
    ----------
    d_s, d_a, d_x : int
        State dimension, number of actions (a = 0 … d_a − 1) and context dimension.
    rank : int
        Nominal rank r of Θ*.
    imbalance : float
        q ≥ 1: a fraction 1/q of comparisons spread over all actions, the rest are (0, 1).
    seed : int
        Seed of M, and of Θ* for ``theta_kind="random"`` (drawn after M, so M is the same
        for every kind); data and populations take their own seeds.
    theta_kind : {"paper", "diagonal", "random"}
        See :func:`paper_theta`; ``"random"`` draws Θ* from ``seed`` (:func:`random_theta`).
    noise_dims : int
        Pure-noise feature dimensions appended to φ (zero columns of Θ*), the
        paper's robustness study.
    covered_action : int
        The action a₁ of the (1 − 1/q) share of comparisons (the paper's 1).

    Returns
    -------
    PaperProblem

    Examples
    --------
    >>> paper = bl.simulate.paper_problem(d_s=20, d_a=10, d_x=20, rank=3, imbalance=3, seed=0)
    >>> paper                                                          # the paper's §5.1 sizes
    PaperProblem(d_x=20, d_a=10, d_s=20, d_phi=29, rank=3 (effective 2; σ = 5.96, 0.648, 0.0377), ...)
    >>> data = paper.sample(3000, seed=1)
    """
    d_s = check_int(d_s, "d_s", 1)
    d_a = check_int(d_a, "d_a", 2)
    d_x = check_int(d_x, "d_x", 1)
    rank = check_int(rank, "rank", 1, d_x)
    imbalance = check_real(imbalance, "imbalance", 1.0)
    noise_dims = check_int(noise_dims, "noise_dims", 0)
    covered_action = check_int(covered_action, "covered_action", 1, d_a - 1)
    check_option(theta_kind, "theta_kind", THETA_KINDS)
    rng = rng_from(seed)
    m = rng.uniform(-1.0, 1.0, size=(d_s, d_s))
    m /= np.linalg.norm(m)
    theta = (random_theta(d_x, d_a, d_s, rank, rng) if theta_kind == "random"
             else paper_theta(d_x, d_a, d_s, rank, theta_kind))
    if noise_dims:
        theta = np.hstack([theta, np.zeros((d_x, noise_dims))])
    return PaperProblem(d_s, d_a, d_x, rank, imbalance, theta_kind, noise_dims, theta, m, covered_action)
