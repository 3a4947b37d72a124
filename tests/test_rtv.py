"""Rotation–truncation–vectorization: the coordinate identity, round trips and invariances."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import Coordinates, RTVBasis, rtv_basis
from bayes_loco.coordinates import manifold_dim

SHAPES = [(4, 5, 1), (4, 5, 2), (6, 3, 2), (5, 5, 5), (20, 29, 3)]


def _low_rank(rng, d_x, d_phi, r, spread=(3.0, 2.0, 1.5, 1.0, 0.5)):
    """A rank-r matrix with distinct singular values, so its SVD is unique up to signs."""
    u, _ = np.linalg.qr(rng.standard_normal((d_x, r)))
    v, _ = np.linalg.qr(rng.standard_normal((d_phi, r)))
    return u @ np.diag(spread[:r]) @ v.T


def _zero_22(basis, rng):
    """Θ = Û [[A, B], [C, 0]] V̂ᵀ with random A, B, C."""
    r, dx, dp = basis.rank, basis.d_x, basis.d_phi
    rotated = rng.standard_normal((dx, dp))
    rotated[r:, r:] = 0.0
    return basis.left @ rotated @ basis.right.T


def _basis(seed, d_x, d_phi, r):
    rng = np.random.default_rng(seed)
    theta_hat = _low_rank(rng, d_x, d_phi, r)
    return rng, theta_hat, rtv_basis(theta_hat, r)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_basis_is_the_svd(d_x, d_phi, r):
    _, theta_hat, basis = _basis(0, d_x, d_phi, r)
    assert isinstance(basis, RTVBasis) and isinstance(basis, Coordinates)
    assert (basis.d_x, basis.d_phi, basis.rank) == (d_x, d_phi, r)
    assert basis.dim == (d_x + d_phi) * r - r * r
    np.testing.assert_allclose(basis.left.T @ basis.left, np.eye(d_x), atol=1e-12)
    np.testing.assert_allclose(basis.right.T @ basis.right, np.eye(d_phi), atol=1e-12)
    rotated = basis.rotate(theta_hat)
    sv = np.linalg.svd(theta_hat, compute_uv=False)[:r]
    expected = np.zeros((d_x, d_phi))
    expected[:r, :r] = np.diag(sv)
    np.testing.assert_allclose(rotated, expected, atol=1e-12)
    np.testing.assert_allclose(basis.block22(theta_hat), 0.0, atol=1e-12)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_coordinate_identity(d_x, d_phi, r):
    """⟨Z, Θ⟩ = ⟨z_rtv, θ_rtv⟩ + ⟨Z'₂₂, Θ'₂₂⟩ for Z = x φᵀ and any Θ."""
    rng, _, basis = _basis(1, d_x, d_phi, r)
    theta = rng.standard_normal((d_x, d_phi))
    x = rng.standard_normal((30, d_x))
    phi = rng.standard_normal((30, d_phi))
    z = basis.transform(x, phi)
    assert z.shape == (30, basis.dim)
    theta_rtv = basis.to_coordinates(theta)
    assert theta_rtv.shape == (basis.dim,)
    outer = x[:, :, None] * phi[:, None, :]
    lhs = np.einsum("nij,ij->n", outer, theta)
    rest = np.einsum("nij,ij->n", basis.block22(outer), basis.block22(theta))
    np.testing.assert_allclose(z @ theta_rtv + rest, lhs, rtol=1e-10, atol=1e-10)
    if r < min(d_x, d_phi):
        assert np.abs(rest).max() > 1e-3  # the truncated term is really there for a generic Θ


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_coordinate_identity_batched_features(d_x, d_phi, r):
    rng, _, basis = _basis(2, d_x, d_phi, r)
    theta = _zero_22(basis, rng)
    x = rng.standard_normal((7, d_x))
    feats = rng.standard_normal((7, 4, d_phi))
    z = basis.transform(x, feats)
    assert z.shape == (7, 4, basis.dim)
    rewards = np.einsum("ni,ij,naj->na", x, theta, feats)
    np.testing.assert_allclose(z @ basis.to_coordinates(theta), rewards, rtol=1e-10, atol=1e-10)
    for a in range(4):
        np.testing.assert_allclose(z[:, a], basis.transform(x, feats[:, a]), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_transform_equals_coordinates_of_the_outer_product(d_x, d_phi, r):
    rng, _, basis = _basis(3, d_x, d_phi, r)
    x = rng.standard_normal((9, d_x))
    phi = rng.standard_normal((9, d_phi))
    expected = np.stack([basis.to_coordinates(np.outer(xt, ft)) for xt, ft in zip(x, phi, strict=True)])
    np.testing.assert_allclose(basis.transform(x, phi), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_round_trips(d_x, d_phi, r):
    rng, theta_hat, basis = _basis(4, d_x, d_phi, r)
    # Θ with a zero rotated 22-block survives to_coordinates then to_theta
    for theta in (theta_hat, _zero_22(basis, rng), 2.5 * theta_hat - _zero_22(basis, rng)):
        np.testing.assert_allclose(basis.to_theta(basis.to_coordinates(theta)), theta, rtol=1e-11,
                                   atol=1e-11)
    # any θ_rtv survives to_theta then to_coordinates
    theta_rtv = rng.standard_normal(basis.dim)
    np.testing.assert_allclose(basis.to_coordinates(basis.to_theta(theta_rtv)), theta_rtv, rtol=1e-11,
                               atol=1e-11)
    np.testing.assert_allclose(basis.block22(basis.to_theta(theta_rtv)), 0.0, atol=1e-11)
    # batched: (…, k) ↔ (…, d_x, d_φ)
    batch = rng.standard_normal((3, 2, basis.dim))
    thetas = basis.to_theta(batch)
    assert thetas.shape == (3, 2, d_x, d_phi)
    np.testing.assert_allclose(thetas[1, 0], basis.to_theta(batch[1, 0]), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(basis.to_coordinates(thetas), batch, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), [s for s in SHAPES if s[2] < min(s[0], s[1])])
def test_truncation_drops_exactly_the_22_block(d_x, d_phi, r):
    rng, _, basis = _basis(5, d_x, d_phi, r)
    theta = rng.standard_normal((d_x, d_phi))
    dropped = theta - basis.to_theta(basis.to_coordinates(theta))
    r2 = basis.block22(theta)
    np.testing.assert_allclose(dropped, basis.left[:, r:] @ r2 @ basis.right[:, r:].T, rtol=1e-10,
                               atol=1e-10)
    assert np.linalg.norm(r2) > 0.1


@pytest.mark.parametrize(("d_x", "d_phi", "r"), [s for s in SHAPES if s[2] < min(s[0], s[1])])
def test_rank_r_matrices_have_the_chart_22_block(d_x, d_phi, r):
    """For rank-r Θ with invertible Θ'₁₁: Θ'₂₂ = Θ'₂₁ Θ'₁₁⁻¹ Θ'₁₂, second order in the distance to Θ̂."""
    rng, theta_hat, basis = _basis(6, d_x, d_phi, r)
    u, s, vt = np.linalg.svd(theta_hat, full_matrices=False)
    d_left, d_right = rng.standard_normal((d_x, r)), rng.standard_normal((d_phi, r))
    sizes = []
    for eps in (1e-2, 1e-3):
        left = u[:, :r] * s[:r] + eps * d_left
        right = vt[:r].T + eps * d_right
        theta = left @ right.T
        rot = basis.rotate(theta)
        chart = rot[r:, :r] @ np.linalg.solve(rot[:r, :r], rot[:r, r:])
        np.testing.assert_allclose(basis.block22(theta), chart, rtol=1e-8, atol=1e-13)
        sizes.append(np.linalg.norm(basis.block22(theta)))
    # Θ'₂₂ = ε² Û₂ᵀ dU dVᵀ V̂₂ exactly: ε → ε/10 shrinks it 100×
    assert sizes[0] / sizes[1] == pytest.approx(100.0, rel=1e-6)


def _signed_and_rotated(basis, rng):
    """The same Θ̂ decomposed differently: flip signs of matched singular-vector pairs and rotate
    the (arbitrary) bases of the complements."""
    r = basis.rank
    signs = rng.choice([-1.0, 1.0], size=r)
    q_left, _ = np.linalg.qr(rng.standard_normal((basis.d_x - r, basis.d_x - r)))
    q_right, _ = np.linalg.qr(rng.standard_normal((basis.d_phi - r, basis.d_phi - r)))
    left = np.hstack([basis.left[:, :r] * signs, basis.left[:, r:] @ q_left])
    right = np.hstack([basis.right[:, :r] * signs, basis.right[:, r:] @ q_right])
    return RTVBasis(left, right, r)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), [(4, 5, 2), (6, 3, 2), (20, 29, 3)])
def test_invariance_to_the_choice_of_decomposition(d_x, d_phi, r):
    rng, theta_hat, basis = _basis(7, d_x, d_phi, r)
    scaled = rtv_basis(3.7 * theta_hat, r)
    other = _signed_and_rotated(basis, rng)
    assert not np.allclose(other.left, basis.left)  # really a different parametrisation
    theta = 2.0 * theta_hat + _zero_22(basis, rng)  # zero 22-block in every one of these bases
    x = rng.standard_normal((60, d_x))
    phi = rng.standard_normal((60, d_phi))
    truth = np.einsum("ni,ij,nj->n", x, theta, phi)
    z0 = basis.transform(x, phi)
    gram_inv_norm = np.einsum("nk,kl,nl->n", z0, np.linalg.pinv(z0.T @ z0), z0)
    for b in (scaled, other):
        np.testing.assert_allclose(b.block22(theta), 0.0, atol=1e-10)
        z = b.transform(x, phi)
        np.testing.assert_allclose(z @ b.to_coordinates(theta), truth, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(b.to_theta(b.to_coordinates(theta)), theta, rtol=1e-10, atol=1e-10)
        # norms of the coordinates and the leverage zᵀ(ZᵀZ)⁺z do not depend on the basis
        assert np.linalg.norm(b.to_coordinates(theta)) == pytest.approx(
            np.linalg.norm(basis.to_coordinates(theta)), rel=1e-10)
        np.testing.assert_allclose(np.einsum("nk,kl,nl->n", z, np.linalg.pinv(z.T @ z), z), gram_inv_norm,
                                   rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("rank", [0, 5, 7])
def test_rank_out_of_range_is_named(rank):
    with pytest.raises(ValueError, match=r"^rank must be in \[1, 4\]"):
        rtv_basis(np.ones((4, 6)), rank)


def test_theta_hat_is_validated():
    bad = np.ones((4, 6))
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match=r"theta_hat contains NaN or infinity.*theta_hat\[\(?2, 3\)?\]"):
        rtv_basis(bad, 2)
    with pytest.raises(ValueError, match="theta_hat must be 2-dimensional"):
        rtv_basis(np.ones(6), 1)


# ----------------------------------------------------------------------- designs never formed at once


def _comparisons(seed, d_x, d_phi, n=700):
    from bayes_loco import PreferenceData

    rng = np.random.default_rng(seed)
    return PreferenceData(rng.uniform(-1, 1, (n, d_x)), rng.standard_normal((n, d_phi)),
                          rng.integers(0, 2, n))


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_design_operator_is_the_explicit_design(d_x, d_phi, r):
    """Zθ and Zᵀw of the implicit design against the design built row by row from Ûᵀ x Δφᵀ V̂."""
    from bayes_loco.design import design_operator

    basis = _basis(3, d_x, d_phi, r)[2]
    data = _comparisons(4, d_x, d_phi)
    z = np.stack([basis.to_coordinates(np.outer(x, d)) for x, d in zip(data.contexts, data.differences,
                                                                         strict=True)])
    operator = design_operator(basis, data)
    assert operator.shape == (data.n, basis.dim)
    rng = np.random.default_rng(5)
    theta, w = rng.standard_normal(basis.dim), rng.standard_normal(data.n)
    np.testing.assert_allclose(operator.matvec(theta), z @ theta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(operator.rmatvec(w), z.T @ w, rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("kind", ["rtv", "vec"])
@pytest.mark.parametrize(("block_rows", "panel", "gram_panel"),
                         [(1, 4, 2048), (7, 512, 2048), (10_000, 5, 2048), (7, 4, 5), (10_000, 512, 1),
                          (3, 5, 17)])
def test_weighted_gram_in_blocks_is_the_full_sum(kind, block_rows, panel, gram_panel, monkeypatch):
    """Blocks of rows, ragged mirror panels, and (gram_panel < k) the sums that replace dsyrk at LLM width:
    column panels of the general product (vec(Θ), k = 30: ragged, one column each, or all k) and, in RTV
    coordinates (k = 18), the Kronecker-structured sum with ragged pair panels."""
    from bayes_loco import coordinates, design

    basis = _basis(6, 6, 5, 2)[2] if kind == "rtv" else coordinates.VecCoordinates(6, 5)
    data = _comparisons(7, 6, 5, n=50)
    bl.set_config(design_block_bytes=block_rows * basis.dim * 8)
    bl.set_config(mirror_panel=panel)
    bl.set_config(gram_panel=gram_panel)
    bl.set_config(pair_panel=2)  # d_φ = 5: panels of 2, 2 and 1 columns
    z = design.design(basis, data)
    w = np.random.default_rng(8).uniform(0, 0.25, data.n)
    np.testing.assert_allclose(design.information(basis, data), z.T @ z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(design.information(basis, data, w), z.T @ (w[:, None] * z), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize(("d_x", "d_phi", "r"), SHAPES)
def test_the_kronecker_structured_gram_is_the_sum_over_the_design(d_x, d_phi, r, monkeypatch):
    """Every block of W in RTV coordinates (11, 12, 21 and their crossings) from the structured sum, for
    each shape (r = d_x and r = d_φ leave block 21 or 12 empty), against zᵀ diag(w) z."""
    from bayes_loco import design

    basis = _basis(3, d_x, d_phi, r)[2]
    data = _comparisons(4, d_x, d_phi, n=60)
    bl.set_config(gram_panel=1)
    bl.set_config(design_block_bytes=17 * d_phi * 8)  # 17 rows a block
    z = design.design(basis, data)
    w = np.random.default_rng(9).uniform(0, 0.25, data.n)
    gram = design.information(basis, data, w)
    np.testing.assert_allclose(gram, z.T @ (w[:, None] * z), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(gram, gram.T)


def test_weighted_gram_refuses_weights_it_cannot_take_a_square_root_of():
    from bayes_loco import design

    basis = _basis(6, 6, 5, 2)[2]
    data = _comparisons(7, 6, 5, n=50)
    with pytest.raises(ValueError, match=r"weights must be 50 nonnegative numbers .*got some negative"):
        design.information(basis, data, np.full(50, -0.1))
    with pytest.raises(ValueError, match=r"weights must be 50 nonnegative .*shape \(49,\)"):
        design.information(basis, data, np.ones(49))


def test_a_gram_matrix_larger_than_memory_is_refused(monkeypatch):
    from bayes_loco import _validation, design

    basis = _basis(6, 6, 5, 2)[2]
    data = _comparisons(7, 6, 5, n=50)
    monkeypatch.setattr(_validation, "available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match=r"the 18 x 18 Gram matrix .* of memory is available; use fewer"):
        design.information(basis, data)
    # The structured sum also holds its r(r+1)/2 partial sums and a block of f̃: 4,232 bytes here, where
    # W and a block of the design need 2,880.
    bl.set_config(gram_panel=1)
    bl.set_config(design_block_bytes=8 * 18 * 2)
    monkeypatch.setattr(_validation, "available_memory", lambda: 3500)
    with pytest.raises(MemoryError, match=r"18 x 18 Gram matrix of the coordinates and its 3 partial sums"):
        design.information(basis, data)
    monkeypatch.setattr(_validation, "available_memory", lambda: 4300)
    assert design.information(basis, data).shape == (18, 18)


def test_design_operator_needs_an_rtv_basis():
    from bayes_loco import VecCoordinates
    from bayes_loco.design import design_operator

    with pytest.raises(TypeError, match=r"^basis must be an RTVBasis"):
        design_operator(VecCoordinates(3, 4), _comparisons(1, 3, 4))


def test_steps_that_would_exhaust_memory_are_refused_with_their_size(monkeypatch):
    """The explicit design, the full SVD bases, W's eigendecomposition and the policy's candidate features."""
    import bayes_loco as bl
    from bayes_loco import _validation, design

    problem = bl.simulate.paper_problem(d_x=6, d_s=2, rank=2)
    data = problem.sample(40, seed=1)
    population = problem.population(5, seed=2)
    basis = rtv_basis(np.outer(np.arange(1.0, 7.0), np.arange(1.0, 12.0)), 1)
    wald = bl.EllipsoidSet(np.zeros(basis.dim), np.eye(basis.dim), 1.0, basis)
    monkeypatch.setattr(_validation, "available_memory", lambda: 100)
    cases = [(lambda: design.design(basis, data), r"the 40 x 16 design needs"),
             (lambda: rtv_basis(np.ones((6, 11)), 1), r"the full SVD bases"),
             (lambda: bl.EllipsoidSet(np.zeros(16), np.eye(16), 1.0, basis),
              r"eigendecomposition of the 16 x 16"),
             (lambda: bl.policy.candidate_features(wald, population),
              r"5 units x 10 actions in 16 coordinates")]
    for call, message in cases:
        with pytest.raises(MemoryError, match=message + r".* GiB of memory is available"):
            call()


@pytest.mark.parametrize(("d_x", "d_phi", "rank"), [(3, 4, 1), (5, 8, 2), (6, 6, 3), (4, 9, 4)])
def test_manifold_dim_is_the_rank_of_the_factor_map(d_x, d_phi, rank):
    """k = (d_x + d_φ) r − r² is the rank of the Jacobian of (U, V) → U Vᵀ at a generic point (the
    factors' (d_x + d_φ) r entries less GL(r)'s r²), and the dimension RTVBasis and a rank-r fit use."""
    rng = np.random.default_rng(d_x * 100 + d_phi * 10 + rank)
    u, v = rng.standard_normal((d_x, rank)), rng.standard_normal((d_phi, rank))
    # d(U Vᵀ) = dU Vᵀ + U dVᵀ: linear in (dU, dV), one column per factor entry.
    columns = []
    for i, j in np.ndindex(d_x, rank):
        du = np.zeros((d_x, rank))
        du[i, j] = 1.0
        columns.append((du @ v.T).ravel())
    for i, j in np.ndindex(d_phi, rank):
        dv = np.zeros((d_phi, rank))
        dv[i, j] = 1.0
        columns.append((u @ dv.T).ravel())
    k = manifold_dim(d_x, d_phi, rank)
    assert np.linalg.matrix_rank(np.column_stack(columns)) == k
    assert bl.rtv_basis(u @ v.T, rank).dim == k
