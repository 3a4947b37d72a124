"""Shared fixtures: simulated problems that carry their ground truth, and trusted helpers.

Every generator is seeded. Expensive fits of the paper's simulation are session
scoped so that test_fgd.py and test_prs.py share them.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import expit
from threadpoolctl import threadpool_limits

import bayes_loco as bl
from bayes_loco import simulate


@dataclass(frozen=True)
class RandomProblem:
    """Data drawn from the contextual BTL model with a known Θ*."""

    data: bl.PreferenceData
    theta: np.ndarray


def make_random_problem(d_x: int, d_phi: int, n: int, seed: int, *, rank: int | None = None,
                        scale: float = 0.4) -> RandomProblem:
    """Gaussian contexts and feature differences, labels from BTL with a random Θ*.

    ``rank=None`` gives a full-rank Θ* with i.i.d. N(0, scale²) entries; otherwise
    Θ* = A Bᵀ with A (d_x × rank), B (d_φ × rank) scaled so that its entries have
    about the same size. Either way η = xᵀΘ*Δφ has standard deviation ≈ ‖Θ*‖_F,
    so the fitted probabilities stay well inside (0, 1).
    """
    rng = np.random.default_rng(seed)
    if rank is None:
        theta = scale * rng.standard_normal((d_x, d_phi))
    else:
        a = rng.standard_normal((d_x, rank))
        b = rng.standard_normal((d_phi, rank))
        theta = scale * (a @ b.T) / np.sqrt(rank)
    x = rng.standard_normal((n, d_x))
    dphi = rng.standard_normal((n, d_phi))
    eta = np.sum((x @ theta) * dphi, axis=1)
    y = (rng.random(n) < expit(eta)).astype(np.int64)
    return RandomProblem(bl.PreferenceData(x, dphi, y), theta)


def repeated_rows(data: bl.PreferenceData, times) -> bl.PreferenceData:
    """``data``'s rows, row t given ``times[t]`` times (an int repeats each): the expanded rows that
    counts stand for, without counts or weights."""
    rows = np.repeat(np.arange(data.n), times)
    return bl.PreferenceData(data.contexts[rows], data.differences[rows], data.labels[rows])


def kron_design(contexts: np.ndarray, differences: np.ndarray) -> np.ndarray:
    """The explicit N × d_x·d_φ design, row t = kron(x_t, Δφ_t) = vec(x_t Δφ_tᵀ) (row-major).

    Built row by row with ``np.kron`` — deliberately not the package's einsum — so it
    is an independent reference for the Kronecker convention.
    """
    return np.stack([np.kron(xt, dt) for xt, dt in zip(contexts, differences, strict=True)])


@pytest.fixture(scope="session")
def random_problem_factory():
    """``make_random_problem(d_x, d_phi, n, seed, *, rank=None, scale=0.4)``."""
    return make_random_problem


@pytest.fixture(scope="session")
def kron():
    """``kron_design(contexts, differences)``: the explicit Kronecker design."""
    return kron_design


@pytest.fixture(scope="session")
def random_problem() -> RandomProblem:
    """Well-conditioned full-rank problem: d_x = 4, d_φ = 5, N = 4000."""
    return make_random_problem(4, 5, 4000, seed=20240601)


@pytest.fixture(scope="session")
def random_low_rank_problem() -> RandomProblem:
    """Well-conditioned rank-2 problem: d_x = 4, d_φ = 5, N = 4000 (W of PRS is full rank)."""
    return make_random_problem(4, 5, 4000, seed=7, rank=2, scale=0.6)


@dataclass(frozen=True)
class PaperFit:
    problem: simulate.PaperProblem
    data: bl.PreferenceData
    mle: bl.MLEResult
    low_rank: bl.LowRankResult


@pytest.fixture(scope="session")
def paper_q3() -> PaperFit:
    """Paper §5.1 simulation, r = 3, imbalance q = 3, N = 3000; MLE and FGD (L-BFGS) fits."""
    problem = simulate.paper_problem(rank=3, imbalance=3)
    data = problem.sample(3000, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)  # a warning here is a failure
        mle = bl.fit_mle(data)
        low_rank = bl.fit_low_rank(data, 3, initial=mle)
    return PaperFit(problem, data, mle, low_rank)


@pytest.fixture(scope="session")
def paper_q1_prs():
    """Paper §5.1 simulation (d_x = 20, d_a = 10, d_s = 20, r = 3, q = 1), N = 3000, and its PRS fit."""
    problem = simulate.paper_problem(rank=3, imbalance=1)
    data = problem.sample(3000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        prs = bl.fit_prs(data, 3)
    return problem, data, prs


# ---------------------------------------------------------------------------- the Bayesian road

BAYES_RANK = 2


@pytest.fixture(scope="session")
def bayes_problem():
    """A small paper simulation (d_x = 4, d_a = 4, d_s = 3, r = 2), N = 800, and its low-rank fit."""
    problem = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=BAYES_RANK, seed=0)
    data = problem.sample(800, seed=3)
    low_rank = bl.fit_low_rank(data, BAYES_RANK)
    return problem, data, low_rank


def bayes_short_fit(problem, **kwargs):
    """A posterior from the frequentist start with short chains, whose low ESS is expected."""
    from bayes_loco import bayes as bb

    _, data, low_rank = problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.SamplerWarning)
        return bb.fit_posterior(data, BAYES_RANK, start=low_rank, progressbar=False, **kwargs)


@pytest.fixture(scope="session")
def bayes_nuts(bayes_problem):
    """Two short PyMC NUTS chains on :func:`bayes_problem`, in the partial chart (r₁ = 1).

    Named: on these N = 800 comparisons "auto" runs the factored model (bayes.geometry), and the
    tests that use this fit read the partial chart's model and records. Over seeds 1–8 these
    short chains diverged 0–2 times, and the same seed gave 0 or 2 with other library builds, so
    the tests read the count from the tree rather than assume one.
    """
    return bayes_short_fit(bayes_problem, nuts={"draws": 300, "tune": 300, "chains": 2, "cores": 1,
                                                "sampler": "pymc", "parametrization": "chart",
                                                "chart_rank": 1}, random_seed=3)


# One BLAS thread in each test process and the processes it starts: with two workers on two cores,
# OpenBLAS's spinning threads competed with the other worker's (the suite took 5% longer). The variables
# reach the libraries loaded later and the subprocesses; the libraries already loaded are limited here.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
threadpool_limits(int(os.environ["OPENBLAS_NUM_THREADS"]))


# ------------------------------------------------------------------------------- the suite's order

#: The modules of the longest tests (notebooks, the site's build, cold compilations, fallback chains,
#: killed runners), collected first: with ``pytest -n 2`` (work stealing, pyproject.toml) the workers then
#: end on short tests together, instead of one waiting on a notebook that started last.
LONG_FIRST = ("test_notebooks.py", "test_docs.py", "test_reproducible.py", "test_bayes_geometry.py",
              "test_runner_faults.py", "test_bayes_samplers.py", "test_guide_code.py")


def pytest_collection_modifyitems(config, items):
    first = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(LONG_FIRST)))


# ---------------------------------------------------------------------------- a sampler's luck

def pytest_addoption(parser):
    parser.addoption(
        "--sampler-seed-offset", type=int, default=0,
        help="add this to every seed that reaches a sampler (pm.sample, nutpie.sample, ADVI), so that the "
             "Bayesian tests can be run on other trajectories than their own: a test that fails under "
             "another offset asserts one run's luck, not a property")


def pytest_configure(config):
    offset = config.getoption("--sampler-seed-offset")
    if offset:
        _shift_sampler_seeds(offset)


def _shift_sampler_seeds(offset: int) -> None:
    """Wrap the samplers' entry points so that each seed they are given is moved by ``offset``."""
    import functools

    import nutpie
    import pymc as pm

    def shifted(seed):
        if seed is None:
            return None
        if isinstance(seed, (list, tuple)):
            return type(seed)(shifted(s) for s in seed)
        return int(seed) + offset

    def wrap(func, name):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if name in kwargs:
                kwargs[name] = shifted(kwargs[name])
            return func(*args, **kwargs)
        return wrapper

    pm.sample = wrap(pm.sample, "random_seed")
    nutpie.sample = wrap(nutpie.sample, "seed")
    for name in ("ADVI", "FullRankADVI"):
        setattr(pm, name, wrap(getattr(pm, name), "random_seed"))


@pytest.fixture(autouse=True)
def _settings_end_with_the_test():
    """A test's changes of the tuning settings (``bl.set_config``) end with it: each test runs in a
    ``config_context`` of its own."""
    with bl.config_context():
        yield
