"""bayes_loco.plots: every figure is rendered with Agg and its axes are checked against the geometry.

Each test draws on a ``matplotlib.figure.Figure`` (no pyplot state) and compares the plotted
artists with a brute-force computation: projected ellipses against the projected quadratic
form, reward intervals against θ̂ᵀz ± R‖z‖_{W⁻¹} and min/max over draws, the spectrum against
``np.linalg.eigvalsh``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import linalg
from scipy.spatial import ConvexHull

import bayes_loco as bl
from bayes_loco import plots
from bayes_loco.coordinates import VecCoordinates
from bayes_loco.sets import DrawsSet, EllipsoidSet, QuantileSet

COORDS = VecCoordinates(2, 3)  # k = 6


def new_axes():
    return Figure().add_subplot()


def lines(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


def legend_texts(ax):
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def ellipsoid(w, radius=2.0, center=None, kind="wald"):
    w = np.asarray(w, dtype=float)
    center = np.arange(1.0, 7.0) if center is None else np.asarray(center, dtype=float)
    return EllipsoidSet(center, w, radius, COORDS, kind=kind, level=0.9)


def random_pd(seed, k=6):
    a = np.random.default_rng(seed).standard_normal((k, k))
    return a @ a.T + 0.5 * np.eye(k)


def projected_form(points, s, p):
    """(y − Pᵀθ̂)ᵀ (Pᵀ W⁺ P)⁻¹ (y − Pᵀθ̂) for the plotted points y (2 × n)."""
    shape = p.T @ linalg.pinv(s.precision) @ p
    d = points - (p.T @ s.center)[:, None]
    return np.einsum("in,ij,jn->n", d, np.linalg.inv(shape), d)


@pytest.fixture(scope="module")
def real():
    """A real PRS fit of the paper's simulation (small), its sets, a population and an exact policy."""
    problem = bl.simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0)
    fit = bl.fit_prs(problem.sample(800, seed=3), 2)
    population = problem.population(30, seed=1)
    wald, gram = fit.calibrated_set(0.9), fit.penalty_set(5.0)
    policy = bl.pessimistic_policy(wald, population, objective="exact")
    return problem, fit, population, wald, gram, policy


# ------------------------------------------------------------------------------------ plot_sets


def test_plot_sets_draws_the_projected_ellipse_of_each_set():
    ax = new_axes()
    unit = ellipsoid(np.eye(6), radius=2.0)
    skew = ellipsoid(random_pd(0), radius=1.5, kind="credible")
    out = plots.plot_sets({"unit": unit, "skew": skew}, directions=(0, 1), ax=ax)
    assert out is ax
    assert ax.get_xlabel() == "θ [0,0]" and ax.get_ylabel() == "θ [0,1]"
    curves = lines(ax, "ellipse")
    assert [c.get_label() for c in curves] == ["unit", "skew"]  # one closed line per ellipsoid
    assert len(lines(ax, "centre")) == 2 and not lines(ax, "truth")
    # W = I, R = 2: a circle of radius 2 around the centre's first two coordinates.
    xy = np.vstack(curves[0].get_data())
    np.testing.assert_allclose(np.hypot(xy[0] - 1.0, xy[1] - 2.0), 2.0, rtol=1e-12)
    # Any W: the points lie on the projected quadratic form at R².
    np.testing.assert_allclose(projected_form(np.vstack(curves[1].get_data()), skew, np.eye(6)[:, :2]),
                               1.5**2, rtol=1e-9)
    assert legend_texts(ax) == ["unit", "skew"]


def test_plot_sets_orthonormalises_direction_vectors_and_marks_the_truth():
    ax = new_axes()
    s = ellipsoid(random_pd(1))
    raw = np.random.default_rng(2).standard_normal((6, 2))
    truth = np.random.default_rng(3).standard_normal((2, 3))  # Θ*, mapped by to_coordinates
    plots.plot_sets([s], directions=raw, truth=truth, labels=("first", "second"), ax=ax)
    q, r = np.linalg.qr(raw)
    p = q * np.sign(np.diag(r))
    (curve,) = lines(ax, "ellipse")
    assert curve.get_label() == "wald"  # a sequence is named by kind
    np.testing.assert_allclose(projected_form(np.vstack(curve.get_data()), s, p), 4.0, rtol=1e-9)
    (star,) = lines(ax, "truth")
    assert star.get_label() == "θ*" and star.get_marker() == "*"
    np.testing.assert_allclose(np.ravel(star.get_data()), p.T @ truth.ravel())
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("first", "second")
    assert "θ*" in legend_texts(ax)


def test_plot_sets_without_directions_takes_where_the_first_two_sets_differ_most():
    ax = new_axes()
    # Spreads R²W⁻¹: I against diag(1, 1, 1, 1, 0.01, 100): the width ratio is largest along
    # coordinate 4 (×10) and smallest along coordinate 5 (×0.1).
    round_, flat = ellipsoid(np.eye(6), 1.0), ellipsoid(np.diag([1, 1, 1, 1, 100, 0.01]), 1.0)
    plots.plot_sets({"round": round_, "flat": flat}, ax=ax)
    flat_curve = np.vstack(lines(ax, "ellipse")[1].get_data()) - np.array([[5.0], [6.0]])
    np.testing.assert_allclose(np.abs(flat_curve).max(axis=1), [0.1, 10.0], rtol=1e-6)
    assert "'round' is widest relative to 'flat'" in ax.get_xlabel()
    assert "'flat' is widest relative to 'round'" in ax.get_ylabel()


def test_plot_sets_draws_hulls_of_draws_and_the_draws():
    ax = new_axes()
    draws = np.random.default_rng(4).standard_normal((60, 6))
    hull = DrawsSet(draws[:40], COORDS, level=0.9)
    plots.plot_sets({"hull": hull, "ellipse": ellipsoid(np.eye(6))}, directions=("[0,2]", "[1,0]"),
                    draws=draws, ax=ax)
    (ring,) = lines(ax, "hull")
    projected = draws[:40][:, [2, 3]]
    expected = projected[ConvexHull(projected).vertices]
    drawn = np.vstack(ring.get_data()).T
    np.testing.assert_allclose(drawn[0], drawn[-1])  # closed
    assert sorted(map(tuple, drawn[:-1])) == sorted(map(tuple, expected))
    scattered = {c.get_gid(): c.get_offsets() for c in ax.collections}
    assert len(scattered["draws"]) == 60 and len(scattered["hull draws"]) == 40
    assert legend_texts(ax) == ["draws (60)", "hull", "ellipse"]


def test_plot_sets_draws_the_draws_grey_and_the_hull_in_its_colour():
    draws = np.random.default_rng(5).standard_normal((50, 6))
    sets = {"ellipse": ellipsoid(np.eye(6)), "hull": DrawsSet(draws[:30], COORDS, level=0.9)}
    for given in (draws, None):
        ax = new_axes()
        plots.plot_sets(sets, directions=(0, 1), draws=given, ax=ax)
        (ring,) = lines(ax, "hull")
        hull_rgb = matplotlib.colors.to_rgb(ring.get_color())
        assert hull_rgb == matplotlib.colors.to_rgb("C1")  # the second set's colour
        scatters = [c for c in ax.collections if c.get_gid() in ("draws", "hull draws")]
        assert len(scatters) == (2 if given is not None else 1)
        for scatter in scatters:
            (rgba,) = np.unique(scatter.get_facecolor()[:, :3], axis=0)
            assert rgba[0] == rgba[1] == rgba[2], f"{scatter.get_gid()} are not grey: {rgba}"
            assert not np.allclose(rgba, hull_rgb), f"{scatter.get_gid()} take the hull's colour"
        # The legend's grey entry names the draws once: the passed draws, or else the hull's own.
        grey = [t for t in legend_texts(ax) if t.startswith("draws")]
        assert grey == (["draws (50)"] if given is not None else ["draws of hull (30)"])


def test_plot_sets_puts_its_legend_off_the_axes():
    fig = Figure(layout="constrained")
    ax = fig.add_subplot()
    plots.plot_sets({"unit": ellipsoid(np.eye(6))}, directions=(0, 1), truth=np.zeros((2, 3)), ax=ax)
    fig.draw_without_rendering()  # the layout, and so the legend's place, is settled only once drawn
    legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= frame.x1, "the legend overlaps the drawing"
    assert fig.bbox.contains(legend.x1 - 1, legend.y0 + 1), "the legend is cut off the figure"


def test_plot_sets_says_where_an_ellipsoid_is_unbounded():
    w = np.diag([4.0, 0.0, 1.0, 1.0, 1.0, 0.0])  # coordinates 1 and 5 are not identified
    s = ellipsoid(w, radius=2.0)
    ax = new_axes()
    plots.plot_sets({"cyl": s}, directions=(0, 1), ax=ax)
    strip = lines(ax, "strip")
    assert len(strip) == 2 and not lines(ax, "ellipse")
    assert "unbounded" in strip[0].get_label()
    # The strip |θ₀ − 1| ≤ R/√4 = 1, unbounded along θ₁.
    assert sorted(line._xy1[0] for line in strip) == pytest.approx([0.0, 2.0])
    ax = new_axes()
    plots.plot_sets({"cyl": s}, directions=(1, 5), ax=ax)
    assert not lines(ax, "strip") and "unbounded in this plane" in legend_texts(ax)[0]


def test_plot_sets_refuses_bad_input_naming_the_argument():
    s = ellipsoid(np.eye(6))
    other = EllipsoidSet(np.zeros(4), np.eye(4), 1.0, VecCoordinates(2, 2))
    with pytest.raises(ValueError, match=r"sets.*k = 6.*k = 4"):
        plots.plot_sets({"a": s, "b": other}, directions=(0, 1), ax=new_axes())
    quantile = QuantileSet(np.random.default_rng(0).standard_normal((20, 6)), COORDS)
    with pytest.raises(TypeError, match=r"sets\['q'\] is a QuantileSet"):
        plots.plot_sets({"a": s, "q": quantile}, ax=new_axes())
    with pytest.raises(ValueError, match=r"directions: '11\[0,0\]' is not a coordinate label"):
        plots.plot_sets([s], directions=("11[0,0]", "[0,1]"), ax=new_axes())
    with pytest.raises(ValueError, match="directions"):
        plots.plot_sets([s], directions=(0, 0), ax=new_axes())
    with pytest.raises(ValueError, match="directions"):
        plots.plot_sets([s], directions=(0, 6), ax=new_axes())
    with pytest.raises(ValueError, match=r"directions.*parallel"):
        plots.plot_sets([s], directions=np.ones((6, 2)), ax=new_axes())
    with pytest.raises(ValueError, match="draws"):
        plots.plot_sets([s], directions=(0, 1), draws=np.zeros((5, 4)), ax=new_axes())
    with pytest.raises(ValueError, match="truth"):
        plots.plot_sets([s], directions=(0, 1), truth=np.zeros(5), ax=new_axes())
    with pytest.raises(ValueError, match="sets is empty"):
        plots.plot_sets({}, ax=new_axes())


def test_plots_that_decompose_w_refuse_a_set_that_holds_only_its_factor(monkeypatch):

    bl.set_config(factored_min=1)
    factored = EllipsoidSet.factored(np.zeros(6), np.eye(6), 1.0, COORDS)
    with pytest.raises(ValueError, match=r"plot_sets: the set holds only W's Cholesky factor \(k = 6"):
        plots.plot_sets([factored], directions=(0, 1), ax=new_axes())
    with pytest.raises(ValueError, match=r"items\['f'\]: the set holds only W's Cholesky factor"):
        plots.plot_spectrum({"f": factored}, ax=new_axes())


def test_value_direction_gives_the_exact_policy_its_pessimistic_value(real):
    problem, fit, population, wald, gram, policy = real
    m = plots.value_direction(policy, wald, population)
    assert m.shape == (fit.coordinates.dim,)
    assert float(wald.lower_bound(m)) == pytest.approx(policy.pessimistic_value, rel=1e-9)
    ax = new_axes()
    other = np.eye(m.size)[0]
    plots.plot_sets({"Wald": wald, "Gram": gram}, directions=np.column_stack([m, other]), truth=problem,
                    ax=ax)
    # Along m/‖m‖ the Wald ellipse's leftmost point is the policy's worst case over the set.
    left = lines(ax, "ellipse")[0].get_xdata().min() * np.linalg.norm(m)
    assert left == pytest.approx(policy.pessimistic_value, rel=1e-4)
    (star,) = lines(ax, "truth")
    theta_star = fit.coordinates.to_coordinates(problem.theta)
    assert star.get_xdata()[0] == pytest.approx(theta_star @ m / np.linalg.norm(m))
    assert ax.get_xlabel().startswith("d₁ᵀθ_rtv")


# --------------------------------------------------------------------------------- plot_spectrum


def test_plot_spectrum_marks_k_eff_where_the_eigenvalues_drop(real):
    _, fit, _, wald, gram, _ = real
    handmade = ellipsoid(np.diag([5.0, 4.0, 3.0, 2.0, 0.0, 0.0]))
    ax = new_axes()
    plots.plot_spectrum({"hand": handmade, "gram": gram, "fit": fit, "full": 2.0 * np.eye(3)}, ax=ax)
    assert ax.get_yscale() == "log"
    assert ax.get_ylabel() == "eigenvalue λᵢ of W" and "decreasing" in ax.get_xlabel()
    spectra, cuts = lines(ax, "spectrum"), lines(ax, "k_eff")
    assert len(spectra) == 4 and len(cuts) == 3  # no cut where every direction is identified
    assert spectra[3].get_label() == "full (k = 3, k_eff = 3)"
    matrices = (handmade.precision, gram.precision, wald.precision)
    for curve, cut, w in zip(spectra, cuts, matrices, strict=False):
        vals = np.linalg.eigvalsh(w)[::-1]
        k_eff = int((vals > 1e-10 * vals[0]).sum())
        assert f"k = {w.shape[0]}, k_eff = {k_eff}" in curve.get_label()
        np.testing.assert_allclose(cut.get_xdata(), k_eff + 0.5)
        np.testing.assert_allclose(curve.get_ydata(), vals[:k_eff], rtol=1e-8)
    assert len(lines(ax, "unidentified")[0].get_xdata()) == 2  # the hand-made W's two zero eigenvalues
    assert any(text.startswith("k_eff cut") for text in legend_texts(ax))
    with pytest.raises(TypeError, match="items"):
        plots.plot_spectrum([gram], ax=new_axes())
    with pytest.raises(TypeError, match=r"items\['q'\]"):
        plots.plot_spectrum({"q": QuantileSet(np.zeros((3, 6)), COORDS)}, ax=new_axes())


# ------------------------------------------------------------------------- plot_reward_intervals


def small_population(n=5, actions=4, seed=0):
    rng = np.random.default_rng(seed)
    return bl.Population(rng.uniform(-1, 1, (n, 2)), rng.standard_normal((n, actions, 3)), np.arange(n))


def intervals(ax, name):
    (container,) = [c for c in ax.containers if c.get_label() == name]
    segments = container.lines[2][0].get_segments()
    return np.array([[seg[0][0], seg[1][0]] for seg in segments])


def test_plot_reward_intervals_match_brute_force():
    population = small_population()
    w = random_pd(5)
    s = ellipsoid(w, radius=1.7)
    draws = np.random.default_rng(6).standard_normal((50, 6))
    hull, quantile = DrawsSet(draws, COORDS), QuantileSet(draws, COORDS, level=0.8)
    truth = np.random.default_rng(7).standard_normal((2, 3))
    row, ref = 3, 1
    ax = new_axes()
    plots.plot_reward_intervals({"ellipsoid": s, "hull": hull, "quantile": quantile}, population, row,
                                truth=truth, reference_action=ref, ax=ax)
    x, phi = population.contexts[row], population.features[row]
    z = np.array([np.outer(x, phi[a] - phi[ref]).ravel() for a in range(4)])
    half = 1.7 * np.sqrt(np.einsum("ai,ij,aj->a", z, linalg.pinv(w), z))
    np.testing.assert_allclose(intervals(ax, "ellipsoid"), np.c_[z @ s.center - half, z @ s.center + half],
                               atol=1e-10)
    values = z @ draws.T
    np.testing.assert_allclose(intervals(ax, "hull"), np.c_[values.min(1), values.max(1)], atol=1e-12)
    np.testing.assert_allclose(intervals(ax, "quantile"),
                               np.c_[np.quantile(values, 0.2, axis=1), np.quantile(values, 0.8, axis=1)],
                               atol=1e-12)
    (marker,) = lines(ax, "truth")
    reward = x @ truth @ phi.T
    np.testing.assert_allclose(marker.get_xdata(), reward - reward[ref])
    assert legend_texts(ax) == ["true r*(a) − r*(a_ref)", "ellipsoid", "hull", "quantile"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a = 0", "a = 1 (ref.)", "a = 2", "a = 3"]
    assert "reward difference" in ax.get_xlabel() and ax.get_ylabel() == "action"
    assert "row 3" in ax.get_title()
    far = new_axes()  # a truth far outside every interval stays inside the axes
    plots.plot_reward_intervals({"ellipsoid": s}, population, row, truth=50 * truth, reference_action=ref,
                                ax=far)
    left, right = far.get_xlim()
    assert left <= 50 * (reward - reward[ref]).min() and 50 * (reward - reward[ref]).max() <= right


def test_plot_reward_intervals_draw_unbounded_ends_to_the_edge():
    population = small_population()
    cylinder = ellipsoid(np.diag([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]))  # z leaves range(W): both ends unbounded
    ax = new_axes()
    plots.plot_reward_intervals({"cyl": cylinder, "ball": ellipsoid(np.eye(6))}, population, 0, ax=ax)
    arrows = [line for line in ax.get_lines() if line.get_label() == "_cyl unbounded"]
    assert sorted(line.get_marker() for line in arrows) == ["<", ">"]
    assert all(len(line.get_xdata()) == 3 for line in arrows)  # every action but the reference
    left, right = ax.get_xlim()
    np.testing.assert_allclose(intervals(ax, "cyl")[1:], [[left, right]] * 3)


def test_plot_reward_intervals_without_truth_and_with_a_real_fit(real):
    _, _, population, wald, gram, _ = real
    ax = new_axes()
    plots.plot_reward_intervals([wald, gram], population, 0, ax=ax)
    assert not lines(ax, "truth") and len(ax.containers) == 2
    assert legend_texts(ax) == ["wald", "gram"]
    z = bl.policy.candidate_features(wald, population)[0]
    np.testing.assert_allclose(intervals(ax, "wald")[:, 0], wald.lower_bound(z), atol=1e-10)
    with pytest.raises(ValueError, match="row"):
        plots.plot_reward_intervals([wald], population, population.n, ax=new_axes())
    with pytest.raises(ValueError, match="truth"):
        plots.plot_reward_intervals([wald], population, 0, truth=np.zeros((2, 2)), ax=new_axes())


# --------------------------------------------------------------------------------- plot_policies


def policy(probabilities, scope="personalised"):
    probabilities = np.asarray(probabilities, dtype=float)
    return bl.Policy(probabilities, np.arange(len(probabilities)), scope, "exact", 0, 0.0, 0.0)


def test_plot_policies_stacks_each_units_probabilities():
    mixed = policy([[1, 0, 0], [0.3, 0.7, 0], [0, 0, 1]])
    pure = policy([[0, 1, 0], [0, 1, 0], [1, 0, 0]])
    ax = new_axes()
    plots.plot_policies({"mixed": mixed, "pure": pure}, ax=ax)
    bars = {name: [p for p in ax.patches if p.get_gid() == f"policy {name}"] for name in ("mixed", "pure")}
    assert len(bars["mixed"]) == 4 and len(bars["pure"]) == 3  # the mixed unit has two segments
    unit1 = sorted(p.get_height() for p in bars["mixed"] if abs(p.get_x() + p.get_width() / 2 - 1) < 1e-9)
    assert unit1 == pytest.approx([0.8 * 0.3, 0.8 * 0.7])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["mixed\n(1 of 3 mixed)", "pure\n(0 of 3 mixed)"]
    assert legend_texts(ax) == ["a = 0", "a = 1", "a = 2"]
    assert ax.get_xlabel() == "population row (x, s), first 3"
    ax = new_axes()
    plots.plot_policies({"mixed": mixed}, max_units=2, ax=ax)
    assert len(ax.patches) == 3
    with pytest.raises(ValueError, match="policies"):
        plots.plot_policies({"a": mixed, "b": policy([[1, 0, 0]])}, ax=new_axes())
    with pytest.raises(TypeError, match=r"policies\['x'\]"):
        plots.plot_policies({"x": "greedy"}, ax=new_axes())


def test_plot_policies_of_real_methods_on_one_population(real):
    _, fit, population, _, gram, exact = real
    greedy = bl.greedy_policy(fit.theta, population)
    relaxed = bl.pessimistic_policy(gram, population)
    ax = new_axes()
    plots.plot_policies({"greedy": greedy, "PRS": relaxed, "exact Wald": exact}, max_units=20, ax=ax)
    shown = exact.probabilities[:20]
    assert len([p for p in ax.patches if p.get_gid() == "policy exact Wald"]) == int((shown > 1e-9).sum())
    assert f"({int((shown.max(1) < 1 - 1e-9).sum())} of 20 mixed)" in ax.get_yticklabels()[2].get_text()


# ------------------------------------------------------------------------------- backend, ax=None


def test_functions_create_a_figure_when_no_axes_is_given_and_leave_rcparams_alone(real):
    _, _, population, wald, gram, exact = real
    before = dict(matplotlib.rcParams)
    made = [plots.plot_sets([wald, gram]), plots.plot_spectrum({"w": wald}),
            plots.plot_reward_intervals([wald], population, 0), plots.plot_policies({"e": exact})]
    try:
        for ax in made:
            assert isinstance(ax, matplotlib.axes.Axes) and ax.figure is not None
        assert dict(matplotlib.rcParams) == before
    finally:
        for ax in made:
            plt.close(ax.figure)
    with pytest.raises(TypeError, match="ax"):
        plots.plot_spectrum({"w": wald}, ax="axes")


def test_importing_bayes_loco_plots_leaves_the_backend_alone():
    env = {**os.environ, "MPLBACKEND": "svg"}
    code = "import matplotlib; import bayes_loco.plots; print(matplotlib.get_backend())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "svg"
