"""Uncertainty sets: the ellipsoid's support function against cvxpy, geometry, Wald radius.

Oracles: cvxpy + Clarabel for min θᵀz over the set, scipy's pseudo-inverse for
the dual norm, scipy.stats.chi2 for the Wald radius, explicit loops for the
coordinate map.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from scipy import linalg, stats

import bayes_loco as bl
from bayes_loco import Coordinates, EllipsoidSet, UncertaintySet, VecCoordinates, wald_set

CLARABEL_TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def random_psd(rng, k, rank=None, ridge=0.0):
    """W = B Bᵀ (+ ridge I) with B of shape (k, rank); returns (W, B)."""
    rank = k if rank is None else rank
    b = rng.normal(size=(k, rank))
    return b @ b.T + ridge * np.eye(k), b


def cvx_support_full(center, w, radius, z):
    """min θᵀz s.t. (θ − θ̂)ᵀ W (θ − θ̂) ≤ R², solved by Clarabel."""
    theta = cp.Variable(center.shape[0])
    prob = cp.Problem(cp.Minimize(z @ theta), [cp.quad_form(theta - center, w) <= radius**2])
    prob.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert prob.status == cp.OPTIMAL
    return prob.value


def cvx_support_range(center, b, radius, z):
    """min θᵀz over θ = θ̂ + Q v with Q an orthonormal basis of range(W = B Bᵀ), ‖Bᵀ Q v‖ ≤ R."""
    q = linalg.orth(b)
    v = cp.Variable(q.shape[1])
    theta = center + q @ v
    prob = cp.Problem(cp.Minimize(z @ theta), [cp.norm(b.T @ (q @ v)) <= radius])
    prob.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert prob.status == cp.OPTIMAL
    return prob.value


# ---------------------------------------------------------------------------- coordinates


def test_vec_coordinates_transform_is_row_major_outer_product():
    rng = np.random.default_rng(0)
    d_x, d_phi, n, a = 3, 4, 5, 2
    coords = VecCoordinates(d_x, d_phi)
    x = rng.normal(size=(n, d_x))
    phi = rng.normal(size=(n, a, d_phi))
    z = coords.transform(x, phi)
    assert coords.dim == d_x * d_phi
    assert z.shape == (n, a, d_x * d_phi)
    for i in range(n):
        for j in range(a):
            expected = [x[i, p] * phi[i, j, q] for p in range(d_x) for q in range(d_phi)]
            np.testing.assert_allclose(z[i, j], expected, rtol=0, atol=1e-14)
    # 2-D features (one action per row) work too
    np.testing.assert_allclose(coords.transform(x, phi[:, 1, :]), z[:, 1, :], rtol=0, atol=1e-14)


def test_vec_coordinates_pair_with_theta_gives_bilinear_reward():
    rng = np.random.default_rng(1)
    d_x, d_phi = 3, 4
    coords = VecCoordinates(d_x, d_phi)
    theta = rng.normal(size=(d_x, d_phi))
    x = rng.normal(size=(6, d_x))
    phi = rng.normal(size=(6, d_phi))
    direct = np.array([x[i] @ theta @ phi[i] for i in range(6)])
    np.testing.assert_allclose(coords.transform(x, phi) @ coords.to_coordinates(theta), direct,
                               rtol=1e-12, atol=1e-12)
    stacked = np.stack([theta, 2 * theta])
    assert coords.to_coordinates(stacked).shape == (2, d_x * d_phi)
    assert isinstance(coords, Coordinates)


# ---------------------------------------------------------------------------- support function


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lower_bound_matches_cvxpy_full_rank(seed):
    rng = np.random.default_rng(seed)
    k = 5
    w, _ = random_psd(rng, k, ridge=0.3)
    center = rng.normal(size=k)
    radius = float(rng.uniform(0.5, 2.0))
    eset = EllipsoidSet(center, w, radius, VecCoordinates(1, k))
    zs = rng.normal(size=(4, k))
    got = eset.lower_bound(zs)
    assert got.shape == (4,)
    for z, value in zip(zs, got, strict=True):
        expected = cvx_support_full(center, w, radius, z)
        assert value == pytest.approx(expected, rel=1e-7, abs=1e-7)
    # the single-vector call agrees with the batch
    assert float(eset.lower_bound(zs[0])) == pytest.approx(got[0], rel=1e-13)
    # and it is strictly below the centre's value whenever R > 0
    assert np.all(got < zs @ center)


def test_lower_bound_is_attained_and_never_beaten_inside_the_set():
    rng = np.random.default_rng(3)
    k = 4
    w, _ = random_psd(rng, k, ridge=0.2)
    center = rng.normal(size=k)
    eset = EllipsoidSet(center, w, 1.5, VecCoordinates(1, k))
    z = rng.normal(size=k)
    # minimiser θ* = θ̂ − R W⁻¹z / ‖z‖_{W⁻¹}, computed with a plain solve
    winv_z = np.linalg.solve(w, z)
    theta_star = center - 1.5 * winv_z / np.sqrt(z @ winv_z)
    assert eset.contains(theta_star)
    assert float(eset.lower_bound(z)) == pytest.approx(theta_star @ z, rel=1e-12, abs=1e-12)
    # random points of the set: θ̂ + R L u, ‖u‖ ≤ 1
    u = rng.normal(size=(500, eset.effective_dim))
    u *= (rng.uniform(size=(500, 1)) ** (1 / u.shape[1])) / np.linalg.norm(u, axis=1, keepdims=True)
    thetas = center + 1.5 * u @ eset.factor.T
    assert np.all(eset.contains(thetas))
    assert np.all(thetas @ z >= float(eset.lower_bound(z)) - 1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_lower_bound_singular_w(seed):
    rng = np.random.default_rng(seed)
    k, r = 6, 3
    w, b = random_psd(rng, k, rank=r)
    center = rng.normal(size=k)
    radius = 0.8
    eset = EllipsoidSet(center, w, radius, VecCoordinates(2, 3))
    assert eset.effective_dim == np.linalg.matrix_rank(w) == r
    # z in range(W): finite and equal to the support function restricted to range(W)
    z_in = b @ rng.normal(size=(3, r)).T
    z_in = z_in.T
    got = eset.lower_bound(z_in)
    assert np.all(np.isfinite(got))
    assert eset.identified(z_in).all()
    for z, value in zip(z_in, got, strict=True):
        assert value == pytest.approx(cvx_support_range(center, b, radius, z), rel=1e-7, abs=1e-7)
    # z with a component along null(W): the cylinder is unbounded, the worst case is −inf
    null = linalg.null_space(b.T)
    z_out = z_in + 1e-3 * null[:, 0]
    assert not eset.identified(z_out).any()
    assert np.all(eset.lower_bound(z_out) == -np.inf)
    # ... and really is unbounded: walk along the null direction inside the set
    theta = center - 1e6 * np.sign(z_out[0] @ null[:, 0]) * null[:, 0]
    assert eset.contains(theta)
    assert theta @ z_out[0] < got[0] - 100
    # rounding-level noise off the range does not count as leaving it
    z_noisy = z_in[0] + 1e-13 * np.linalg.norm(z_in[0]) * null[:, 0]
    assert np.isfinite(eset.lower_bound(z_noisy))


def test_dual_norm_matches_pseudo_inverse():
    rng = np.random.default_rng(6)
    k = 6
    w, b = random_psd(rng, k, rank=4)
    eset = EllipsoidSet(np.zeros(k), w, 1.0, VecCoordinates(2, 3))
    wplus = linalg.pinvh(w)
    zs = (b @ rng.normal(size=(4, 5))).T
    expected = np.sqrt(np.einsum("ni,ij,nj->n", zs, wplus, zs))
    np.testing.assert_allclose(eset.dual_norm(zs), expected, rtol=1e-8)
    # the factor L satisfies L Lᵀ = W⁺ and spans range(W)
    np.testing.assert_allclose(eset.factor @ eset.factor.T, wplus, rtol=1e-7, atol=1e-9)
    assert eset.factor.shape == (k, 4)


def test_zero_rows_of_w_are_set_aside_exactly():
    """W with exactly-zero rows and columns (coordinates no comparison reaches), embedded among full ones:
    k_eff, the factor, the dual norm and the unbounded directions are those of the pseudo-inverse."""
    rng = np.random.default_rng(16)
    inner, _ = random_psd(rng, 4, rank=3)
    live = np.array([0, 2, 3, 5])
    w = np.zeros((6, 6))
    w[np.ix_(live, live)] = inner
    eset = EllipsoidSet(np.zeros(6), w, 1.0, VecCoordinates(2, 3))
    assert eset.effective_dim == 3
    np.testing.assert_allclose(eset.factor @ eset.factor.T, linalg.pinvh(w), rtol=1e-7, atol=1e-9)
    assert np.abs(eset.factor[[1, 4]]).max() == 0.0
    zs = rng.normal(size=(5, 6)) @ w
    np.testing.assert_allclose(eset.dual_norm(zs), np.sqrt(np.einsum("ni,ij,nj->n", zs, linalg.pinvh(w), zs)),
                               rtol=1e-8)
    assert not eset.identified(np.eye(6)[[1, 4]]).any()
    with pytest.raises(ValueError, match="positive semi-definite"):
        EllipsoidSet(np.zeros(6), -w, 1.0, VecCoordinates(2, 3))


@pytest.mark.parametrize("rank", [12, 8])
def test_cholesky_path_gives_the_eigh_set(monkeypatch, rank):
    """A large W (here ``config["cholesky_min"]`` lowered to 1) is factorised by pivoted Cholesky: the same
    k_eff, dual norms, L Lᵀ = W⁺, lower bounds, unidentified directions and exact policy as the
    eigendecomposition, for a definite W (rank 12) and a singular one (rank 8)."""

    rng = np.random.default_rng(21)
    w, b = random_psd(rng, 12, rank=rank, ridge=0.5 if rank == 12 else 0.0)
    center = rng.normal(size=12)
    z = rng.normal(size=(7, 3, 12)) @ w  # in range(W)
    eigh_set = EllipsoidSet(center, w, 1.3, VecCoordinates(3, 4))
    bl.set_config(cholesky_min=1)
    chol_set = EllipsoidSet(center, w, 1.3, VecCoordinates(3, 4))
    assert chol_set._cholesky is not None and eigh_set._cholesky is None
    assert chol_set.effective_dim == eigh_set.effective_dim == rank
    np.testing.assert_allclose(chol_set.dual_norm(z), eigh_set.dual_norm(z), rtol=1e-9)
    np.testing.assert_allclose(chol_set.lower_bound(z), eigh_set.lower_bound(z), rtol=1e-9)
    np.testing.assert_allclose(chol_set.factor @ chol_set.factor.T, linalg.pinvh(w), rtol=1e-8, atol=1e-10)
    assert chol_set.factor.shape == (12, rank)
    assert chol_set.identified(z).all()
    # whitened: (Lᵀz₁)ᵀ(Lᵀz₂) = z₁ᵀW⁺z₂ on both paths, written into ``out`` when given
    flat = z.reshape(-1, 12)
    for eset in (eigh_set, chol_set):
        white, inside = eset.whitened(flat)
        assert white.shape == (21, rank) and inside.all()
        np.testing.assert_allclose(white @ white.T, flat @ linalg.pinvh(w) @ flat.T, rtol=1e-7, atol=1e-9)
        out = np.empty((21, rank))
        eset.whitened(flat, out)
        np.testing.assert_allclose(out, white)
    if rank < 12:  # a small component along null(W) leaves the range for both
        off = z + 1e-3 * np.linalg.norm(z, axis=-1, keepdims=True) * linalg.null_space(b.T)[:, 0]
        assert not chol_set.identified(off).any() and not eigh_set.identified(off).any()
        assert not chol_set.whitened(off)[1].any() and not eigh_set.whitened(off)[1].any()
    else:
        exact = np.linalg.cond(w)
        assert exact / 12 <= chol_set.condition_number <= 12 * exact
    # With W singular most candidates leave range(W): both factorisations must give them probability 0.
    _assert_same_exact_policy(eigh_set, chol_set, rng)


def test_cholesky_path_sets_aside_zero_rows_and_refuses_an_indefinite_w(monkeypatch):

    bl.set_config(cholesky_min=1)
    rng = np.random.default_rng(22)
    inner, _ = random_psd(rng, 4, rank=3)
    w = np.zeros((6, 6))
    w[np.ix_([0, 2, 3, 5], [0, 2, 3, 5])] = inner
    eset = EllipsoidSet(np.zeros(6), w, 1.0, VecCoordinates(2, 3))
    assert eset._cholesky is not None and eset.effective_dim == 3
    np.testing.assert_allclose(eset.factor @ eset.factor.T, linalg.pinvh(w), rtol=1e-7, atol=1e-9)
    assert not eset.identified(np.eye(6)[[1, 4]]).any()
    with pytest.raises(ValueError, match="positive semi-definite"):
        EllipsoidSet(np.zeros(3), np.diag([2.0, 1.0, -1.0]), 1.0, VecCoordinates(1, 3))
    ill = np.diag(np.r_[np.ones(10), 1e-9, 1e-12])  # 1e-9 is kept by the 1e-10 rule, but rcond ≈ 1e-9
    ill_set = EllipsoidSet(np.zeros(12), ill, 1.0, VecCoordinates(3, 4))
    assert ill_set._cholesky is None and ill_set.effective_dim == 11


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(("rank", "zero_row"), [(12, False), (8, False), (8, True)])
def test_factored_set_holds_only_the_factor_and_is_the_same_set(monkeypatch, rank, zero_row, order):
    """EllipsoidSet.factored (``config["factored_min"]`` lowered to 1) factorises W in W's own memory, C- or
    Fortran-ordered (a fit's information is Fortran-ordered), and keeps no W: the same k_eff, dual norms,
    lower bounds, distances (a singular W's Schur complement is ~0) and exact policy as the set that keeps
    W, for a definite W, a singular one and one with a zero row (factorised on a copy of its live block)."""

    rng = np.random.default_rng(23)
    w, _ = random_psd(rng, 12, rank=rank, ridge=0.5 if rank == 12 else 0.0)
    if zero_row:
        w[5], w[:, 5] = 0.0, 0.0
    center = rng.normal(size=12)
    z = rng.normal(size=(7, 3, 12)) @ w
    kept = EllipsoidSet(center, w, 1.3, VecCoordinates(3, 4), kind="wald", level=0.9)
    bl.set_config(factored_min=1)
    given = np.array(w, order=order)
    factored = EllipsoidSet.factored(center, given, 1.3, VecCoordinates(3, 4), kind="wald", level=0.9)
    assert factored.precision is None and (factored.kind, factored.level) == ("wald", 0.9)
    assert np.shares_memory(factored._cholesky.lead, given) != zero_row  # in place unless a block was copied
    assert factored.effective_dim == kept.effective_dim == np.linalg.matrix_rank(w)
    np.testing.assert_allclose(factored.dual_norm(z), kept.dual_norm(z), rtol=1e-9)
    np.testing.assert_allclose(factored.lower_bound(z), kept.lower_bound(z), rtol=1e-9)
    theta = center + rng.normal(size=(5, 12))
    np.testing.assert_allclose(factored.distance(theta), kept.distance(theta), rtol=1e-8)
    np.testing.assert_array_equal(factored.contains(theta), kept.contains(theta))
    wider = factored.with_radius(2.0)
    assert wider.precision is None and wider._cholesky is factored._cholesky
    _assert_same_exact_policy(kept, factored, rng)


def _assert_same_exact_policy(reference, other, rng):
    """The exact policy of two descriptions of one set (on VecCoordinates(3, 4)) over a random population."""
    population = bl.Population(rng.uniform(-1, 1, (30, 3)), rng.normal(size=(30, 5, 4)), np.arange(30))
    policies = [bl.pessimistic_policy(s, population, objective="exact") for s in (reference, other)]
    np.testing.assert_allclose(policies[1].probabilities, policies[0].probabilities, atol=1e-6)
    np.testing.assert_allclose(policies[1].pessimistic_value, policies[0].pessimistic_value, rtol=1e-7,
                               atol=1e-12)


def test_factored_set_refusals(monkeypatch):
    """Below ``config["factored_min"]`` the set keeps W; unknown fields, a mismatched W, no usable factor and
    a set built with precision=None are refused with the argument named."""

    rng = np.random.default_rng(24)
    w, _ = random_psd(rng, 6, ridge=0.1)
    small = EllipsoidSet.factored(np.zeros(6), w, 1.0, VecCoordinates(2, 3))
    assert small.precision is w
    bl.set_config(factored_min=1)
    with pytest.raises(TypeError, match="factored takes kind, level"):
        EllipsoidSet.factored(np.zeros(6), w.copy(), 1.0, VecCoordinates(2, 3), sized=True)
    with pytest.raises(ValueError, match=r"precision \(W\) must have shape \(6, 6\)"):
        EllipsoidSet.factored(np.zeros(6), w[:5, :5].copy(), 1.0, VecCoordinates(2, 3))
    with pytest.raises(ValueError, match="radius"):
        EllipsoidSet.factored(np.zeros(6), w.copy(), -1.0, VecCoordinates(2, 3))
    ill = np.diag(np.r_[np.ones(4), 1e-9, 1e-12])
    with pytest.raises(np.linalg.LinAlgError, match="no usable pivoted Cholesky factor"):
        EllipsoidSet.factored(np.zeros(6), ill, 1.0, VecCoordinates(2, 3))
    with pytest.raises(TypeError, match=r"precision \(W\) must be a \(6, 6\) array"):
        EllipsoidSet(np.zeros(6), None, 1.0, VecCoordinates(2, 3))


def test_zero_vector_has_zero_lower_bound():
    rng = np.random.default_rng(7)
    w, _ = random_psd(rng, 4, rank=2)
    eset = EllipsoidSet(rng.normal(size=4), w, 2.0, VecCoordinates(2, 2))
    assert eset.lower_bound(np.zeros(4)) == 0.0
    assert eset.lower_bound(np.zeros((3, 4))).tolist() == [0.0, 0.0, 0.0]


def test_radius_zero_is_the_centre_for_full_rank_w():
    rng = np.random.default_rng(8)
    w, _ = random_psd(rng, 4, ridge=0.1)
    center = rng.normal(size=4)
    eset = EllipsoidSet(center, w, 0.0, VecCoordinates(2, 2))
    zs = rng.normal(size=(5, 4))
    np.testing.assert_allclose(eset.lower_bound(zs), zs @ center, rtol=1e-14, atol=1e-14)
    assert eset.contains(center)
    assert not eset.contains(center + 1e-6)


def random_ellipsoid(seed, radius, **psd):
    """An ellipsoid in k = 4 vec coordinates (2 × 2) with W from :func:`random_psd`; returns (set, B, rng)."""
    rng = np.random.default_rng(seed)
    w, b = random_psd(rng, 4, **psd)
    return EllipsoidSet(rng.normal(size=4), w, radius, VecCoordinates(2, 2)), b, rng


def test_radius_zero_singular_w_is_consistent_with_contains():
    eset, b, rng = random_ellipsoid(9, 0.0, rank=2)
    k, center = eset.dim, eset.center
    null = linalg.null_space(b.T)[:, 0]
    z = rng.normal(size=k)
    assert abs(z @ null) > 1e-3
    theta = center - 10.0 * np.sign(z @ null) * null  # in the set: distance 0 ≤ R = 0
    assert eset.contains(theta)
    # a lower bound on θᵀz over the set cannot exceed θᵀz at a member of the set
    assert float(eset.lower_bound(z)) <= theta @ z


# ---------------------------------------------------------------------------- geometry


@pytest.mark.parametrize("rank", [5, 3])
def test_factor_maps_unit_sphere_to_boundary(rank):
    rng = np.random.default_rng(10 + rank)
    k = 5
    w, _ = random_psd(rng, k, rank=rank)
    center = rng.normal(size=k)
    radius = 1.7
    eset = EllipsoidSet(center, w, radius, VecCoordinates(1, k))
    u = rng.normal(size=(20, eset.effective_dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    boundary = center + radius * u @ eset.factor.T
    # distance computed directly from W
    d = boundary - center
    direct = np.sqrt(np.einsum("ni,ij,nj->n", d, w, d))
    np.testing.assert_allclose(direct, radius, rtol=1e-9)
    np.testing.assert_allclose(eset.distance(boundary), radius, rtol=1e-9)
    assert np.all(eset.contains(center + 0.99 * radius * u @ eset.factor.T))
    assert not np.any(eset.contains(center + 1.01 * radius * u @ eset.factor.T))


def test_distance_and_contains_agree_with_the_quadratic_form():
    eset, _, rng = random_ellipsoid(12, 1.0, ridge=0.5)
    k, center, w = eset.dim, eset.center, eset.precision
    thetas = center + rng.normal(scale=0.6, size=(200, k))
    quad = np.array([(t - center) @ w @ (t - center) for t in thetas])
    np.testing.assert_allclose(eset.distance(thetas), np.sqrt(quad), rtol=1e-12)
    inside = eset.contains(thetas)
    np.testing.assert_array_equal(inside, quad <= 1.0)
    assert inside.any() and not inside.all()
    assert eset.distance(center) == 0.0


# ---------------------------------------------------------------------------- Wald set


@pytest.mark.parametrize(("rank", "level"), [(4, 0.9), (2, 0.5), (4, 0.99)])
def test_wald_radius_is_chi2_quantile_on_the_rank(rank, level):
    rng = np.random.default_rng(20 + rank)
    k = 4
    info, _ = random_psd(rng, k, rank=rank)
    center = rng.normal(size=k)
    coords = VecCoordinates(2, 2)
    eset = wald_set(center, info, level, coords)
    assert eset.effective_dim == np.linalg.matrix_rank(info) == rank
    assert eset.radius**2 == pytest.approx(stats.chi2.ppf(level, rank), rel=1e-12)
    assert eset.kind == "wald"
    assert eset.level == level
    assert eset.coordinates is coords
    np.testing.assert_array_equal(eset.center, center)
    np.testing.assert_array_equal(eset.precision, info)


def test_wald_set_coverage_for_a_gaussian_estimate():
    """θ̂ ~ N(θ, I⁻¹) exactly: the set built at θ̂ covers θ with the nominal frequency."""
    rng = np.random.default_rng(30)
    k = 3
    info, _ = random_psd(rng, k, ridge=0.5)
    chol = np.linalg.cholesky(np.linalg.inv(info))
    truth = rng.normal(size=k)
    n_rep = 4000
    centers = truth + rng.normal(size=(n_rep, k)) @ chol.T
    covered = np.array([wald_set(c, info, 0.8, VecCoordinates(1, k)).contains(truth) for c in centers])
    # binomial sd at p = 0.8, n = 4000 is 0.0063: ±0.03 is about 5 sd
    assert abs(covered.mean() - 0.8) < 0.03


# ---------------------------------------------------------------------------- validation


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        EllipsoidSet(np.zeros(3), np.eye(4), 1.0, VecCoordinates(1, 3))
    with pytest.raises(ValueError, match="shape"):
        EllipsoidSet(np.zeros(3), np.eye(3)[:2], 1.0, VecCoordinates(1, 3))


@pytest.mark.parametrize("radius", [-0.1, np.nan, np.inf])
def test_bad_radius_raises(radius):
    with pytest.raises(ValueError, match="radius"):
        EllipsoidSet(np.zeros(2), np.eye(2), radius, VecCoordinates(1, 2))


def test_indefinite_shape_raises():
    with pytest.raises(ValueError):
        EllipsoidSet(np.zeros(2), np.diag([1.0, -1.0]), 1.0, VecCoordinates(1, 2))


def test_ellipsoid_satisfies_the_protocol_and_repr_names_its_kind():
    eset = wald_set(np.zeros(2), np.diag([1.0, 0.0]), 0.9, VecCoordinates(1, 2))
    assert isinstance(eset, UncertaintySet)
    text = repr(eset)
    assert "wald" in text and "k_eff=1" in text and "level=0.9" in text
    assert not isinstance(object(), UncertaintySet)


def test_coordinate_widths_are_the_pseudo_inverse_standard_errors():
    rng = np.random.default_rng(31)
    a, _ = random_psd(rng, 2, ridge=0.3)
    w = np.zeros((4, 4))
    w[:2, :2] = a  # no comparison reaches coordinates 2 and 3
    widths = EllipsoidSet(rng.normal(size=4), w, 1.0, VecCoordinates(2, 2)).coordinate_widths()
    np.testing.assert_allclose(widths[:2], np.sqrt(np.diag(np.linalg.inv(a))), rtol=1e-10)
    assert np.isinf(widths[2:]).all()
    full, _, _ = random_ellipsoid(32, 1.0, ridge=0.5)
    np.testing.assert_allclose(full.coordinate_widths(), np.sqrt(np.diag(np.linalg.inv(full.precision))),
                               rtol=1e-10)


def test_with_radius_shares_the_factorisation_and_checks_its_arguments():
    rng = np.random.default_rng(23)
    w, _ = random_psd(rng, 6, rank=4)
    base = EllipsoidSet(rng.normal(size=6), w, 1.0, VecCoordinates(2, 3), kind="wald", level=0.9)
    factor = base.factor
    grown = base.with_radius(2.5, level=0.95)
    assert grown.radius == 2.5 and grown.level == 0.95 and grown.kind == "wald" and base.radius == 1.0
    assert grown.factor is factor and grown.effective_dim == 4
    z = rng.normal(size=(3, 6)) @ w
    np.testing.assert_allclose(grown.lower_bound(z), z @ base.center - 2.5 * base.dual_norm(z), rtol=1e-12)
    with pytest.raises(ValueError, match=r"^radius must be finite"):
        base.with_radius(-1.0)
    with pytest.raises(TypeError, match=r"changes only level, sized_for and sizing, got \['center'\]"):
        base.with_radius(1.0, center=np.zeros(6))
