"""best_actions: the actions statistically tied with the best, against oracles and a known truth.

Oracles, none of which calls the code under test:

* z from the raw population by explicit outer products x (φ_b − φ_a)ᵀ, averaged over a
  state's rows by explicit loops;
* an ellipsoid's minimum of θᵀd by dense sampling of its boundary θ̂ + R B⁻ᵀu, ‖u‖ = 1
  (W = B Bᵀ), which can only overestimate it;
* a hull's minimum as the smallest θ_jᵀd over the draws, CVaR as the mean of the lowest
  βJ values, the pointwise quantile by np.quantile, each by loops over units and actions;
* the paper's simulation with its known Θ*: the true best actions (every maximiser of
  x ᵀΘ*φ) against the tied sets of Wald sets fitted on seeded data.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import bayes_loco as bl
from bayes_loco import DrawsSet, EllipsoidSet, Population, QuantileSet, VecCoordinates
from bayes_loco.decisions import BestActions, best_actions

# ============================================================================ instances and oracles


def random_population(rng, n_units, n_actions, d_x, d_phi, contexts_per_state=1):
    """Rows (x, s); with several contexts per state, a state's rows share φ."""
    states = np.repeat(np.arange(n_units), contexts_per_state)
    phi = rng.normal(size=(n_units, n_actions, d_phi))[states]
    return Population(rng.normal(size=(states.size, d_x)), phi, states)


def unit_differences(pop, per_state):
    """d[u, a, b] = mean over the unit's rows of vec(x (φ_b − φ_a)ᵀ), shape (U, A, A, k)."""
    n, n_actions, d_phi = pop.features.shape
    k = pop.d_x * d_phi
    rows = np.zeros((n, n_actions, n_actions, k))
    for i in range(n):
        for a in range(n_actions):
            for b in range(n_actions):
                rows[i, a, b] = np.outer(pop.contexts[i], pop.features[i, b] - pop.features[i, a]).ravel()
    if not per_state:
        return rows
    return np.stack([rows[pop.states == s].mean(axis=0) for s in np.unique(pop.states)])


def oracle_margin(differences, minimum):
    """max_{b ≠ a} minimum(d_ab) by loops; ``minimum`` maps one difference to min_θ θᵀd."""
    n_units, n_actions = differences.shape[:2]
    margin = np.full((n_units, n_actions), -np.inf)
    for u in range(n_units):
        for a in range(n_actions):
            for b in range(n_actions):
                if b != a:
                    margin[u, a] = max(margin[u, a], minimum(differences[u, a, b]))
    return margin


def sphere(rng, n, dim):
    u = rng.normal(size=(n, dim))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def ellipsoid_case():
    """A full-rank ellipsoid in vec coordinates (k = 4) with W = B Bᵀ, and a population of 40 rows."""
    rng = np.random.default_rng(11)
    d_x, d_phi, k = 2, 2, 4
    b = rng.normal(size=(k, k)) + 0.5 * np.eye(k)
    center = np.array([1.0, -0.5, 0.8, 0.3])
    eset = EllipsoidSet(center, b @ b.T, 0.4, VecCoordinates(d_x, d_phi), kind="wald", level=0.9)
    pop = random_population(rng, 40, 4, d_x, d_phi)
    return eset, b, pop


# ============================================================================ brute force


def test_ellipsoid_equals_dense_sampling_of_its_boundary(ellipsoid_case):
    """Sampled boundary points lie in the set, so their minimum is never below the exact one. It exceeds it
    by R‖d‖_{W⁻¹}(1 − cos φ), φ the angle from the minimiser to the nearest of n samples on S³: P(φ > t)
    ≈ exp(−n·2t³/(3π)), so with n = 400,000 every one of the 480 differences has φ < 0.068 (1 − cos φ <
    2.4e-3) but with probability 1e-9. The tied masks agree wherever the margin is clear of that."""
    eset, b, pop = ellipsoid_case
    thetas = eset.center + eset.radius * sphere(np.random.default_rng(0), 400_000, 4) @ np.linalg.inv(b)
    np.testing.assert_allclose(eset.distance(thetas[:5]), eset.radius, rtol=1e-9)
    diffs = unit_differences(pop, per_state=False)
    brute = oracle_margin(diffs, lambda d: float((thetas @ d).min()))
    widths = eset.radius * np.linalg.norm(np.linalg.solve(b, diffs.reshape(-1, 4).T), axis=0)
    resolution = 2.4e-3 * widths.reshape(diffs.shape[:3]).max(axis=2)
    found = best_actions(eset, pop)
    assert np.all(found.margin <= brute + 1e-9)
    assert np.all(brute - found.margin <= resolution)
    clear = np.abs(found.margin) > resolution
    assert clear.mean() > 0.95
    assert np.array_equal(found.tied[clear], (brute <= 0)[clear])
    # Not vacuous: some units have one best action, some several.
    assert (found.n_tied == 1).any() and (found.n_tied > 1).any() and (~found.tied).any()


def test_hull_of_draws_equals_the_smallest_value_over_the_draws():
    rng = np.random.default_rng(3)
    pop = random_population(rng, 25, 5, 2, 3)
    draws = rng.normal(loc=0.6, scale=0.5, size=(30, 6))
    dset = DrawsSet(draws, VecCoordinates(2, 3), level=0.9)
    brute = oracle_margin(unit_differences(pop, per_state=False), lambda d: float(min(t @ d for t in draws)))
    found = best_actions(dset, pop)
    np.testing.assert_allclose(found.margin, brute, rtol=1e-12, atol=1e-12)
    assert np.array_equal(found.tied, brute <= 0)
    assert (found.n_tied == 1).any() and (found.n_tied > 1).any()
    assert found.joint and found.level == 0.9


def test_cvar_and_quantile_sets_against_their_own_definitions():
    """CVaR at β = 0.2 of 40 draws is the mean of the 8 lowest values; the quantile set is np.quantile at
    1 − level. Both state each exclusion at the level separately (joint False)."""
    rng = np.random.default_rng(4)
    pop = random_population(rng, 20, 4, 2, 2)
    draws = rng.normal(loc=0.5, scale=0.6, size=(40, 4))
    diffs = unit_differences(pop, per_state=False)
    cvar = best_actions(DrawsSet(draws, VecCoordinates(2, 2), kind="cvar", level=0.8, tail=0.2), pop)
    brute = oracle_margin(diffs, lambda d: float(np.sort(draws @ d)[:8].mean()))
    np.testing.assert_allclose(cvar.margin, brute, rtol=1e-12, atol=1e-12)
    quantile = best_actions(QuantileSet(draws, VecCoordinates(2, 2), level=0.8), pop)
    brute = oracle_margin(diffs, lambda d: float(np.quantile(draws @ d, 0.2)))
    np.testing.assert_allclose(quantile.margin, brute, rtol=1e-12, atol=1e-12)
    for found in (cvar, quantile):
        assert not found.joint and found.level == 0.8
        assert (found.n_tied == 1).any() and (found.n_tied > 1).any()
        assert "each exclusion separately" in repr(found)


def test_global_scope_compares_the_states_averaged_rewards():
    rng = np.random.default_rng(5)
    pop = random_population(rng, 12, 4, 2, 3, contexts_per_state=3)
    draws = rng.normal(loc=0.4, scale=0.4, size=(25, 6))
    found = best_actions(DrawsSet(draws, VecCoordinates(2, 3)), pop, scope="global")
    brute = oracle_margin(unit_differences(pop, per_state=True), lambda d: float((draws @ d).min()))
    assert found.tied.shape == (12, 4) and found.scope == "global"
    np.testing.assert_allclose(found.margin, brute, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(found.unit_of_row, pop.states)
    np.testing.assert_array_equal(found.row_tied, found.tied[pop.states])
    assert "state" in found.to_frame().columns


def test_factored_ellipsoid_gives_the_same_decisions(ellipsoid_case, monkeypatch):
    """The set that holds W's pivoted Cholesky factor and not W (EllipsoidSet.factored,
    ``config["factored_min"]`` lowered) decides as the set that holds W."""
    eset, b, pop = ellipsoid_case
    bl.set_config(factored_min=1)
    bl.set_config(cholesky_min=1)
    factored = EllipsoidSet.factored(eset.center, b @ b.T, eset.radius, eset.coordinates, kind="wald",
                                     level=0.9)
    assert factored.precision is None
    whole, from_factor = best_actions(eset, pop), best_actions(factored, pop)
    np.testing.assert_allclose(from_factor.margin, whole.margin, rtol=1e-9, atol=1e-12)
    assert np.array_equal(from_factor.tied, whole.tied)


def test_a_difference_no_comparison_identifies_never_excludes():
    """W singular along the last vec coordinate: actions 0 and 1 differ only there, so neither beats the
    other (the set is a cylinder along null(W)), though the point estimate prefers one of them."""
    coords = VecCoordinates(1, 2)
    eset = EllipsoidSet(np.array([1.0, 5.0]), np.diag([1.0, 0.0]), 0.1, coords, kind="wald", level=0.9)
    features = np.array([[[0.0, 0.0], [0.0, 1.0], [-3.0, 0.0]]])
    found = best_actions(eset, Population(np.ones((1, 1)), features, np.zeros(1, dtype=int)))
    assert found.tied.tolist() == [[True, True, False]]
    assert found.best.tolist() == [1] and found.margin[0, 1] == -np.inf


def test_point_estimate_best_is_tied_and_is_the_argmax_under_the_centre(ellipsoid_case):
    eset, _, pop = ellipsoid_case
    found = best_actions(eset, pop)
    theta = eset.center.reshape(2, 2)
    expected = np.einsum("ix,xp,iap->ia", pop.contexts, theta, pop.features).argmax(axis=1)
    np.testing.assert_array_equal(found.best, expected)
    assert found.tied[np.arange(found.n_units), found.best].all()  # θ̂ lies in the set
    draws = np.random.default_rng(6).normal(size=(20, 4))
    hull = best_actions(DrawsSet(draws, eset.coordinates), pop)
    mean = draws.mean(axis=0).reshape(2, 2)
    np.testing.assert_array_equal(hull.best, np.einsum("ix,xp,iap->ia", pop.contexts, mean,
                                                       pop.features).argmax(axis=1))


class BoxSet:
    """A kind of one's own: the box [c − r, c + r] (lower_bound only, no centre or draws)."""

    def __init__(self, low, high, coordinates):
        self.low, self.high, self.coordinates = low, high, coordinates

    def lower_bound(self, z):
        return np.minimum(z * self.low, z * self.high).sum(axis=-1)


def test_a_set_of_ones_own_against_its_vertices():
    """The box's minimum of θᵀd is at one of its 16 vertices; with no point estimate the best is the
    pessimistic choice, which is tied."""
    rng = np.random.default_rng(8)
    pop = random_population(rng, 30, 4, 2, 2)
    low = rng.normal(size=4)
    high = low + rng.uniform(0.1, 0.6, size=4)
    vertices = np.array([[high[i] if (v >> i) & 1 else low[i] for i in range(4)] for v in range(16)])
    box = BoxSet(low, high, VecCoordinates(2, 2))
    found = best_actions(box, pop)
    brute = oracle_margin(unit_differences(pop, per_state=False), lambda d: float((vertices @ d).min()))
    np.testing.assert_allclose(found.margin, brute, rtol=1e-12, atol=1e-12)
    assert (found.n_tied == 1).any() and (found.n_tied > 1).any()
    assert found.tied[np.arange(found.n_units), found.best].all()
    relative = pop.features - pop.features[:, :1]
    worst = np.array([[(vertices @ np.outer(pop.contexts[i], relative[i, a]).ravel()).min() for a in range(4)]
                      for i in range(pop.n)])
    np.testing.assert_array_equal(found.best, worst.argmax(axis=1))
    assert found.level is None and "'BoxSet' set has no level" in found.level_meaning


@pytest.mark.parametrize("scope", ["personalised", "global"])
def test_blocks_of_units_give_the_same_decisions(scope, monkeypatch):
    """With the block size at one unit (features made, and differences compared, a unit at a time)."""
    rng = np.random.default_rng(10)
    pop = random_population(rng, 15, 4, 2, 3, contexts_per_state=2)
    dset = DrawsSet(rng.normal(loc=0.4, scale=0.4, size=(25, 6)), VecCoordinates(2, 3))
    whole = best_actions(dset, pop, scope=scope)
    bl.set_config(feature_block_bytes=1)
    blocked = best_actions(dset, pop, scope=scope)
    np.testing.assert_array_equal(blocked.margin, whole.margin)
    np.testing.assert_array_equal(blocked.best, whole.best)


def test_guarantee_of_each_kind(ellipsoid_case):
    """What each kind's level promises (docs/design.md's table): joint for sets that cover θ, separate for
    the pointwise quantile and CVaR, none for the penalty ball, and a value-sized set guards values only."""
    from bayes_loco.sets.base import guarantee

    eset, _, pop = ellipsoid_case
    draws = np.random.default_rng(12).normal(size=(20, 4))
    coords = eset.coordinates
    found = {
        "wald": guarantee(eset),
        "gram": guarantee(EllipsoidSet(eset.center, eset.precision, 1.0, coords)),
        "draws": guarantee(DrawsSet(draws, coords, level=0.9)),
        "cvar": guarantee(DrawsSet(draws, coords, kind="cvar", level=0.9, tail=0.1)),
        "quantile": guarantee(QuantileSet(draws, coords, 0.9)),
        "sized": guarantee(bl.sets.size_for_values(eset, pop, scope="personalised", draws=20)),
    }
    assert {name: (g.level, g.joint) for name, g in found.items()} == {
        "wald": (0.9, True), "gram": (None, True), "draws": (0.9, True), "cvar": (0.9, False),
        "quantile": (0.9, False), "sized": (0.9, False)}
    assert found["sized"].sized_for == "personalised" and "does not cover θ" in found["sized"].meaning
    assert "C₂ penalty ball" in found["gram"].meaning and "frequentist" in found["wald"].meaning
    assert "hull holds less posterior mass" in found["draws"].meaning


# ============================================================================ the known truth

PROBLEM = dict(d_s=2, d_a=4, d_x=3, rank=2, seed=0)


def truth_runs(reps: int, n: int, n_units: int, seed0: int, level: float = 0.9):
    """For each seeded data set: whether each fit's Wald set covers θ*, whether every true best action of
    every unit is tied with the best, and the mean number tied."""
    problem = bl.simulate.paper_problem(**PROBLEM)
    pop = problem.population(n_units, seed=2)
    r = problem.rewards(pop)
    true_best = r >= r.max(axis=1, keepdims=True) - 1e-12
    out = {"mle": [], "prs": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        for i in range(reps):
            data = problem.sample(n, seed=seed0 + i)
            for name, fit in (("mle", bl.fit_mle(data)), ("prs", bl.fit_prs(data, 2))):
                found = best_actions(fit, pop, level)
                truth = fit.coordinates.to_coordinates(problem.theta)
                covered = bool(fit.calibrated_set(level).contains(truth))
                out[name].append((covered, bool(found.tied[true_best].all()), found.n_tied.mean()))
    return {name: np.array(rows, dtype=float) for name, rows in out.items()}, problem.d_a


def check_truth(runs, n_actions, level):
    reps = len(runs["mle"])
    tolerance = 3 * np.sqrt(level * (1 - level) / reps)
    for name, rows in runs.items():
        covered, all_best_tied, n_tied = rows[:, 0] > 0, rows[:, 1] > 0, rows[:, 2]
        assert all_best_tied.mean() >= level - tolerance, (name, all_best_tied.mean())
        # Not vacuous: actions are excluded (about 1.3 of 4 per unit).
        assert n_tied.mean() < n_actions - 0.5, (name, n_tied.mean())
        if name == "mle":
            # Vec coordinates hold Θ* exactly: a set that covers θ* can exclude no true best action.
            assert np.all(all_best_tied[covered])
            assert covered.mean() >= level - tolerance, covered.mean()


def test_true_best_actions_are_tied_with_the_best_at_the_level():
    """60 seeded data sets of the paper's simulation (N = 800, 40 units, 4 actions): in at least 90% (less
    3 binomial s.e.) every unit's true best action is tied with the best under the 90% Wald set of the MLE
    and of PRS; for the MLE, whose vec coordinates hold Θ* exactly, in every data set its set covers.
    PRS's RTV coordinates drop Θ*'s block 22 (docs/design.md), so only the rate is checked there."""
    runs, n_actions = truth_runs(60, 800, 40, seed0=100)
    check_truth(runs, n_actions, 0.9)


def test_true_best_actions_at_a_lower_level():
    """At level 0.5 the sets are smaller (more exclusions) and the rate is still at least 0.5."""
    runs, n_actions = truth_runs(40, 800, 40, seed0=300, level=0.5)
    check_truth(runs, n_actions, 0.5)


@pytest.mark.slow
def test_true_best_actions_many_repetitions():
    """400 data sets at N = 2,000 with 200 units: the same statements with a tolerance a third as wide."""
    runs, n_actions = truth_runs(400, 2000, 200, seed0=1000)
    check_truth(runs, n_actions, 0.9)


# ============================================================================ the result


def test_fit_gives_its_calibrated_set(ellipsoid_case):
    problem = bl.simulate.paper_problem(**PROBLEM)
    data, pop = problem.sample(500, seed=7), problem.population(15, seed=8)
    mle = bl.fit_mle(data)
    from_fit = best_actions(mle, pop, 0.95)
    from_set = best_actions(mle.calibrated_set(0.95), pop)
    np.testing.assert_array_equal(from_fit.margin, from_set.margin)
    assert from_fit.level == 0.95
    assert best_actions(mle, pop).level == 0.9
    # A set's own level may be restated.
    assert best_actions(mle.calibrated_set(0.95), pop, 0.95).level == 0.95


def test_frame_and_repr_are_readable(ellipsoid_case):
    eset, _, pop = ellipsoid_case
    names = ["short", "long", "formal", "casual"]
    found = best_actions(eset, pop, action_names=names)
    frame = found.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == pop.n
    assert list(frame.columns) == ["row", "best", "n_tied", "tied_with_best", "tied_indices"]
    for u in range(pop.n):
        indices = np.flatnonzero(found.tied[u]).tolist()
        assert frame["tied_indices"][u] == indices
        assert frame["tied_with_best"][u] == [names[a] for a in indices]
        assert frame["n_tied"][u] == len(indices) and frame["best"][u] == names[found.best[u]]
    text = repr(found)
    assert "level=0.9, simultaneous" in text and f"units={pop.n}" in text
    assert f"a single best action in {int((found.n_tied == 1).sum())} units" in text
    assert isinstance(found, BestActions) and not found.tied.flags.writeable


def test_penalty_ball_has_no_level(ellipsoid_case):
    eset, _, pop = ellipsoid_case
    found = best_actions(EllipsoidSet(eset.center, eset.precision, 0.4, eset.coordinates), pop)
    assert found.level is None and "no level: not calibrated" in repr(found)
    assert "C₂ penalty ball" in found.level_meaning


def test_ties_of_identical_actions_are_kept():
    """Two actions with the same features are tied with each other under any set, even a point (R = 0)."""
    features = np.array([[[0.0, 1.0], [2.0, 1.0], [2.0, 1.0]]])
    pop = Population(np.ones((1, 1)), features, np.zeros(1, dtype=int))
    point = EllipsoidSet(np.array([1.0, 0.0]), np.eye(2), 0.0, VecCoordinates(1, 2))
    found = best_actions(point, pop)
    assert found.tied.tolist() == [[False, True, True]]
    np.testing.assert_allclose(found.margin[0], [2.0, 0.0, 0.0])


# ============================================================================ bad input


@pytest.fixture(scope="module")
def bad_input_case(ellipsoid_case):
    eset, _, pop = ellipsoid_case
    rng = np.random.default_rng(9)
    other_pop = random_population(rng, 5, 4, 3, 2)
    other_set = DrawsSet(rng.normal(size=(10, 6)), VecCoordinates(3, 2), level=0.9)
    return eset, pop, other_pop, other_set


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, np.nan, np.inf])
def test_level_outside_the_unit_interval_is_refused(bad_input_case, level):
    eset, pop, _, _ = bad_input_case
    with pytest.raises(ValueError, match=r"^level must be (in \(0, 1\)|finite), got"):
        best_actions(eset, pop, level)


BAD_INPUT = {
    "population of another dimension": (lambda c: best_actions(c["set"], c["other_pop"]), ValueError,
                                        r"population has \(d_x, d_phi\) = \(3, 2\), but the set's "
                                        r"coordinates live on \(2, 2\)"),
    "set of other coordinates": (lambda c: best_actions(c["other_set"], c["pop"]), ValueError,
                                 r"population has \(d_x, d_phi\) = \(2, 2\), but the set's coordinates "
                                 r"live on \(3, 2\)"),
    "level not the set's": (lambda c: best_actions(c["set"], c["pop"], 0.95), ValueError,
                            r"level=0.95, but the 'wald' set has level 0.9"),
    "level for a penalty": (lambda c: best_actions(EllipsoidSet(c["set"].center, c["set"].precision, 1.0,
                                                                c["set"].coordinates), c["pop"], 0.9),
                            ValueError, r"level=0.9, but the 'gram' set has no level"),
    "level not a number": (lambda c: best_actions(c["set"], c["pop"], level="high"), TypeError,
                           r"level must be a real number, got 'high'"),
    "not a set": (lambda c: best_actions(np.eye(2), c["pop"]), TypeError,
                  r"uncertainty_set must have `coordinates`"),
    "not a population": (lambda c: best_actions(c["set"], c["pop"].features), TypeError,
                         r"population must be a Population, got ndarray"),
    "scope": (lambda c: best_actions(c["set"], c["pop"], scope="user"), ValueError, r"scope"),
    "too few names": (lambda c: best_actions(c["set"], c["pop"], action_names=["a", "b"]), ValueError,
                      r"action_names must name the population's 4 actions with one str each, got 2 names"),
    "repeated names": (lambda c: best_actions(c["set"], c["pop"], action_names=["a", "b", "a", "c"]),
                       ValueError, r"action_names must be distinct: \['a'\] repeat"),
    "names as one str": (lambda c: best_actions(c["set"], c["pop"], action_names="abcd"), TypeError,
                         r"action_names must be a sequence"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_gets_one_clear_error(bad_input_case, case):
    call, exc, match = BAD_INPUT[case]
    eset, pop, other_pop, other_set = bad_input_case
    with pytest.raises(exc, match=match):
        call({"set": eset, "pop": pop, "other_pop": other_pop, "other_set": other_set})


def test_value_sized_set_is_refused():
    problem = bl.simulate.paper_problem(**PROBLEM)
    fit = bl.fit_mle(problem.sample(500, seed=7))
    pop = problem.population(6, seed=1, contexts_per_state=3, context_law="target")
    sized = bl.sets.size_for_values(fit.calibrated_set(0.9), pop, scope="global", draws=50)
    with pytest.raises(ValueError, match=r"sized for the values of global policies \(size_for_values\)"):
        best_actions(sized, pop, scope="global")
