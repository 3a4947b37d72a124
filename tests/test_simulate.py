"""The paper's §5.1 generator: Θ*, the data law and evaluation populations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import bayes_loco as bl
from bayes_loco.simulate import effective_rank, paper_problem, paper_theta

# ----------------------------------------------------------------------------- Θ*


def test_paper_theta_singular_values_rank3_match_design_notes():
    # docs/design.md, convention 8 (an independent measurement): 5.96, 0.65, 0.038.
    sv = np.linalg.svd(paper_theta(20, 10, 20, 3), compute_uv=False)
    half_unit = np.array([0.005, 0.005, 0.0005])  # half a unit in the last printed digit
    assert np.all(np.abs(sv[:3] - [5.96, 0.65, 0.038]) <= half_unit), sv[:3]
    assert sv[3] < 1e-12 * sv[0]


def test_paper_theta_singular_values_rank5_match_design_notes():
    # docs/design.md, convention 8: 5.94, 0.81, 0.075, 0.0036, 0.0001 (each to its last printed digit).
    sv = np.linalg.svd(paper_theta(20, 10, 20, 5), compute_uv=False)
    half_unit = np.array([0.005, 0.005, 0.0005, 0.00005, 0.00005])
    assert np.all(np.abs(sv[:5] - [5.94, 0.81, 0.075, 0.0036, 0.0001]) <= half_unit), sv[:5]
    assert sv[5] < 1e-12 * sv[0]


@pytest.mark.parametrize("rank", [1, 2, 3, 5])
@pytest.mark.parametrize("kind", ["paper", "diagonal"])
def test_paper_theta_structure(rank, kind):
    d_x, d_a, d_s = 20, 10, 20
    theta = paper_theta(d_x, d_a, d_s, rank, kind)
    assert theta.shape == (d_x, d_a - 1 + d_s)
    assert np.linalg.matrix_rank(theta) == rank
    np.testing.assert_array_equal(theta[:, d_a - 1:], 0.0)  # state columns
    assert np.all(theta[rank:] == 0.0)  # only the first r context coordinates are used
    if kind == "paper":
        # action columns are 2·w_k/‖w_k‖ with w_k = (1/k, …, 1/(k+r−1), 0, …)
        np.testing.assert_allclose(np.linalg.norm(theta[:, : d_a - 1], axis=0), 2.0, rtol=1e-12)
        for k in range(1, d_a):
            w = np.array([1.0 / (k + j) for j in range(rank)])
            np.testing.assert_allclose(theta[:rank, k - 1], 2.0 * w / np.sqrt(np.sum(w**2)), rtol=1e-12)
    else:
        expected = np.zeros_like(theta)
        for i in range(rank):
            expected[i, i] = 2.0
        np.testing.assert_array_equal(theta, expected)
        np.testing.assert_allclose(np.linalg.svd(theta, compute_uv=False)[:rank], 2.0)


def test_paper_theta_bad_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        paper_theta(20, 10, 20, 3, "spiky")
    with pytest.raises(ValueError, match=r"rank must be <= d_a - 1 = 2"):
        paper_theta(20, 3, 5, 3, "diagonal")


def test_paper_theta_rank_zero_raises_naming_rank():
    with np.errstate(invalid="ignore"), pytest.raises(ValueError, match="rank"):
        paper_theta(20, 10, 20, 0)


def test_effective_rank():
    # default rtol = 0.01: the threshold is 0.03 here
    assert effective_rank(np.diag([3.0, 1.0, 0.05, 0.031])) == 4
    assert effective_rank(np.diag([3.0, 1.0, 0.05, 0.029])) == 3
    assert effective_rank(np.diag([3.0, 1.0, 0.029, 0.0])) == 2
    assert effective_rank(np.diag([3.0, 1.0, 0.029, 0.0]), rtol=0.005) == 3
    assert effective_rank(np.zeros((3, 4))) == 0
    # rotation invariant: effective rank depends on singular values only
    rng = np.random.default_rng(3)
    q1, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    q2, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    m = np.zeros((5, 6))
    m[[0, 1, 2], [0, 1, 2]] = [10.0, 0.5, 0.05]
    assert effective_rank(q1 @ m @ q2) == 2
    # the §5.1 Θ is nearly rank 2 for r = 3 (docs/design.md, convention 8); the diagonal one is not
    assert effective_rank(paper_theta(20, 10, 20, 3)) == 2
    assert effective_rank(paper_theta(20, 10, 20, 3, "diagonal")) == 3


# ----------------------------------------------------------------------------- the problem


def test_paper_problem_attributes():
    p = paper_problem(d_s=6, d_a=5, d_x=7, rank=2, imbalance=2.5, seed=4, noise_dims=3)
    assert (p.d_s, p.d_a, p.d_x, p.rank, p.imbalance, p.noise_dims) == (6, 5, 7, 2, 2.5, 3)
    assert p.d_phi == 5 - 1 + 6 + 3
    assert p.theta.shape == (7, p.d_phi)
    np.testing.assert_array_equal(p.theta[:, :-3], paper_theta(7, 5, 6, 2))
    np.testing.assert_array_equal(p.theta[:, -3:], 0.0)
    assert p.state_map.shape == (6, 6)
    assert np.linalg.norm(p.state_map) == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(p.singular_values, np.linalg.svd(p.theta, compute_uv=False)[:2])
    assert "rank=2" in repr(p)


def test_paper_problem_seed_determines_state_map():
    a, b, c = paper_problem(seed=1), paper_problem(seed=1), paper_problem(seed=2)
    np.testing.assert_array_equal(a.state_map, b.state_map)
    assert not np.allclose(a.state_map, c.state_map)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"d_a": 1}, "d_a"), ({"d_s": 0}, "d_s"), ({"d_x": 0}, "d_x"), ({"rank": 21}, "rank"),
    ({"rank": 0}, "rank"), ({"imbalance": 0.5}, "imbalance"), ({"noise_dims": -1}, "noise_dims"),
    ({"covered_action": 0}, "covered_action"), ({"covered_action": 10}, "covered_action"),
])
def test_paper_problem_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        paper_problem(**kwargs)


def test_paper_problem_requires_a_seed():
    with pytest.raises(ValueError, match="seed must be given"):
        paper_problem(seed=None)


def test_paper_problem_bad_theta_kind_names_theta_kind():
    with pytest.raises(ValueError, match="theta_kind"):
        paper_problem(theta_kind="spiky")


def test_features():
    p = paper_problem(d_s=4, d_a=4, d_x=3, rank=2, seed=0)
    rng = np.random.default_rng(0)
    s = rng.uniform(-1, 1, size=(5, 4))
    actions = np.array([0, 1, 2, 3, 0])
    phi = p.features(s, actions, rng)
    assert phi.shape == (5, 3 + 4)
    np.testing.assert_array_equal(phi[:, :3], np.eye(4)[actions][:, 1:])  # one-hot, zeros for a = 0
    np.testing.assert_allclose(phi[:, 3:], 0.1 * np.array([p.state_map @ si for si in s]), rtol=1e-13)


# ----------------------------------------------------------------------------- sample()


@pytest.fixture(scope="module")
def big_sample():
    problem = paper_problem(d_s=5, d_a=10, d_x=6, rank=3, imbalance=3, seed=2)
    return problem, problem.sample(20000, seed=123)


def test_sample_shapes_and_actions(big_sample):
    _, data = big_sample
    assert (data.n, data.d_x, data.d_phi) == (20000, 6, 10 - 1 + 5)
    assert data.actions.shape == (20000, 2)
    np.testing.assert_array_equal(data.actions[:, 0], 0)
    a1 = data.actions[:, 1]
    assert a1.min() >= 1 and a1.max() <= 9
    # Δφ = φ(s, a1) − φ(s, 0): one-hot of a1 on the action block, the state block cancels exactly
    np.testing.assert_array_equal(data.differences[:, :9], np.eye(10)[a1][:, 1:])
    np.testing.assert_array_equal(data.differences[:, 9:], 0.0)
    assert np.all(np.abs(data.contexts) <= 1.0)


def test_sample_imbalance_fraction_is_binomial(big_sample):
    problem, data = big_sample
    q, d_a, n = problem.imbalance, problem.d_a, data.n
    a1 = data.actions[:, 1]
    # P(a1 ≠ 1) = (1/q)(d_a − 2)/(d_a − 1); each a ≥ 2 has probability (1/q)/(d_a − 1)
    for observed, p in [(np.mean(a1 != 1), (1 / q) * (d_a - 2) / (d_a - 1)),
                        *[(np.mean(a1 == a), (1 / q) / (d_a - 1)) for a in range(2, d_a)]]:
        se = np.sqrt(p * (1 - p) / n)
        assert abs(observed - p) < 4 * se, (observed, p)


def test_sample_labels_follow_btl(big_sample):
    problem, data = big_sample
    eta = np.array([x @ problem.theta @ d for x, d in zip(data.contexts, data.differences, strict=True)])
    p = expit(eta)
    n = data.n
    # overall: mean(y) − mean(p) has sd sqrt(Σ p(1−p))/N given the covariates
    assert abs(data.labels.mean() - p.mean()) < 4 * np.sqrt(np.sum(p * (1 - p))) / n
    # calibration within quintiles of p: catches a flipped sign that the overall mean cannot see
    edges = np.quantile(p, [0.2, 0.4, 0.6, 0.8])
    bins = np.digitize(p, edges)
    for b in range(5):
        sel = bins == b
        pb = p[sel]
        se = np.sqrt(np.sum(pb * (1 - pb))) / sel.sum()
        assert abs(data.labels[sel].mean() - pb.mean()) < 4 * se, b
    assert p[bins == 0].mean() < 0.35 and p[bins == 4].mean() > 0.65  # the check has power


def test_sample_reproducible_and_seed_sensitive():
    problem = paper_problem(d_s=4, d_a=5, d_x=3, rank=2, imbalance=2, seed=0, noise_dims=2)
    a, b = problem.sample(300, seed=9), problem.sample(300, seed=9)
    c = problem.sample(300, seed=10)
    for name in ("contexts", "differences", "labels", "actions"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.contexts, c.contexts)
    assert not np.array_equal(a.labels, c.labels)
    # a Generator works as a seed too, and advances
    rng = np.random.default_rng(9)
    d = problem.sample(300, rng)
    np.testing.assert_array_equal(d.contexts, a.contexts)
    assert not np.array_equal(problem.sample(300, rng).contexts, a.contexts)


def test_sample_with_noise_dims():
    problem = paper_problem(d_s=4, d_a=5, d_x=3, rank=2, seed=0, noise_dims=3)
    data = problem.sample(500, seed=1)
    assert data.d_phi == 5 - 1 + 4 + 3
    noise = data.differences[:, -3:]
    # difference D of two independent Unif[−1, 1] draws: in [−2, 2], nonzero, E D² = 2/3 and
    # E D⁴ = 2·(1/5) + 6·(1/3)² = 16/15, so the sample second moment has sd sqrt((16/15 − 4/9)/n)
    assert np.all(np.abs(noise) <= 2.0) and np.all(noise != 0.0)
    se = np.sqrt((16 / 15 - 4 / 9) / noise.size)
    assert abs(np.mean(noise**2) - 2 / 3) < 4 * se
    np.testing.assert_array_equal(data.differences[:, 4:8], 0.0)


def test_differences_are_the_two_feature_draws_subtracted_and_blocks_change_nothing(monkeypatch):
    """Δφ = φ(s, a₁) − φ(s, 0) with φ drawn whole, bit for bit, whatever the noise block size."""
    problem = paper_problem(d_s=4, d_a=5, d_x=3, rank=2, seed=0, noise_dims=7)  # q = 1: every a₁ drawn
    n = 301
    rng = np.random.default_rng(5)
    rng.uniform(-1, 1, size=(n, 3))
    s = rng.uniform(-1, 1, size=(n, 4))
    rng.random(n)
    a1 = rng.integers(1, 5, size=n)
    expected = problem.features(s, a1, rng) - problem.features(s, np.zeros(n, dtype=int), rng)
    data = problem.sample(n, seed=5)
    np.testing.assert_array_equal(data.differences, expected)
    np.testing.assert_array_equal(data.actions[:, 1], a1)
    population = problem.population(11, seed=6, contexts_per_state=3)
    bl.set_config(noise_block=9)  # one row per block
    np.testing.assert_array_equal(problem.sample(n, seed=5).differences, expected)
    np.testing.assert_array_equal(problem.population(11, seed=6, contexts_per_state=3).features,
                                  population.features)


def test_sample_bad_arguments():
    problem = paper_problem(d_s=3, d_a=3, d_x=2, rank=1, seed=0)
    with pytest.raises(ValueError, match=r"^n must be >= 1"):
        problem.sample(0, seed=1)
    with pytest.raises(TypeError, match=r"^n must be an integer"):
        problem.sample(10.0, seed=1)
    with pytest.raises(ValueError, match="seed must be given"):
        problem.sample(10, seed=None)


def test_covered_action_takes_the_imbalanced_share_and_the_default_is_the_papers():
    """Moving the (1 − 1/q) share leaves every other draw as it was: the default sample is bit for bit the
    paper's, and covered_action = 2 swaps the frequencies of actions 1 and 2."""
    paper = paper_problem(d_s=3, d_a=5, d_x=4, rank=2, imbalance=4, seed=0)
    moved = paper_problem(d_s=3, d_a=5, d_x=4, rank=2, imbalance=4, seed=0, covered_action=2)
    a, b = paper.sample(20000, seed=9), moved.sample(20000, seed=9)
    np.testing.assert_array_equal(a.contexts, b.contexts)
    a1, b1 = a.actions[:, 1], b.actions[:, 1]
    changed = a1 != b1  # exactly the imbalanced share: 1 in the paper's sample, 2 in the moved one
    assert (a1[changed] == 1).all() and (b1[changed] == 2).all()
    assert abs(np.mean(changed) - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 20000)
    p = 1 - 0.25 + 0.25 / 4  # share of the covered action: (1 − 1/q) + (1/q)/(d_a − 1)
    assert abs(np.mean(b1 == 2) - p) < 4 * np.sqrt(p * (1 - p) / 20000)
    assert "covered_action=2" in repr(moved)


def test_target_law_is_centred_outside_the_training_support_and_ranks_the_actions():
    """x ~ (1, −1, 0, …) + Unif[−½, ½]: its mean and range; under the §5.1 Θ* the global values fall with the
    action's index (a ladder), unlike the paper's shifted law, where they are within 0.17 of each other."""
    problem = paper_problem(rank=3, seed=0)
    pop = problem.population(400, seed=4, contexts_per_state=5, context_law="target")
    x = pop.contexts
    se = np.sqrt(1 / 12 / x.shape[0])
    assert abs(x[:, 0].mean() - 1) < 4 * se and abs(x[:, 1].mean() + 1) < 4 * se
    assert np.abs(x[:, 2:].mean(axis=0)).max() < 4 * se
    assert x[:, 0].max() > 1.4 and x[:, 0].min() >= 0.5 and np.abs(x[:, 2:]).max() <= 0.5
    values = problem.rewards(pop).mean(axis=0)[1:]
    assert np.all(np.diff(values) < 0) and values[0] - values[1] > 0.3
    shifted = problem.rewards(problem.population(400, seed=4, contexts_per_state=5,
                                                 context_law="shifted")).mean(axis=0)[1:]
    assert np.ptp(shifted) < 0.2 < np.ptp(values)
    with pytest.raises(ValueError, match="d_x >= 2"):
        paper_problem(d_x=1, rank=1, seed=0).population(3, seed=1, context_law="target")


# ----------------------------------------------------------------------------- population()


@pytest.mark.parametrize("law", ["uniform", "shifted"])
def test_population_shapes_states_and_law(law):
    problem = paper_problem(d_s=4, d_a=6, d_x=5, rank=2, seed=0, noise_dims=2)
    pop = problem.population(50, seed=3, contexts_per_state=4, context_law=law)
    assert pop.contexts.shape == (200, 5)
    assert pop.features.shape == (200, 6, problem.d_phi)
    np.testing.assert_array_equal(pop.states, np.repeat(np.arange(50), 4))
    assert pop.n_states == 50 and pop.n_actions == 6
    low = -1.0 if law == "uniform" else 0.0
    assert pop.contexts.min() >= low and pop.contexts.max() <= 1.0
    if law == "uniform":
        assert pop.contexts.min() < -0.9  # draws reach the negative half
    else:
        assert pop.contexts.min() < 0.05
    # action block: one-hot of every action a (zeros for a = 0)
    np.testing.assert_array_equal(pop.features[:, :, :5], np.broadcast_to(np.eye(6)[:, 1:], (200, 6, 5)))
    # state block: the same for every action of a row and for every row of a state
    state = pop.features[:, :, 5:9]
    np.testing.assert_array_equal(state, np.broadcast_to(state[:, :1], state.shape))
    by_group = state[:, 0].reshape(50, 4, 4)
    np.testing.assert_array_equal(by_group, np.broadcast_to(by_group[:, :1], by_group.shape))
    assert not np.allclose(by_group[0, 0], by_group[1, 0])
    # contexts differ within a state
    assert not np.allclose(pop.contexts[0], pop.contexts[1])


def test_population_rewards():
    problem = paper_problem(d_s=4, d_a=6, d_x=5, rank=3, seed=0, noise_dims=2)
    pop = problem.population(30, seed=1, contexts_per_state=2)
    r = problem.rewards(pop)
    assert r.shape == (60, 6)
    np.testing.assert_array_equal(r[:, 0], 0.0)  # action 0 has no action features; state columns of Θ* are 0
    expected = np.array([[x @ problem.theta @ f for f in fs] for x, fs in zip(pop.contexts, pop.features,
                                                                                strict=True)])
    np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
    assert np.abs(r[:, 1:]).max() > 0.1


def test_population_reproducible():
    problem = paper_problem(d_s=3, d_a=4, d_x=2, rank=1, seed=0)
    a, b = problem.population(10, seed=5), problem.population(10, seed=5)
    np.testing.assert_array_equal(a.contexts, b.contexts)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.states, np.arange(10))
    assert not np.array_equal(a.contexts, problem.population(10, seed=6).contexts)


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"n_states": 0}, ValueError, "^n_states must"),
    ({"n_states": 2.5}, TypeError, "^n_states must be an integer"),
    ({"contexts_per_state": 0}, ValueError, "^contexts_per_state must"),
    ({"context_law": "gaussian"}, ValueError, "^context_law must be one of"),
    ({"seed": None}, ValueError, "seed must be given"),
])
def test_population_bad_arguments(kwargs, error, pattern):
    problem = paper_problem(d_s=3, d_a=4, d_x=2, rank=1, seed=0)
    args = {"n_states": 5, "seed": 1} | kwargs
    n_states, seed = args.pop("n_states"), args.pop("seed")
    with pytest.raises(error, match=pattern):
        problem.population(n_states, seed, **args)

