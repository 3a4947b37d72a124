"""Ties and weights on the frequentist road: the half-tie quasi-likelihood and Davidson's model.

Every estimate is checked against a loss written here and minimised by scipy, the sandwich against
statsmodels' GLM, arena-rank's Bradley–Terry where it is installed (pyproject.toml's ``arena``
extra says how), Davidson's ν against its own maximum-likelihood solve and against the truth on
simulated data.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import repeated_rows
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit, log_expit, logsumexp

import bayes_loco as bl
from bayes_loco import simulate
from bayes_loco.design import design
from bayes_loco.model import margins

# The three outcomes y = 0, ½, 1 (index 2y): the margin's coefficient in each logit of Davidson's model.
OUTCOME_SLOPE = np.array([-0.5, 0.0, 0.5])


def _davidson_probabilities(eta, log_nu):
    """log P and P of the outcomes y = 0, ½, 1: a softmax over (−η/2, log ν, η/2)."""
    logits = np.stack([eta * OUTCOME_SLOPE[0], np.full_like(eta, log_nu), eta * OUTCOME_SLOPE[2]], axis=1)
    log_probs = logits - logsumexp(logits, axis=1, keepdims=True)
    return log_probs, np.exp(log_probs)


def _davidson_outcomes(rng, eta, nu):
    """Indices 0, 1, 2 (y = 0, tie, 1) drawn from Davidson's model (ν = 0: Bradley–Terry, no tie)."""
    with np.errstate(divide="ignore"):
        probs = _davidson_probabilities(eta, np.log(nu))[1]
    return (rng.random(eta.size)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)


def _davidson_scores(eta, log_nu, outcome):
    """∂ℓ_t/∂η_t and ∂ℓ_t/∂λ of ℓ_t = −log P(outcome_t), the softmax's gradient: E[slope] − slope."""
    probs = _davidson_probabilities(eta, log_nu)[1]
    return probs @ OUTCOME_SLOPE - OUTCOME_SLOPE[outcome], probs[:, 1] - (outcome == 1)


def _battles(seed, *, n=3000, models=6, nu=0.7, weighted=True):
    """Plain Bradley–Terry battles: x_t = 1, Δφ_t = e_a − e_b with model 0 (the reference) dropped.

    Outcomes from Davidson's model with ``nu`` (0: no tie). Returns the data, the pairs (a, b)
    (a is the answer whose win is y = 1), the outcome index 2y, the weights and the true
    log-odds ratings relative to model 0.
    """
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 0.8, models)
    strength -= strength[0]
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    outcome = _davidson_outcomes(rng, strength[a] - strength[b], nu)
    weights = rng.uniform(0.5, 2.0, n) if weighted else None
    onehot = np.zeros((n, models))
    onehot[np.arange(n), a] += 1.0
    onehot[np.arange(n), b] -= 1.0
    data = bl.PreferenceData.from_arrays(np.ones((n, 1)), outcome / 2, differences=onehot[:, 1:],
                                         weights=weights)
    return data, np.stack([a, b], axis=1), outcome, weights, strength[1:]


def _half_loss(t, dphi, y, w):
    """−Σ w [y log σ(η) + (1 − y) log σ(−η)] and its gradient, η = ΔΦ t."""
    eta = dphi @ t
    value = -np.sum(w * (y * log_expit(eta) + (1 - y) * log_expit(-eta)))
    return value, dphi.T @ (w * (expit(eta) - y))


def _davidson_loss(params, z, outcome, w):
    """−Σ w_t log P(outcome_t | η_t = z_tᵀ t, λ = log ν) and its gradient in (t, λ)."""
    t, lam = params[:-1], params[-1]
    eta = z @ t
    value = -np.sum(w * _davidson_probabilities(eta, lam)[0][np.arange(eta.size), outcome])
    d_eta, d_lam = _davidson_scores(eta, lam, outcome)
    return value, np.append(z.T @ (w * d_eta), np.sum(w * d_lam))


def _davidson_information(params, z, w):
    """Σ_t w_t Σ_o P(o) g_o g_oᵀ, g_o the score of outcome o in (t, λ): the expected information."""
    t, lam = params[:-1], params[-1]
    eta = z @ t
    probs = _davidson_probabilities(eta, lam)[1]
    info = np.zeros((t.size + 1, t.size + 1))
    for o in range(3):
        d_eta, d_lam = _davidson_scores(eta, lam, np.full(eta.size, o))
        score = np.column_stack([d_eta[:, None] * z, d_lam])
        info += (w[:, None] * probs[:, o, None] * score).T @ score
    return info


def _scipy_davidson(z, outcome, w):
    res = minimize(_davidson_loss, np.zeros(z.shape[1] + 1), args=(z, outcome, w), jac=True, method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 1000})
    # BFGS can stop at a gradient of ~1e-6 ("precision loss" in its line search on a summed loss); three
    # Fisher-scoring steps from there, which need no line search, take it to rounding (least squares: a
    # design that leaves directions unreached has a singular information, and no gradient along them).
    for _ in range(3):
        step = np.linalg.lstsq(_davidson_information(res.x, z, w), _davidson_loss(res.x, z, outcome, w)[1])
        res.x = res.x - step[0]
    res.jac = _davidson_loss(res.x, z, outcome, w)[1]
    assert np.abs(res.jac).max() < 1e-10
    return res


# ----------------------------------------------------------------------------- "half": the quasi-likelihood


def test_half_ties_equal_an_independent_minimisation_of_the_weighted_loss():
    data, _, _, w, _ = _battles(0)
    assert data.has_ties and data.weighted
    fit = bl.fit_mle(data, ties="half")
    y = data.labels.astype(float)
    res = minimize(_half_loss, np.zeros(data.d_phi), args=(data.differences, y, w), jac=True, method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 1000})
    np.testing.assert_allclose(fit.theta[0], res.x, rtol=0, atol=1e-7)
    assert fit.nll == pytest.approx(res.fun, rel=1e-12)
    assert fit.ties == "half" and fit.nu is None
    # A tie is not a loss: reading it as y = 0 (the bug this replaced) gives other ratings.
    as_losses = bl.PreferenceData.from_arrays(data.contexts, (data.labels == 1).astype(int),
                                              differences=data.differences, weights=w)
    assert np.abs(bl.fit_mle(as_losses).theta - fit.theta).max() > 0.05


def test_half_ties_equal_arena_rank_bradley_terry():
    """arena-rank 0.1.1's BradleyTerry, matched like for like.

    Its loss is −Σ w [y d − softplus(d)] / Σ w with d = r_a − r_b, the same as ours up to the
    constant factor 1/Σ w (y d − softplus(d) = y log σ(d) + (1 − y) log σ(−d)), ties y = ½;
    its fit is unregularised (``hessian_reg`` enters only its intervals); it rates all m models
    from 0 by L-BFGS, whose iterates keep Σ r = 0 since every gradient sums to 0, where we
    anchor model 0 at 0: so the comparison is of every difference r_i − r_j, in log-odds
    (its ``params``, before the Elo scale 400/log 10). Each battle is its own row (count 1,
    weight w_t as ``opt_weights``), so its aggregation of equal rows does not enter.
    """
    pytest.importorskip("arena_rank")
    jnp = pytest.importorskip("jax.numpy")
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.utils.data_utils import PairDataset

    data, pairs, _, w, _ = _battles(1)
    models = data.d_phi + 1
    arena = BradleyTerry(models)
    arena.fit(PairDataset([f"m{i}" for i in range(models)], jnp.asarray(pairs),
                          jnp.asarray(data.labels.astype(float)), jnp.ones(data.n), jnp.asarray(w),
                          jnp.asarray(w)))
    theirs = np.asarray(arena.params["ratings"])
    ours = np.concatenate([[0.0], bl.fit_mle(data, ties="half").theta[0]])
    np.testing.assert_allclose(ours[:, None] - ours[None, :], theirs[:, None] - theirs[None, :],
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize(("ties", "weighted"), [(True, True), (True, False), (False, True)])
def test_sandwich_standard_errors_equal_statsmodels_hc0(ties, weighted):
    """With ties or weights the Wald set is H⁻¹JH⁻¹'s: statsmodels' GLM Binomial, var_weights, HC0."""
    sm = pytest.importorskip("statsmodels.api")
    data, _, _, w, _ = _battles(2, nu=0.7 if ties else 0.0, weighted=weighted)
    assert data.has_ties == ties
    fit = bl.fit_mle(data)
    y = data.labels.astype(float)
    glm = sm.GLM(y, data.differences, family=sm.families.Binomial(),
                 var_weights=np.ones(data.n) if w is None else w).fit(cov_type="HC0", tol=1e-12)
    np.testing.assert_allclose(fit.theta[0], glm.params, rtol=0, atol=1e-7)
    table = fit.summary().table
    np.testing.assert_allclose(table["std_err"], glm.bse, rtol=1e-6)
    np.testing.assert_allclose(fit.calibrated_set(0.95).coordinate_widths(), glm.bse, rtol=1e-6)
    # Not the model-based errors, which assume a likelihood.
    naive = sm.GLM(y, data.differences, family=sm.families.Binomial(),
                   var_weights=np.ones(data.n) if w is None else w).fit(tol=1e-12)
    assert np.abs(table["std_err"].to_numpy() / naive.bse - 1).max() > 1e-3
    header = fit.summary().header
    assert header["ties"] == "half" and header["covariance"] == "sandwich (HC0)"


def test_without_ties_and_weights_the_information_is_the_likelihood_s():
    sm = pytest.importorskip("statsmodels.api")
    data, _, _, _, _ = _battles(3, nu=0.0, weighted=False)
    assert not data.has_ties and not data.weighted
    fit = bl.fit_mle(data)
    glm = sm.GLM(data.labels.astype(float), data.differences, family=sm.families.Binomial()).fit(tol=1e-12)
    np.testing.assert_allclose(fit.summary().table["std_err"], glm.bse, rtol=1e-6)
    header = fit.summary().header
    assert header["covariance"] == "model (information)" and "ties" not in header


def test_unit_weights_change_nothing_and_integer_weights_count_as_copies():
    data, _, _, _, _ = _battles(4, n=1500, weighted=False)
    ones = bl.PreferenceData.from_arrays(data.contexts, data.labels, differences=data.differences,
                                         weights=np.ones(data.n))
    plain, unit = bl.fit_mle(data), bl.fit_mle(ones)
    np.testing.assert_array_equal(unit.theta, plain.theta)
    np.testing.assert_array_equal(unit.calibrated_set().precision, plain.calibrated_set().precision)
    # A weight of 2 is two copies of the comparison, for the estimate (not for its sandwich).
    counts = np.random.default_rng(4).integers(1, 3, data.n)
    weighted = bl.PreferenceData.from_arrays(data.contexts, data.labels, differences=data.differences,
                                             weights=counts.astype(float))
    copies = repeated_rows(data, counts)
    np.testing.assert_allclose(bl.fit_mle(weighted).theta, bl.fit_mle(copies).theta, rtol=0, atol=1e-9)


# ----------------------------------------------------------------------------- Davidson's model


def test_davidson_matches_an_independent_maximum_likelihood_solve():
    data, _, outcome, _, _ = _battles(5, weighted=False)
    fit = bl.fit_mle(data, ties="davidson")
    ones = np.ones(data.n)
    res = _scipy_davidson(data.differences, outcome, ones)
    np.testing.assert_allclose(fit.theta[0], res.x[:-1], rtol=0, atol=1e-6)
    assert fit.nu == pytest.approx(np.exp(res.x[-1]), rel=1e-6)
    assert fit.nll == pytest.approx(res.fun, rel=1e-12)
    # Standard errors: the θ-block of the inverse expected information of (θ, log ν) (ν profiled out).
    covariance = np.linalg.inv(_davidson_information(res.x, data.differences, ones))[:-1, :-1]
    np.testing.assert_allclose(fit.summary().table["std_err"], np.sqrt(np.diag(covariance)), rtol=1e-5)
    header = fit.summary().header
    assert header["ties"] == "davidson" and header["nu"] == fit.nu
    assert header["covariance"] == "model (information)"


def test_davidson_recovers_nu_and_ratings_within_their_standard_errors():
    nu = 0.5
    data, _, _, _, truth = _battles(6, n=4000, nu=nu, weighted=False)
    fit = bl.fit_mle(data, ties="davidson")
    # Θ* inside the 99.9% Wald set (χ²₅), ν within 3.3 standard errors of log ν̂.
    assert fit.calibrated_set(0.999).contains(truth)
    info = _davidson_information(np.append(fit.theta[0], np.log(fit.nu)), data.differences, np.ones(data.n))
    se_log_nu = np.sqrt(np.linalg.inv(info)[-1, -1])
    assert se_log_nu < 0.1  # N = 4000 pins it down
    assert abs(np.log(fit.nu) - np.log(nu)) <= stats.norm.ppf(0.9995) * se_log_nu
    # The set's squared distance is χ²₅-distributed over seeds: it is not implausibly small either.
    assert fit.calibrated_set(0.999).distance(truth) ** 2 > stats.chi2.ppf(1e-4, 5)


def test_davidson_weights_use_the_sandwich_of_the_joint_fit():
    """Weights make Davidson's loss a quasi-likelihood: the sandwich of (θ, log ν), θ's block."""
    data, _, outcome, w, _ = _battles(7)
    fit = bl.fit_mle(data, ties="davidson")
    z = data.differences
    res = _scipy_davidson(z, outcome, w)
    np.testing.assert_allclose(fit.theta[0], res.x[:-1], rtol=0, atol=1e-6)
    assert fit.nu == pytest.approx(np.exp(res.x[-1]), rel=1e-6)
    d_eta, d_lam = _davidson_scores(z @ res.x[:-1], res.x[-1], outcome)
    scores = w[:, None] * np.column_stack([d_eta[:, None] * z, d_lam])
    bread = _davidson_information(res.x, z, w)
    covariance = np.linalg.solve(bread, np.linalg.solve(bread, scores.T @ scores).T)[:-1, :-1]
    np.testing.assert_allclose(fit.summary().table["std_err"], np.sqrt(np.diag(covariance)), rtol=1e-5)
    assert fit.summary().header["covariance"] == "sandwich (HC0)"


def test_davidson_without_ties_is_bradley_terry_with_a_warning():
    data, _, _, _, _ = _battles(8, n=1500, nu=0.0, weighted=False)
    assert not data.has_ties
    with pytest.warns(bl.DataWarning, match=r"no comparison is a tie.*nu = 0"):
        fit = bl.fit_mle(data, ties="davidson")
    plain = bl.fit_mle(data)
    assert fit.ties == "davidson" and fit.nu == 0.0
    np.testing.assert_array_equal(fit.theta, plain.theta)
    np.testing.assert_array_equal(fit.calibrated_set().precision, plain.calibrated_set().precision)
    assert any("no comparison is a tie" in w for w in fit.diagnostics.warnings)
    assert np.isfinite(fit.summary().table["std_err"]).all()
    all_ties = bl.PreferenceData.from_arrays(data.contexts, np.full(data.n, 0.5),
                                             differences=data.differences)
    with pytest.raises(ValueError, match="every comparison is a tie"), warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.DataWarning)  # PreferenceData's note on labels of one value
        bl.fit_mle(all_ties, ties="davidson")


# ----------------------------------------------------------------------------- FGD and PRS


@pytest.fixture(scope="module")
def contextual():
    """A small paper problem (d_x = 4, d_φ = 6, rank 2) with Davidson labels (ν = 0.6), N = 2500."""
    problem = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0)
    base = problem.sample(2500, seed=5)
    rng = np.random.default_rng(9)
    outcome = _davidson_outcomes(rng, margins(problem.theta, base.contexts, base.differences), 0.6)
    data = bl.PreferenceData.from_arrays(base.contexts, outcome / 2, differences=base.differences,
                                         actions=base.actions)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        mle = bl.fit_mle(data, ties="davidson")
        low_rank = bl.fit_low_rank(data, 2, initial=mle, ties="davidson")
        prs = bl.fit_prs(data, 2, low_rank=low_rank, ties="davidson")
    return problem, data, outcome, mle, low_rank, prs


def _davidson_gradient(theta, log_nu, data, outcome):
    """∇_Θ and ∂/∂λ of the Davidson NLL, from the test's own scores."""
    d_eta, d_lam = _davidson_scores(margins(theta, data.contexts, data.differences), log_nu, outcome)
    return data.contexts.T @ (d_eta[:, None] * data.differences), d_lam.sum()


@pytest.mark.parametrize("method", ["lbfgs", "alternating"])
def test_fgd_at_full_rank_is_davidson_s_mle(contextual, method):
    _, data, _, mle, _, _ = contextual
    with pytest.warns(bl.DataWarning, match=r"rank 4 exceeds .*\(the differences span 3\)"):
        full = bl.fit_low_rank(data, 4, initial=mle, ties="davidson", method=method, max_iter=20_000)
    assert full.diagnostics.converged
    np.testing.assert_allclose(full.theta, mle.theta, rtol=0, atol=1e-5)
    assert full.nu == pytest.approx(mle.nu, rel=1e-5)


def test_fgd_estimates_nu_at_a_stationary_point_of_the_rank_r_manifold(contextual):
    _, data, outcome, _, low_rank, _ = contextual
    grad, d_nu = _davidson_gradient(low_rank.theta, np.log(low_rank.nu), data, outcome)
    u, _, vt = np.linalg.svd(low_rank.theta, full_matrices=False)
    pu, pv = u[:, :2] @ u[:, :2].T, vt[:2].T @ vt[:2]
    tangent = pu @ grad + grad @ pv - pu @ grad @ pv
    assert np.linalg.norm(tangent) / data.n < 1e-7
    assert abs(d_nu) / data.n < 1e-7
    # The spectral start reaches the same fit.
    spectral = bl.fit_low_rank(data, 2, start="spectral", ties="davidson")
    np.testing.assert_allclose(spectral.theta, low_rank.theta, rtol=0, atol=1e-5)
    assert spectral.nu == pytest.approx(low_rank.nu, rel=1e-5)


def test_prs_reduced_mle_fits_nu_with_theta_rtv(contextual):
    _, data, outcome, _, low_rank, prs = contextual
    z = design(prs.basis, data)
    res = _scipy_davidson(z, outcome, np.ones(data.n))
    np.testing.assert_allclose(prs.theta_rtv, res.x[:-1], rtol=0, atol=1e-6)
    assert prs.nu == pytest.approx(np.exp(res.x[-1]), rel=1e-6)
    # Without a split the reduced optimum is FGD's (the tangent space at Θ̂).
    assert prs.nu == pytest.approx(low_rank.nu, rel=1e-5)
    assert abs(np.log(prs.nu) - np.log(0.6)) < 0.2
    # The Wald precision: the Schur complement I_θθ − I_θλ I_λλ⁻¹ I_λθ (ν profiled out); the paper's
    # features leave some RTV directions unreached, so it is compared as a matrix, not as its inverse.
    info = _davidson_information(res.x, z, np.ones(data.n))
    profiled = info[:-1, :-1] - np.outer(info[:-1, -1], info[:-1, -1]) / info[-1, -1]
    precision = prs.calibrated_set(0.95).precision
    np.testing.assert_allclose(precision, profiled, rtol=0, atol=1e-6 * np.abs(profiled).max())
    assert np.linalg.matrix_rank(profiled) < prs.k


def test_weighted_low_rank_fits_count_weights_as_copies(contextual):
    _, data, _, _, _, _ = contextual
    counts = np.random.default_rng(2).integers(1, 3, data.n)
    weighted = bl.PreferenceData.from_arrays(data.contexts, data.labels, differences=data.differences,
                                             weights=counts.astype(float))
    copies = repeated_rows(data, counts)
    # The same score and line: equal up to Brent's tolerance on the step α (relative 1.5e-8).
    np.testing.assert_allclose(bl.spectral_start(weighted, 2), bl.spectral_start(copies, 2), rtol=1e-7,
                               atol=1e-12)
    for ties in ("half", "davidson"):
        a, b = bl.fit_prs(weighted, 2, ties=ties), bl.fit_prs(copies, 2, ties=ties)
        np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-5)
        assert a.nu == pytest.approx(b.nu, rel=1e-5) if ties == "davidson" else a.nu is None


def test_contextual_sandwich_equals_statsmodels_and_the_low_rank_fit_s_own(kron):
    """The sandwich in vec(Θ) (the MLE, on the Kronecker design) and in RTV coordinates (FGD's fit)."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(12)
    n = 3000
    x, dphi = rng.normal(size=(n, 3)), rng.normal(size=(n, 4))
    truth = rng.normal(size=(3, 2)) @ rng.normal(size=(2, 4)) / 2
    y = _davidson_outcomes(rng, margins(truth, x, dphi), 0.8) / 2
    w = rng.uniform(0.5, 2.0, n)
    weighted = bl.PreferenceData.from_arrays(x, y, differences=dphi, weights=w)
    mle = bl.fit_mle(weighted)
    glm = sm.GLM(y, kron(x, dphi), family=sm.families.Binomial(),
                 var_weights=w).fit(cov_type="HC0", tol=1e-12)
    np.testing.assert_allclose(mle.theta.ravel(), glm.params, rtol=0, atol=1e-6)
    np.testing.assert_allclose(mle.summary().table["std_err"], glm.bse, rtol=1e-6)
    low_rank = bl.fit_low_rank(weighted, 2)
    z = design(low_rank.coordinates, weighted)
    p = expit(margins(low_rank.theta, x, dphi))
    bread = z.T @ ((w * p * (1 - p))[:, None] * z)
    meat = z.T @ (((w * (y - p)) ** 2)[:, None] * z)
    expected = bread @ np.linalg.pinv(meat, rcond=1e-10, hermitian=True) @ bread
    precision = low_rank.calibrated_set().precision
    np.testing.assert_allclose(precision, expected, rtol=0, atol=1e-8 * np.abs(expected).max())


def test_pessimistic_policy_runs_on_tie_fits_calibrated_sets(contextual):
    problem, data, _, _, _, prs = contextual
    population = problem.population(40, seed=3)
    half = bl.fit_prs(data, 2, ties="half")
    for fit in (prs, half):
        wald = fit.calibrated_set(0.9)
        # The identified directions are the comparisons' (the Gram W's), whatever the tie model.
        assert wald.kind == "wald" and wald.level == 0.9
        assert wald.effective_dim == fit.penalty_set().effective_dim == 10
        for objective in ("relaxed", "exact"):
            policy = bl.pessimistic_policy(wald, population, objective=objective)
            np.testing.assert_allclose(policy.probabilities.sum(axis=1), 1.0)
            assert policy.pessimistic_value >= -1e-9  # never below the reference action's own value
            assert policy.level == 0.9
    # The two tie models give different sets around different centres.
    assert np.abs(prs.calibrated_set().precision - half.calibrated_set().precision).max() > 1e-3


# ----------------------------------------------------------------------------- files and arguments


def test_save_and_load_keep_ties_and_nu(contextual, tmp_path):
    _, data, _, mle, low_rank, prs = contextual
    for name, fit in (("mle", mle), ("fgd", low_rank), ("prs", prs), ("half", bl.fit_mle(data))):
        path = bl.save(fit, tmp_path / f"{name}.nc")
        loaded = bl.load(path)
        assert type(loaded) is type(fit)
        assert loaded.ties == fit.ties and loaded.nu == fit.nu
        np.testing.assert_array_equal(loaded.theta, fit.theta)
        np.testing.assert_array_equal(loaded.calibrated_set().precision, fit.calibrated_set().precision)
    assert bl.load(tmp_path / "half.nc").nu is None and bl.load(tmp_path / "prs.nc").ties == "davidson"


def test_fits_saved_before_ties_existed_load_as_half():
    """tests/fixtures/format1/prs.nc was written by the package of commit b4af530, without ``ties``/``nu``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        prs = bl.load(Path(__file__).parent / "fixtures" / "format1" / "prs.nc")
    for fit in (prs, prs.low_rank, prs.low_rank.initial):
        assert fit.ties == "half" and fit.nu is None
    assert not prs.estimation_data.has_ties and not prs.estimation_data.weighted
    assert prs.calibrated_set().effective_dim == prs.penalty_set().effective_dim


def test_ties_argument_and_fields_are_validated(contextual):
    _, data, _, mle, low_rank, _ = contextual
    for fit in (lambda: bl.fit_mle(data, ties="draw"), lambda: bl.fit_low_rank(data, 2, ties="draw"),
                lambda: bl.fit_prs(data, 2, ties="draw")):
        with pytest.raises(ValueError, match=r"^ties must be one of 'half', 'davidson'; got 'draw'"):
            fit()
    with pytest.raises(ValueError, match=r"initial was fitted with ties='davidson', this fit has ties='half'"
                       ):
        bl.fit_low_rank(data, 2, initial=mle)
    with pytest.raises(ValueError, match=r"low_rank was fitted with ties='davidson', this fit has ties="
                       ):
        bl.fit_prs(data, 2, low_rank=low_rank)
    fields = {f: getattr(mle, f) for f in ("theta", "data", "nll", "max_abs_margin", "separated", "ridge",
                                           "diagnostics")}
    with pytest.raises(ValueError, match="a fit with ties='half' has nu None"):
        bl.MLEResult(**fields, ties="half", nu=0.5)
    with pytest.raises(ValueError, match="needs its ν̂"):
        bl.MLEResult(**fields, ties="davidson")
    with pytest.raises(ValueError, match="nu"):
        bl.MLEResult(**fields, ties="davidson", nu=-1.0)
    with pytest.raises(ValueError, match="ties must be one of"):
        bl.MLEResult(**fields, ties="draw")
    assert bl.MLEResult(**fields).ties == "half"  # fits made before ties existed
