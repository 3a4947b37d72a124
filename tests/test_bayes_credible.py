"""Credible sets and reduced coordinates on synthetic draws with known moments (no sampling)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco import simulate
from bayes_loco.bayes import dims as D


@pytest.fixture(scope="module")
def small_paper():
    """Paper simulation shrunk: d_x = 4, d_a = 4, d_s = 3 (d_φ = 6), r = 2, N = 800."""
    problem = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0)
    data = problem.sample(800, seed=3)
    low_rank = bl.fit_low_rank(data, 2, ridge=1.0)
    return problem, data, low_rank, bl.rtv_basis(low_rank.theta, 2)


@pytest.fixture(scope="module")
def gaussian_draws():
    """J = 20,000 draws of a k = 6 Gaussian with a known mean and a non-diagonal covariance."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6))
    cov = a @ a.T / 6 + 0.1 * np.eye(6)
    mean = rng.standard_normal(6)
    return mean, cov, rng.multivariate_normal(mean, cov, size=20000)


@pytest.fixture(scope="module")
def basis6():
    """An RTV basis with k = (2 + 3)·2 − 2² = 6."""
    rng = np.random.default_rng(1)
    basis = bl.rtv_basis(rng.standard_normal((2, 3)), 2)
    assert basis.dim == 6
    return basis


def test_identified_directions_match_the_wald_set(small_paper):
    _problem, data, low_rank, basis = small_paper
    p = bl.identified_directions(basis, data)
    np.testing.assert_allclose(p.T @ p, np.eye(p.shape[1]), atol=1e-10)
    # The state features cancel in Δφ: 3 state columns × r = 2 rows of block 12 are unreachable.
    assert basis.dim == 16 and p.shape[1] == 10
    wald = bl.fit_prs(data, 2, ridge=1.0, low_rank=low_rank).calibrated_set(0.9)
    assert wald.effective_dim == p.shape[1]
    z = basis.transform(data.contexts, data.differences)
    np.testing.assert_allclose(z - (z @ p) @ p.T, 0.0, atol=1e-9)


def test_identified_directions_bad_input(small_paper, basis6):
    _, data, _, _basis = small_paper
    with pytest.raises(TypeError, match="coordinates"):
        bl.identified_directions(np.eye(3), data)
    with pytest.raises(ValueError, match="d_x"):
        bl.identified_directions(basis6, data)


def test_ellipsoid_holds_its_level_of_gaussian_mass(gaussian_draws, basis6):
    mean, cov, draws = gaussian_draws
    cs = bb.credible_ellipsoid(draws, basis6, 0.9)
    assert cs.kind == "credible" and cs.level == 0.9 and cs.coordinates is basis6
    assert cs.radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.9, 6)))
    np.testing.assert_allclose(cs.center, mean, atol=4 * np.sqrt(cov.diagonal().max() / 20000))
    fresh = np.random.default_rng(7).multivariate_normal(mean, cov, size=4000)
    inside = cs.contains(fresh).mean()
    assert abs(inside - 0.9) < 4 * np.sqrt(0.9 * 0.1 / 4000) + 0.01  # + estimation error of Σ


def test_ellipsoid_restricted_to_directions(gaussian_draws, basis6):
    _, _cov, draws = gaussian_draws
    p = np.linalg.qr(np.random.default_rng(3).standard_normal((6, 4)))[0]
    cs = bb.credible_ellipsoid(draws, basis6, 0.8, directions=p)
    assert cs.effective_dim == 4
    assert cs.radius == pytest.approx(np.sqrt(stats.chi2.ppf(0.8, 4)))
    outside = np.linalg.svd(p, full_matrices=True)[0][:, 4:].T  # orthogonal complement
    assert np.isneginf(cs.lower_bound(outside[0]))
    z = p[:, 0]
    # Support function along an identified direction: θ̄ᵀz − R sqrt(zᵀΣz) (Σ's marginal).
    debias = (20000 - 1) / (20000 - 4 - 2)  # inverse-Wishart mean in k_eff = 4 dimensions
    expected = cs.center @ z - cs.radius * np.sqrt(debias * z @ np.cov(draws, rowvar=False) @ z)
    assert cs.lower_bound(z) == pytest.approx(expected, rel=1e-8)


def test_sandwich_covers_the_posterior_means_expectation_in_a_gaussian_model(basis6):
    """Linear-Gaussian model, prior N(0, τ²I): θ̄ = Σ Xᵀy is exactly N(Σ F θ*, Σ F Σ).

    The sandwich set must cover E θ̄ at its level; the credible set, whose shape Σ
    is wider than Σ F Σ under strong shrinkage, over-covers it.
    """
    rng = np.random.default_rng(11)
    x = rng.standard_normal((40, 6)) * np.array([1.0, 1.0, 0.5, 0.5, 0.2, 0.2])
    info = x.T @ x
    sigma = np.linalg.inv(info + 4.0 * np.eye(6))  # prior sd 0.5: strong on the weak columns
    theta = rng.standard_normal(6)
    target = sigma @ info @ theta
    reps, j = 300, 4000
    sandwich = credible = 0
    for _ in range(reps):
        y = x @ theta + rng.standard_normal(40)
        draws = rng.multivariate_normal(sigma @ x.T @ y, sigma, size=j)
        cs = bb.credible_ellipsoid(draws, basis6, 0.9, information=info)
        assert cs.kind == "sandwich"
        sandwich += cs.contains(target)
        credible += bb.credible_ellipsoid(draws, basis6, 0.9).contains(target)
    se = np.sqrt(0.9 * 0.1 / reps)
    assert abs(sandwich / reps - 0.9) < 4 * se + 0.01  # + estimation error of Σ from J draws
    assert credible / reps > 0.9 + 4 * se


def test_sandwich_bad_information(gaussian_draws, basis6):
    draws = gaussian_draws[2][:100]
    with pytest.raises(ValueError, match="information"):
        bb.credible_ellipsoid(draws, basis6, 0.9, information=np.eye(5))
    with pytest.raises(ValueError, match="information"):
        bb.credible_set(draws, basis6, 0.9, "draws", information=np.eye(6))
    for kind in ("credible", "quantile"):
        with pytest.raises(ValueError, match="kind='sandwich' only"):
            bb.credible_set(draws, basis6, 0.9, kind, information=np.eye(6))
    with pytest.raises(ValueError, match="kind='sandwich' needs"):
        bb.credible_set(draws, basis6, 0.9, "sandwich")


def test_draws_set_keeps_the_nearest_fraction(gaussian_draws, basis6):
    _, _, draws = gaussian_draws
    sub = draws[:1000]
    ds = bb.credible_draws(sub, basis6, 0.75)
    assert ds.draws.shape == (750, 6) and ds.level == 0.75
    center, cov = sub.mean(0), np.cov(sub, rowvar=False)
    d = np.einsum("ji,il,jl->j", sub - center, np.linalg.inv(cov), sub - center)  # same order
    kept = np.isin(sub, ds.draws).all(axis=1)
    assert kept.sum() == 750 and d[kept].max() <= d[~kept].min()
    z = np.random.default_rng(0).standard_normal((5, 6))
    np.testing.assert_allclose(ds.lower_bound(z), (z @ ds.draws.T).min(axis=1))


def test_quantile_set(gaussian_draws, basis6):
    _, _, draws = gaussian_draws
    qs = bb.credible_quantile(draws[:500], basis6, 0.9)
    z = np.random.default_rng(1).standard_normal((3, 6))
    np.testing.assert_allclose(qs.lower_bound(z), np.quantile(z @ draws[:500].T, 0.1, axis=1))


def test_kinds():
    assert bb.credible.KINDS == ("credible", "sandwich", "draws", "quantile", "cvar", "family")


def test_cvar_set_bounds_every_value_with_posterior_probability_level(gaussian_draws, basis6):
    """CVaR_β ≤ the β-quantile: for any z, at least a fraction 1 − β of the draws have θ_jᵀz above the bound,
    and the bound is the mean of the lowest β·J values (J = 500, β = 0.1)."""
    draws = gaussian_draws[2][:500]
    cs = bb.credible_cvar(draws, basis6, 0.9)
    assert cs.kind == "cvar" and cs.level == 0.9 and cs.tail == pytest.approx(0.1)
    z = np.random.default_rng(3).standard_normal((20, 6))
    bound = cs.lower_bound(z)
    values = z @ draws.T
    assert ((values >= bound[:, None]).mean(axis=1) >= 0.9).all()
    np.testing.assert_allclose(bound, np.sort(values, axis=1)[:, :50].mean(axis=1))
    with pytest.raises(ValueError, match="level"):
        bb.credible_cvar(draws, basis6, 1.0)


# "family" needs a population: tests/test_value_family.py checks its dispatch.
@pytest.mark.parametrize("kind", [kind for kind in bb.credible.KINDS if kind != "family"])
def test_credible_set_dispatch(gaussian_draws, basis6, kind):
    draws = gaussian_draws[2][:300]
    information = np.diag(np.arange(1.0, 7.0)) if kind == "sandwich" else None
    cs = bb.credible_set(draws, basis6, 0.9, kind, information=information)
    assert cs.kind == kind and cs.level == 0.9
    expected = {"credible": lambda: bb.credible_ellipsoid(draws, basis6, 0.9),
                "sandwich": lambda: bb.credible_ellipsoid(draws, basis6, 0.9, information=information),
                "draws": lambda: bb.credible_draws(draws, basis6, 0.9),
                "quantile": lambda: bb.credible_quantile(draws, basis6, 0.9),
                "cvar": lambda: bb.credible_cvar(draws, basis6, 0.9)}[kind]()
    z = np.random.default_rng(2).standard_normal((4, 6))
    np.testing.assert_array_equal(cs.lower_bound(z), expected.lower_bound(z))


def test_credible_set_default_kind_is_the_credible_ellipsoid(gaussian_draws, basis6):
    cs = bb.credible_set(gaussian_draws[2][:300], basis6)
    assert isinstance(cs, bl.EllipsoidSet) and cs.kind == "credible"
    with pytest.raises(ValueError, match="kind"):
        bb.credible_set(gaussian_draws[2][:300], basis6, 0.9, "ellipsoid")  # the old name


@pytest.mark.parametrize(("call", "name"), [
    (lambda d, b: bb.credible_set(d, b, 0.9, "box"), "kind"),
    (lambda d, b: bb.credible_ellipsoid(d, b, 1.5), "level"),
    (lambda d, b: bb.credible_quantile(d, b, 0.0), "level"),
    (lambda d, b: bb.credible_draws(d[:, :5], b, 0.9), "draws"),
    (lambda d, b: bb.credible_ellipsoid(d[:1], b, 0.9), "draws"),
    (lambda d, b: bb.credible_ellipsoid(d, b, 0.9, directions=np.eye(5)), "directions"),
])
def test_bad_arguments(gaussian_draws, basis6, call, name):
    with pytest.raises(ValueError, match=name):
        call(gaussian_draws[2][:100], basis6)


def test_theta_rtv_array_and_labels(small_paper):
    _, _, _low_rank, basis = small_paper
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((2, 3, basis.d_x, basis.d_phi))
    da = xr.DataArray(theta, dims=("chain", "draw", D.CONTEXT, D.FEATURE))
    out = bb.theta_rtv_array(da, basis)
    assert out.dims == ("chain", "draw", D.RTV_COORD) and out.sizes[D.RTV_COORD] == basis.dim
    np.testing.assert_allclose(out.values, basis.to_coordinates(theta))
    labels = basis.labels()
    assert len(labels) == len(set(labels)) == basis.dim and labels[0] == "11 (u0, v0)"
    # The tree's labels name the block and the pair of singular directions, in basis.entries()'s order.
    tree_labels = list(out[D.RTV_COORD].values)
    assert tree_labels == labels
    assert tree_labels[-1] == f"21 (u{basis.d_x - 1}, v{basis.rank - 1})"
    for (block, i, j), label in zip(basis.entries(), labels, strict=True):
        assert label == f"{block} (u{i}, v{j})"
        assert (block == "11") == (i < basis.rank and j < basis.rank)
    with pytest.raises(ValueError, match="dims"):
        bb.theta_rtv_array(da.rename({D.FEATURE: "other"}), basis)


def test_rtv_chart_and_identified_coordinates(small_paper):
    _, data, _, basis = small_paper
    directions = bl.identified_directions(basis, data)
    identified = bl.trees.identified_coordinates(directions)
    # By hand: e_i is identified when its component outside span(P) vanishes.
    outside = np.eye(basis.dim) - directions @ directions.T
    np.testing.assert_array_equal(identified, np.abs(outside).max(axis=0) < 1e-6)
    assert 0 < identified.sum() < basis.dim
    chart = bl.trees.rtv_chart(basis, identified)
    assert set(chart.data_vars) == {"rtv_identified", "rtv_block", "rtv_context_direction",
                                    "rtv_feature_direction"}
    np.testing.assert_array_equal(chart["rtv_identified"].values, identified)
    # Coordinate (i, j) is entry (i, j) of Θ' = Ûᵀ Θ V̂.
    theta = np.random.default_rng(1).standard_normal((basis.d_x, basis.d_phi))
    i, j = chart["rtv_context_direction"].values, chart["rtv_feature_direction"].values
    np.testing.assert_allclose(basis.to_coordinates(theta), basis.rotate(theta)[i, j])
    with pytest.raises(ValueError, match="identified"):
        bl.trees.rtv_chart(basis, identified[:-1])


def test_add_theta_rtv_and_stacked_draws(small_paper):
    _, _, _, basis = small_paper
    theta = np.random.default_rng(2).standard_normal((2, 5, basis.d_x, basis.d_phi))
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset(
        {D.THETA: (("chain", "draw", D.CONTEXT, D.FEATURE), theta)})})
    bb.add_theta_rtv(tree, basis)
    flat = bb.reduced.stacked_draws(tree)
    np.testing.assert_allclose(flat, basis.to_coordinates(theta).reshape(10, -1))
    with pytest.raises(ValueError, match="group"):
        bb.add_theta_rtv(tree, basis, group="prior")


def test_ellipsoid_from_few_draws_is_debiased(basis6):
    """From J = 40 draws in k = 6 dimensions Σ̂⁻¹ overstates the precision by (J − 1)/(J − k − 2)."""
    rng = np.random.default_rng(11)
    covered = []
    for _ in range(400):
        draws = rng.standard_normal((40, 6))
        cs = bb.credible_ellipsoid(draws, basis6, 0.9)
        covered.append(cs.contains(rng.standard_normal(6)))
    # Predictive coverage of a fresh N(0, I) point, exact by Hotelling's T²: 0.879 with
    # the debiasing, 0.795 without; 400 trials have sd ≈ 0.017, so 0.84 separates them
    # by more than 2 sd on either side.
    assert np.mean(covered) > 0.84
