"""The PersonalLLM benchmark: loader for its table, a generated stand-in, and the study problem.

The benchmark (9,402 train and 1,000 test prompts) has columns ``prompt``,
``response_1`` … ``response_8`` and one score per response and reward model,
``response_{i}_{model}``, for ten reward models. As in the paper, each model's
scores are standardised to mean 0 and variance 1 with the train-set moments and
the ten together are φ(s, a) ∈ R^10. The package does not download the benchmark:
users point :func:`load_personalllm` at their local copy, and :func:`write_standin`
writes a file in the same layout whose scores keep the published names and
moments and agree across models, as real reward models do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit

from .._validation import check_int, rng_from
from ..data import Population, PreferenceData
from ..model import margins, rewards
from ..simulate import decaying_columns

#: Responses per prompt in the benchmark.
N_RESPONSES = 8
#: The ten reward models, with the published train-set mean and standard deviation of their scores.
REWARD_MODELS: dict[str, tuple[float, float]] = {
    "gemma_2b": (4.330, 2.039), "gemma_7b": (1.626, 2.610), "mistral_raft": (8.309, 3.073),
    "mistral_ray": (3.014, 1.690), "mistral_weqweasdas": (7.071, 2.579), "llama3_sfairx": (1.064, 2.953),
    "oasst_deberta_v3": (2.898, 1.721), "beaver_7b": (6.234, 3.013), "oasst_pythia_7b": (4.706, 1.366),
    "oasst_pythia_1b": (4.294, 2.302),
}


def expected_columns() -> list[str]:
    """The columns a PersonalLLM split has: ``prompt``, ``response_1..8`` and ``response_{i}_{model}``.

    Returns
    -------
    list of str
        89 names: the prompt, 8 responses and 8 × 10 reward-model scores.

    Examples
    --------
    >>> columns = bl.datasets.expected_columns()
    >>> len(columns), columns[:3]
    (89, ['prompt', 'response_1', 'response_2'])
    """
    cols = ["prompt", *(f"response_{i}" for i in range(1, N_RESPONSES + 1))]
    return cols + [f"response_{i}_{m}" for i in range(1, N_RESPONSES + 1) for m in REWARD_MODELS]


def load_personalllm(path: str | Path) -> pd.DataFrame:
    """Read a PersonalLLM split (parquet or CSV) and check its layout.

    The benchmark is on Hugging Face as ``namkoong-lab/PersonalLLM`` (9,402 train and
    1,000 test prompts); the package does not download it. :func:`write_standin` writes
    a generated file in the same layout.

    Parameters
    ----------
    path : str or Path
        A ``.parquet`` or ``.csv`` file of one split.

    Returns
    -------
    pandas.DataFrame
        The split, with the columns of :func:`expected_columns`.

    Examples
    --------
    >>> path = bl.datasets.write_standin("personalllm_train.csv", 200, seed=1)
    >>> bl.datasets.load_personalllm(path).shape
    (200, 89)

    Raises
    ------
    FileNotFoundError
        The file is missing (the message says where to get it).
    ValueError
        Columns are missing or scores are not finite; the message names them.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"PersonalLLM file {path} does not exist. Download the benchmark's train/test splits and pass "
            f"the local parquet or CSV path; expected columns: prompt, response_1..response_{N_RESPONSES} "
            "and response_{i}_{model} for models " + ", ".join(REWARD_MODELS))
    frame = pd.read_parquet(path) if path.suffix in (".parquet", ".pq") else pd.read_csv(path)
    missing = [c for c in expected_columns() if c not in frame.columns]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise ValueError(f"{path} is not in the PersonalLLM layout: missing columns {shown}")
    scores = frame[expected_columns()[1 + N_RESPONSES:]]
    if not np.isfinite(scores.to_numpy(dtype=float)).all():
        raise ValueError(f"{path}: some reward-model scores are missing or not finite")
    return frame


def score_tensor(frame: pd.DataFrame) -> np.ndarray:
    """Raw scores as an array (prompts, 8 responses, 10 models).

    Parameters
    ----------
    frame : pandas.DataFrame
        A split read by :func:`load_personalllm`.

    Returns
    -------
    ndarray of shape (prompts, 8, 10)

    Examples
    --------
    >>> frame = bl.datasets.load_personalllm(bl.datasets.write_standin("train.csv", 200, seed=1))
    >>> bl.datasets.score_tensor(frame).shape
    (200, 8, 10)
    """
    cols = [f"response_{i}_{m}" for i in range(1, N_RESPONSES + 1) for m in REWARD_MODELS]
    return frame[cols].to_numpy(dtype=float).reshape(len(frame), N_RESPONSES, len(REWARD_MODELS))


def write_standin(path: str | Path, n_prompts: int, seed, *, agreement: float = 0.8) -> Path:
    """Write a generated file in the PersonalLLM layout (for tests and demos).

    Each response has a latent quality q ~ N(0, 1); model m scores it
    mean_m + sd_m (√agreement q + √(1 − agreement) ε), so models correlate by
    ``agreement`` and keep the published moments. Its texts are placeholders: it is not
    the benchmark.

    Parameters
    ----------
    path : str or Path
        ``.parquet`` or ``.csv``.
    n_prompts : int
    seed : int, SeedSequence or Generator
    agreement : float
        Correlation between the reward models' scores, in [0, 1].

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> bl.datasets.write_standin("personalllm_test.csv", 50, seed=2).name
    'personalllm_test.csv'
    """
    n_prompts = check_int(n_prompts, "n_prompts", 1)
    rng = rng_from(seed)
    quality = rng.normal(size=(n_prompts, N_RESPONSES, 1))
    noise = rng.normal(size=(n_prompts, N_RESPONSES, len(REWARD_MODELS)))
    latent = np.sqrt(agreement) * quality + np.sqrt(1 - agreement) * noise
    means, sds = np.array(list(REWARD_MODELS.values())).T
    scores = means + sds * latent
    data = {"prompt": [f"generated prompt {i}" for i in range(n_prompts)]}
    for i in range(N_RESPONSES):
        data[f"response_{i + 1}"] = [f"generated response {i + 1} to prompt {j}" for j in range(n_prompts)]
    for i in range(N_RESPONSES):
        for k, model in enumerate(REWARD_MODELS):
            data[f"response_{i + 1}_{model}"] = scores[:, i, k]
    path = Path(path)
    frame = pd.DataFrame(data)
    frame.to_parquet(path) if path.suffix in (".parquet", ".pq") else frame.to_csv(path, index=False)
    return path


@dataclass(frozen=True, eq=False)
class PersonalLLMProblem:
    """The paper's PersonalLLM study: φ(s, a) = standardised scores, uniform contexts, low-rank Θ*.

    A :class:`~bayes_loco.problems.Problem` without global populations: every
    evaluation row has its own test prompt (state), so only personalised
    policies are studied.

    Attributes
    ----------
    train_features, test_features : ndarray, shape (prompts, 8, 10 + noise_dims)
        φ(s, a) standardised with the train split's moments.
    theta : ndarray, shape (d_x, d_φ)
        Θ* built as in the simulation: columns 2·w_k/‖w_k‖, w_k = (1/k, …, 1/(k+r−1), 0, …).
    source : str
        Which file the features came from (printed with results).
    """

    train_features: np.ndarray
    test_features: np.ndarray
    theta: np.ndarray
    source: str

    has_global_populations: ClassVar[bool] = False

    def __repr__(self) -> str:
        return (f"PersonalLLMProblem(d_x={self.d_x}, d_phi={self.d_phi}, train prompts="
                f"{self.train_features.shape[0]}, test prompts={self.test_features.shape[0]}, "
                f"source={self.source!r})")

    @property
    def d_x(self) -> int:
        return self.theta.shape[0]

    @property
    def d_phi(self) -> int:
        return self.theta.shape[1]

    def sample(self, n: int, seed) -> PreferenceData:
        """N comparisons: a random train prompt, a random pair of its responses, BTL labels from Θ*.

        Parameters
        ----------
        n : int
        seed : int, SeedSequence or Generator

        Returns
        -------
        PreferenceData
            Contexts uniform on [−1, 1]^d_x.

        Examples
        --------
        >>> train = bl.datasets.write_standin("train.csv", 200, seed=1)
        >>> test = bl.datasets.write_standin("test.csv", 50, seed=2)
        >>> problem = bl.datasets.personalllm_problem(train, test, d_x=4, rank=2)
        >>> problem.sample(100, seed=0)
        PreferenceData(N=100, d_x=4, d_phi=10, mean(y)=0.450)
        """
        n = check_int(n, "n", 1)
        rng = rng_from(seed)
        prompts = rng.integers(0, self.train_features.shape[0], size=n)
        pair = np.stack([rng.permutation(N_RESPONSES)[:2] for _ in range(n)])
        x = rng.uniform(-1.0, 1.0, size=(n, self.d_x))
        f0 = self.train_features[prompts, pair[:, 0]]
        f1 = self.train_features[prompts, pair[:, 1]]
        eta = margins(self.theta, x, f1 - f0)
        y = (rng.random(n) < expit(eta)).astype(np.int8)
        return PreferenceData.from_arrays(x, y, features_1=f1, features_0=f0, actions=pair)

    def population(self, n: int, seed, **options) -> Population:
        """Evaluation on the test split: ``n`` (x, test prompt) pairs, all 8 responses as actions.

        There are no options: each row has its own prompt (no global populations).

        Parameters
        ----------
        n : int
        seed : int, SeedSequence or Generator

        Returns
        -------
        Population

        Examples
        --------
        >>> train = bl.datasets.write_standin("train.csv", 200, seed=1)
        >>> test = bl.datasets.write_standin("test.csv", 50, seed=2)
        >>> problem = bl.datasets.personalllm_problem(train, test, d_x=4, rank=2)
        >>> problem.population(20, seed=1)
        Population(n=20, states=20, actions=8, d_x=4, d_phi=10)
        """
        if options:
            raise TypeError(f"PersonalLLMProblem.population takes no options (one context per prompt), "
                            f"got {sorted(options)}")
        n = check_int(n, "n", 1)
        rng = rng_from(seed)
        prompts = rng.integers(0, self.test_features.shape[0], size=n)
        x = rng.uniform(-1.0, 1.0, size=(n, self.d_x))
        return Population(x, self.test_features[prompts], np.arange(n))

    def rewards(self, population: Population) -> np.ndarray:
        """True rewards r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a).

        Parameters
        ----------
        population : Population

        Returns
        -------
        ndarray of shape (n, 8)

        Examples
        --------
        >>> train = bl.datasets.write_standin("train.csv", 200, seed=1)
        >>> test = bl.datasets.write_standin("test.csv", 50, seed=2)
        >>> problem = bl.datasets.personalllm_problem(train, test, d_x=4, rank=2)
        >>> problem.rewards(problem.population(20, seed=1)).shape
        (20, 8)
        """
        return rewards(self.theta, population.contexts, population.features)


def personalllm_problem(train: str | Path, test: str | Path, *, d_x: int = 10, rank: int = 3,
                        noise_dims: int = 0, seed=0) -> PersonalLLMProblem:
    """The paper's PersonalLLM problem from local train and test files (see :func:`load_personalllm`).

    φ(s, a) is the ten reward models' scores of response a to prompt s, standardised
    with the train split's moments (and ``noise_dims`` pure-noise columns); Θ* is built
    as in the simulation.

    Parameters
    ----------
    train, test : str or Path
        The two splits.
    d_x : int
        Context dimension.
    rank : int
        Rank of Θ*, at most min(d_x, 10).
    noise_dims : int
        Pure-noise feature columns appended.
    seed : int, SeedSequence or Generator
        Draws the noise columns.

    Returns
    -------
    PersonalLLMProblem

    Examples
    --------
    >>> train = bl.datasets.write_standin("train.csv", 200, seed=1)
    >>> test = bl.datasets.write_standin("test.csv", 50, seed=2)
    >>> bl.datasets.personalllm_problem(train, test, d_x=4)  # doctest: +ELLIPSIS
    PersonalLLMProblem(d_x=4, d_phi=10, train prompts=200, test prompts=50, source=...)
    """
    d_x = check_int(d_x, "d_x", 1)
    rank = check_int(rank, "rank", 1, min(d_x, len(REWARD_MODELS)))
    noise_dims = check_int(noise_dims, "noise_dims", 0)
    rng = rng_from(seed)
    train_scores, test_scores = score_tensor(load_personalllm(train)), score_tensor(load_personalllm(test))
    mean = train_scores.reshape(-1, len(REWARD_MODELS)).mean(axis=0)
    sd = train_scores.reshape(-1, len(REWARD_MODELS)).std(axis=0)
    feats = [(s - mean) / sd for s in (train_scores, test_scores)]
    if noise_dims:
        feats = [np.concatenate([f, rng.normal(size=(*f.shape[:2], noise_dims))], axis=-1) for f in feats]
    theta = np.zeros((d_x, feats[0].shape[-1]))
    theta[:, : len(REWARD_MODELS)] = decaying_columns(d_x, len(REWARD_MODELS), rank)
    return PersonalLLMProblem(feats[0], feats[1], theta, f"train={train}, test={test}")
