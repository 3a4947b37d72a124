"""linalg.py (range rules, pivoted Cholesky), design.py (information, candidate features), solvers/ and the
set constructors and capability protocols, each against an independent computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import repeated_rows
from scipy import linalg as sla
from scipy import stats

import bayes_loco as bl
from bayes_loco import design, linalg
from bayes_loco.coordinates import VecCoordinates
from bayes_loco.sets import BlockwiseSet, ExactProblem, NashSet
from bayes_loco.sets.base import reads_feature_blocks
from bayes_loco.solvers import SOLVERS
from bayes_loco.solvers.exact import solve_reduced


def _psd(seed: int, k: int, rank: int) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((k, rank))
    return a @ a.T


def _data(seed: int, d_x: int, d_phi: int, n: int = 80, zero_context: int | None = None) -> bl.PreferenceData:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d_x))
    if zero_context is not None:
        x[:, zero_context] = 0.0  # a context coordinate no comparison reaches
    return bl.PreferenceData(x, rng.standard_normal((n, d_phi)), rng.integers(0, 2, n))


# ---------------------------------------------------------------------------------------- linalg


def test_range_mask_keeps_eigenvalues_above_the_relative_tolerance():
    vals = np.array([0.0, 1e-11, 1e-9, 0.5, 1.0])
    np.testing.assert_array_equal(linalg.range_mask(vals), [False, False, True, True, True])
    np.testing.assert_array_equal(linalg.range_mask(vals, rtol=0.6), [False, False, False, False, True])
    assert linalg.range_mask(np.zeros(0)).shape == (0,)
    # the numerical rank of a PSD matrix of known rank, as numpy counts it
    w = _psd(0, 12, 5)
    assert linalg.range_mask(np.linalg.eigvalsh(w)).sum() == np.linalg.matrix_rank(w) == 5


def test_in_range_is_the_relative_distance_to_the_range():
    q = np.linalg.qr(np.random.default_rng(1).standard_normal((6, 3)))[0]
    inside = q @ np.array([1.0, -2.0, 0.5])
    normal = np.linalg.svd(q, full_matrices=True)[0][:, 3]  # orthogonal to range(q)
    for scale, expected in ((0.0, True), (0.5e-6, True), (2e-6, False), (1e-3, False)):
        z = inside + scale * np.linalg.norm(inside) * normal
        outside = z - q @ (q.T @ z)
        assert bool(linalg.in_range(z @ z, outside @ outside)) is expected


def test_range_basis_spans_the_rows_and_their_complement():
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((20, 3)) @ rng.standard_normal((3, 7))
    span, null = linalg.range_basis(rows)
    assert span.shape == (7, 3) and null.shape == (7, 4)
    orth = sla.orth(rows.T)  # scipy's SVD basis of the row space
    np.testing.assert_allclose(span @ span.T, orth @ orth.T, atol=1e-10)
    np.testing.assert_allclose(span @ span.T + null @ null.T, np.eye(7), atol=1e-12)


@pytest.mark.parametrize(("n", "d", "true", "at_most"),
                         [(50, 7, 3, 7), (50, 7, 3, 2), (60, 400, 5, 8), (60, 400, 5, 5), (60, 400, 5, 3),
                          (30, 400, 30, 40), (40, 6, 6, 6)])
def test_span_dimension_is_numpy_s_matrix_rank_capped(n, d, true, at_most):
    """The (sketched, where at_most < d) count against np.linalg.matrix_rank's SVD of the whole matrix."""
    rng = np.random.default_rng(n + d + true)
    rows = rng.standard_normal((n, true)) @ rng.standard_normal((true, d))
    assert linalg.span_dimension(rows, at_most) == min(np.linalg.matrix_rank(rows), at_most)


def test_span_dimension_counts_one_hot_differences_as_d_a_minus_one():
    """Differences of one-hot actions span d_a − 1 dimensions, the all-ones direction never reached."""
    rng = np.random.default_rng(4)
    pairs = rng.integers(0, 6, (200, 2))
    diffs = np.eye(6)[pairs[:, 1]] - np.eye(6)[pairs[:, 0]]
    assert linalg.span_dimension(diffs, 6) == 5 and linalg.span_dimension(diffs, 4) == 4
    assert linalg.span_dimension(np.zeros((5, 3)), 3) == 0


@pytest.mark.parametrize(("k", "rank", "dead"), [(9, 9, 0), (9, 5, 0), (10, 4, 3)])
def test_pivoted_cholesky_factor_is_the_pseudo_inverse(k, rank, dead):
    """L Lᵀ = W⁺ (numpy's pinv), ‖z‖_{W⁺} and range membership from the whitened z, ‖d‖_W from ``norm``."""
    w = np.zeros((k, k))
    w[dead:, dead:] = _psd(4, k - dead, rank)
    live = linalg.live_coordinates(w)
    np.testing.assert_array_equal(live, np.arange(dead, k))
    pivoted = linalg.pivoted_cholesky(w, live, overwrite=False)
    assert pivoted is not None and pivoted.rank == rank
    factor = pivoted.factor(k)
    pinv = np.linalg.pinv(w, rcond=1e-10, hermitian=True)
    np.testing.assert_allclose(factor @ factor.T, pinv, rtol=1e-8, atol=1e-8 * np.abs(pinv).max())
    rng = np.random.default_rng(5)
    inside = rng.standard_normal((4, k)) @ w
    norms, ok = pivoted.split(inside)
    assert ok.all()
    np.testing.assert_allclose(norms, np.sqrt(np.einsum("ij,jk,ik->i", inside, pinv, inside)), rtol=1e-8)
    if rank < k:
        assert not pivoted.split(inside + rng.standard_normal((4, k)))[1].any()
    d = rng.standard_normal((3, k))
    np.testing.assert_allclose(pivoted.norm(d), np.sqrt(np.einsum("ij,jk,ik->i", d, w, d)), rtol=1e-8)
    np.testing.assert_allclose(linalg.row_norms(d), np.linalg.norm(d, axis=1), rtol=1e-15)


def test_pivoted_cholesky_refuses_a_zero_or_indefinite_matrix():
    assert linalg.pivoted_cholesky(np.zeros((4, 4)), np.arange(0), overwrite=False) is None
    w = _psd(6, 6, 3)
    w[5, 5] -= 50.0  # the Schur complement beyond the kept block is then negative
    with pytest.raises(ValueError, match="positive semi-definite"):
        linalg.pivoted_cholesky(w, np.arange(6), overwrite=False)


# ---------------------------------------------------------------------------------------- design


class _Plain:
    """vec(Θ) coordinates that are not a VecCoordinates: information's generic (blocked, paneled) path."""

    def __init__(self, d_x, d_phi):
        self.inner = VecCoordinates(d_x, d_phi)
        self.d_x, self.d_phi, self.dim = d_x, d_phi, d_x * d_phi

    def transform(self, contexts, features):
        return self.inner.transform(contexts, features)

    def to_coordinates(self, theta):
        return self.inner.to_coordinates(theta)

    def labels(self):
        return self.inner.labels()


@pytest.mark.parametrize(("gram_panel", "block_rows"), [(2048, 80), (4, 7), (1, 80)])
def test_information_in_any_coordinates_is_the_weighted_sum_over_rows(gram_panel, block_rows, monkeypatch):
    data = _data(7, 4, 3, zero_context=1)
    w = np.random.default_rng(8).uniform(0, 2, data.n)
    z = np.stack([np.outer(x, f).ravel() for x, f in zip(data.contexts, data.differences, strict=True)])
    expected = np.einsum("t,ti,tj->ij", w, z, z)  # Σ_t w_t z_t z_tᵀ, row by row
    bl.set_config(gram_panel=gram_panel)
    bl.set_config(design_block_bytes=8 * 12 * block_rows)
    for coordinates in (VecCoordinates(4, 3), _Plain(4, 3)):
        got = design.information(coordinates, data, w)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # dsyrk's upper triangle, mirrored: exactly symmetric (vec(Θ) with weights is a general product,
    # the MLE's rounding, symmetric to rounding)
    generic = design.information(_Plain(4, 3), data, w)
    np.testing.assert_array_equal(generic, generic.T)
    # off the support (context 1 is never nonzero) the vec(Θ) information is exactly zero
    vec = design.information(VecCoordinates(4, 3), data)
    np.testing.assert_array_equal(vec, vec.T)
    assert not vec[3:6].any() and not vec[:, 3:6].any()
    np.testing.assert_allclose(design.gram_rows(z, w), expected, rtol=1e-12)
    np.testing.assert_allclose(design.gram_rows(z), z.T @ z, rtol=1e-15)


def test_identified_directions_span_the_designs_rows_without_forming_them():
    data = _data(9, 4, 3, zero_context=2)
    basis = bl.rtv_basis(np.random.default_rng(10).standard_normal((4, 3)), 1)
    p = design.identified_directions(basis, data)
    rows = design.design(basis, data)
    orth = sla.orth(rows.T)
    assert p.shape == orth.shape
    np.testing.assert_allclose(p @ p.T, orth @ orth.T, atol=1e-9)
    np.testing.assert_allclose(p.T @ p, np.eye(p.shape[1]), atol=1e-12)


def test_mean_candidate_features_average_each_units_rows():
    rng = np.random.default_rng(11)
    n, n_actions, d_x, d_phi = 9, 3, 2, 4
    pop = bl.Population(rng.standard_normal((n, d_x)), rng.standard_normal((n, n_actions, d_phi)),
                        np.array([0, 1, 2, 0, 1, 2, 0, 0, 1]))
    wald = bl.EllipsoidSet(np.zeros(d_x * d_phi), np.eye(d_x * d_phi), 1.0, VecCoordinates(d_x, d_phi))
    for reference, scope in itertools.product((0, 2), ("global", "personalised")):
        units = pop.units(scope)
        got = design.mean_candidate_features(wald, pop, units, reference)
        for u in range(units.n):
            rows = np.flatnonzero(units.of_row == u)
            for a in range(n_actions):
                diff = pop.features[rows, a] - pop.features[rows, reference]
                each = [np.outer(pop.contexts[i], diff[j]).ravel() for j, i in enumerate(rows)]
                expected = np.mean(each, axis=0)
                np.testing.assert_allclose(got[u, a], expected, rtol=1e-12, atol=1e-14)
    elsewhere = bl.Population(pop.contexts, rng.standard_normal((n, n_actions, d_phi + 1)), pop.states)
    with pytest.raises(ValueError, match=r"population has \(d_x, d_phi\) = \(2, 5\), but the set's"):
        design.candidate_features(wald, elsewhere)


def test_penalty_and_wald_constructors():
    coordinates = VecCoordinates(2, 3)
    w = _psd(12, 6, 4)
    penalty = bl.EllipsoidSet.penalty(np.ones(6), w, 150, coordinates, c2=5.0)
    assert penalty.kind == "gram" and penalty.level is None
    assert penalty.radius == pytest.approx(5.0 * np.sqrt(6 / 150), rel=1e-15)
    assert bl.sets.penalty_ellipsoid(np.ones(6), w, 150, coordinates, 5.0).radius == penalty.radius
    wald = bl.EllipsoidSet.wald(np.ones(6), w, 0.9, coordinates)
    assert wald.kind == "wald" and wald.level == 0.9 and wald.effective_dim == 4
    assert wald.radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.9, 4)), rel=1e-12)
    assert bl.wald_set(np.ones(6), w, 0.9, coordinates).radius == wald.radius
    with pytest.raises(ValueError, match="c2"):
        bl.EllipsoidSet.penalty(np.ones(6), w, 150, coordinates, c2=-1.0)


def test_capabilities_are_declared_protocol_members():
    coordinates = VecCoordinates(1, 2)
    ellipsoid = bl.EllipsoidSet(np.zeros(2), np.eye(2), 1.0, coordinates)
    draws = bl.DrawsSet(np.random.default_rng(13).standard_normal((5, 2)), coordinates)
    quantile = bl.QuantileSet(np.random.default_rng(14).standard_normal((50, 2)), coordinates, 0.9)
    assert isinstance(ellipsoid, BlockwiseSet) and reads_feature_blocks(ellipsoid)
    assert not reads_feature_blocks(draws) and not reads_feature_blocks(quantile)
    assert isinstance(draws, NashSet) and not isinstance(ellipsoid, NashSet)

    class Refusing(bl.EllipsoidSet):
        accepts_feature_blocks = False

    assert not reads_feature_blocks(Refusing(np.zeros(2), np.eye(2), 1.0, coordinates))


@pytest.mark.parametrize("weights", [np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])])
def test_exact_solver_matches_a_brute_force_search_over_the_disc(weights):
    """k = 2: min over θ = θ̂ + R L u, ‖u‖ ≤ 1, of V(θ) = Σ_u w_u max_a θᵀz_ua on a grid of spacing h in u.
    V is Lipschitz in u with constant Λ = Σ_u w_u max_a ‖R Lᵀz_ua‖, so the grid's minimum is within Λh of
    the true one, which the certificate must bracket."""
    rng = np.random.default_rng(15)
    z = rng.standard_normal((weights.size, 3, 2))
    z[:, 0] = 0.0  # the reference action
    ellipsoid = bl.EllipsoidSet(np.array([0.4, -0.2]), np.array([[2.0, 0.3], [0.3, 0.5]]), 1.5,
                                VecCoordinates(1, 2))
    solution = ellipsoid.solve_exact(ExactProblem(z, weights, tol=1e-8, solver=SOLVERS["auto"]))
    h = 1.0 / 500
    grid = np.stack(np.meshgrid(np.arange(-1, 1 + h, h), np.arange(-1, 1 + h, h)), axis=-1).reshape(-1, 2)
    u = grid[np.einsum("ij,ij->i", grid, grid) <= 1.0]
    thetas = ellipsoid.center + ellipsoid.radius * u @ ellipsoid.factor.T
    values = (weights * np.einsum("tk,uak->tua", thetas, z).max(axis=2)).sum(axis=1)
    g = ellipsoid.radius * z @ ellipsoid.factor
    slack = float(weights @ np.linalg.norm(g, axis=2).max(axis=1)) * h
    cert = solution.certificate
    assert cert.lower <= values.min() + 1e-12
    assert cert.upper >= values.min() - slack
    assert cert.upper - cert.lower <= 1e-6 * max(1.0, abs(cert.upper))
    assert ellipsoid.contains(solution.theta)


def test_the_ellipsoids_minimax_solver_is_named_by_the_problem():
    """The set calls the solver its ExactProblem names (the policy layer chooses it); a problem naming none is
    refused with one TypeError that says what to pass. Each registered solver certifies the same optimum."""
    ellipsoid = bl.EllipsoidSet(np.zeros(2), np.eye(2), 1.0, VecCoordinates(1, 2))
    z = np.random.default_rng(16).standard_normal((2, 2, 2))
    problem = ExactProblem(z, np.array([0.5, 0.5]))
    with pytest.raises(TypeError, match=r"problem.solver is None.*SOLVERS\['auto'\]"):
        ellipsoid.solve_exact(problem)
    assert SOLVERS["auto"] is solve_reduced and set(SOLVERS) == {"auto", "newton", "first-order"}
    values = [ellipsoid.solve_exact(ExactProblem(z, np.array([0.5, 0.5]), tol=1e-6, solver=SOLVERS[name]))
              .certificate for name in SOLVERS]
    for cert in values:
        assert cert.lower <= values[0].upper + 1e-9 and values[0].lower <= cert.upper + 1e-9


def test_canonical_signs_undo_lapack_s_choice_of_sign():
    rng = np.random.default_rng(0)
    vecs = np.linalg.qr(rng.normal(size=(6, 4)))[0]
    flips = np.array([1.0, -1.0, -1.0, 1.0])
    a, b = linalg.canonical_signs(vecs), linalg.canonical_signs(vecs * flips)
    np.testing.assert_array_equal(a, b)
    top = np.abs(a).argmax(axis=0)
    assert (a[top, np.arange(4)] > 0).all()
    assert linalg.canonical_signs(np.zeros((3, 0))).shape == (3, 0)


def test_a_wald_set_s_eigenvectors_follow_the_sign_rule():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(30, 5))
    ellipsoid = bl.EllipsoidSet(np.zeros(5), a.T @ a, 2.0, VecCoordinates(1, 5))
    vecs = ellipsoid._eigen[1]
    top = np.abs(vecs).argmax(axis=0)
    assert (vecs[top, np.arange(vecs.shape[1])] > 0).all()


def test_information_without_weights_is_the_gram_matrix_of_the_comparisons_counted_rows_are():
    data = bl.simulate.paper_problem(rank=2, imbalance=3, theta_kind="paper").sample(300, seed=2)
    f = 1 + np.arange(data.n) % 3
    counted = bl.PreferenceData(data.contexts, data.differences, data.labels, counts=f.astype(float))
    expanded = repeated_rows(data, f)
    rtv = bl.fit_low_rank(data, 2, ridge=1.0).coordinates
    for coordinates in (VecCoordinates(data.d_x, data.d_phi), rtv):
        w = design.information(coordinates, counted)
        np.testing.assert_allclose(w, design.information(coordinates, expanded), rtol=1e-10,
                                   atol=1e-10 * np.abs(w).max())
        # Weights given are taken as given: the rows' own Σ w_t z_t z_tᵀ, counts not applied twice.
        np.testing.assert_allclose(design.information(coordinates, counted, np.ones(data.n)),
                                   design.information(coordinates, data), rtol=1e-12,
                                   atol=1e-12 * np.abs(w).max())
