"""bayes_loco.save / bayes_loco.load: every result type round-trips bit for bit, through netCDF and pickle.

A saved fit gives the same policy as the original; a posterior saved in one
process and loaded in another gives the same credible sets and exact policy;
files of another format version, foreign files and foreign types are refused.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import bayes_loco as bl
from bayes_loco import simulate
from bayes_loco.io import FORMAT_VERSION, load, save

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- exact comparison


def assert_same(a, b, where: str = "result") -> None:
    """``b`` is ``a`` rebuilt: same classes, arrays bit-identical with dtypes, scalars of the same type."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} became {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), f"{where}: values differ"
        assert a.tobytes() == b.tobytes(), f"{where}: bits differ"
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, xr.DataTree):
        assert_same_tree(a, b, where)
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, enum.Enum):
        assert a is b, f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, float):
        same = (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        assert same, f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_tree(a: xr.DataTree, b: xr.DataTree, where: str) -> None:
    """Same groups in the same order, identical variables (dtypes too) and attributes of the same types."""
    assert a.identical(b), f"{where}: trees are not identical"
    assert [n.path for n in a.subtree] == [n.path for n in b.subtree], f"{where}: groups differ"
    for x, y in zip(a.subtree, b.subtree, strict=True):
        assert_same(dict(x.attrs), dict(y.attrs), f"{where}{x.path}.attrs")
        assert list(x.variables) == list(y.variables), f"{where}{x.path}: variables differ"
        for name in x.variables:
            vx, vy = x.variables[name], y.variables[name]
            assert vx.dims == vy.dims, f"{where}{x.path}/{name}: dims differ"
            assert_same(np.asarray(vx.values), np.asarray(vy.values), f"{where}{x.path}/{name}")
            assert_same(dict(vx.attrs), dict(vy.attrs), f"{where}{x.path}/{name}.attrs")


def roundtrip(obj, tmp_path: Path, name: str = "result.nc"):
    path = save(obj, tmp_path / name)
    assert path == tmp_path / name and path.is_file()
    return load(path)


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def small():
    """A small paper simulation, every frequentist fit of it, sets and policies."""
    problem = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0)
    data = problem.sample(600, seed=3)
    population = problem.population(50, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        mle = bl.fit_mle(data)
        low_rank = bl.fit_low_rank(data, 2, initial=mle)
        prs = bl.fit_prs(data, 2, low_rank=low_rank)
        ranks = bl.select_rank(data, [1, 2])
    return problem, data, population, mle, low_rank, prs, ranks


@pytest.fixture(scope="module")
def results(small, random_problem):
    """One object of every saved type, by name."""
    problem, data, population, mle, low_rank, prs, ranks = small
    penalty, calibrated = prs.penalty_set(5.0), prs.calibrated_set(0.9)
    rng = np.random.default_rng(5)
    draws = prs.estimate + 0.05 * rng.standard_normal((40, prs.estimate.shape[0]))
    draws_set = bl.DrawsSet(draws, prs.coordinates, level=0.9)
    quantile_set = bl.QuantileSet(draws, prs.coordinates, 0.8)
    grouped = problem.population(10, seed=2, contexts_per_state=3)
    return {
        "data": data,
        "data_without_actions": random_problem.data,
        "population": population,
        "vec_coordinates": mle.coordinates,
        "rtv_basis": prs.coordinates,
        "penalty_set": penalty,
        "calibrated_set": calibrated,
        "mle_calibrated_set": mle.calibrated_set(0.9),
        "draws_set": draws_set,
        "cvar_set": bl.DrawsSet(draws, prs.coordinates, kind="cvar", level=0.9, tail=0.1),
        "value_sized_set": bl.sets.size_for_values(calibrated, grouped, scope="global", draws=50),
        "quantile_set": quantile_set,
        "exact_policy": bl.pessimistic_policy(calibrated, population, objective="exact"),
        "exact_draws_policy": bl.pessimistic_policy(draws_set, population, objective="exact"),
        "relaxed_policy": bl.pessimistic_policy(penalty, population, objective="relaxed"),
        "global_policy": bl.pessimistic_policy(calibrated, grouped, objective="exact", scope="global"),
        "greedy_policy": bl.greedy_policy(prs.theta, population),
        "mle": mle,
        "low_rank": low_rank,
        "spectral_low_rank": bl.fit_low_rank(data, 2, start="spectral"),
        "prs": prs,
        "rank_selection": ranks,
        "diagnostics": prs.diagnostics,
        "problem": problem,
    }


NAMES = ["data", "data_without_actions", "population", "vec_coordinates", "rtv_basis", "penalty_set",
         "calibrated_set", "mle_calibrated_set", "draws_set", "cvar_set", "value_sized_set", "quantile_set",
         "exact_policy",
         "exact_draws_policy", "relaxed_policy", "global_policy", "greedy_policy", "mle", "low_rank",
         "spectral_low_rank", "prs",
         "rank_selection", "diagnostics", "problem"]


# ---------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", NAMES)
def test_round_trip(results, name, tmp_path):
    original = results[name]
    assert_same(original, roundtrip(original, tmp_path))


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip(results, name):
    original = results[name]
    assert_same(original, pickle.loads(pickle.dumps(original)))


def test_round_trip_keeps_the_types_the_comparison_checks(results, tmp_path):
    """The helper above is only as good as the values it sees: make sure they are the typed ones."""
    policy = roundtrip(results["exact_policy"], tmp_path)
    assert isinstance(policy.certificate, bl.Certificate)
    assert isinstance(policy.status, bl.PolicyStatus) and policy.status is results["exact_policy"].status
    assert type(policy.reference_action) is int and type(policy.pessimistic_value) is float
    assert policy.unit_of_row.dtype == results["exact_policy"].unit_of_row.dtype
    assert roundtrip(results["relaxed_policy"], tmp_path).certificate is None
    data = roundtrip(results["data"], tmp_path)
    assert data.labels.dtype == np.int8 and data.actions.dtype == results["data"].actions.dtype
    assert roundtrip(results["data_without_actions"], tmp_path).actions is None
    assert roundtrip(results["population"], tmp_path).states.dtype == np.intp
    assert roundtrip(results["penalty_set"], tmp_path).level is None
    ranks = roundtrip(results["rank_selection"], tmp_path)
    assert isinstance(ranks.fits, tuple) and ranks.rank == results["rank_selection"].rank
    diagnostics = roundtrip(results["diagnostics"], tmp_path)
    assert isinstance(diagnostics.status, bl.FitStatus) and isinstance(diagnostics.warnings, tuple)
    assert type(diagnostics.converged) is bool


def test_shared_objects_stay_shared(results, tmp_path):
    """An object reached twice (the data under PRS, FGD and the MLE) is stored once and loaded once."""
    prs = results["prs"]
    back = roundtrip(prs, tmp_path)
    for get in (lambda r: r.low_rank.initial.data, lambda r: r.low_rank.data):
        assert (get(back) is back.estimation_data) == (get(prs) is prs.estimation_data)
    assert back.low_rank.data is back.low_rank.initial.data


def test_numpy_scalars_and_odd_values_keep_their_types(results, tmp_path):
    """NumPy scalars, NaN, −0.0, unicode and nested tuples come back exactly."""
    diagnostics = dataclasses.replace(results["diagnostics"], n_iter=np.int64(7), seconds=-0.0,
                                      max_rhat=np.float32(1.5), min_ess_bulk=np.nan,
                                      message="‖∇F‖ ≤ 1e-8 — ok", warnings=("a", "β"))
    assert_same(diagnostics, roundtrip(diagnostics, tmp_path))
    policy = dataclasses.replace(results["exact_policy"], pessimistic_value=np.float64(0.25),
                                 rounded_value=None, reference_action=np.int32(0))
    assert_same(policy, roundtrip(policy, tmp_path))


def test_loaded_file_is_closed_and_can_be_overwritten(results, tmp_path):
    path = save(results["data"], str(tmp_path / "data.nc"))
    first = load(str(path))
    save(results["population"], path)  # the file is not held open by the first load
    assert_same(results["population"], load(path))
    assert_same(results["data"], first)
    assert not list(tmp_path.glob(".*tmp")), "the temporary file of the atomic write was left behind"


# ----------------------------------------------------------------------- policies of loaded fits


@pytest.mark.parametrize(("make_set", "objective"), [
    (lambda fit: fit.calibrated_set(0.9), "exact"),
    (lambda fit: fit.penalty_set(5.0), "relaxed"),
    (lambda fit: fit.penalty_set(5.0), "exact"),
], ids=["calibrated-exact", "penalty-relaxed", "penalty-exact"])
def test_policy_of_a_loaded_fit_is_bit_identical(small, tmp_path, make_set, objective):
    _, _, population, _, _, prs, _ = small
    loaded = roundtrip(prs, tmp_path)
    original_set, loaded_set = make_set(prs), make_set(loaded)
    assert_same(original_set, loaded_set)
    before = bl.pessimistic_policy(original_set, population, objective=objective)
    after = bl.pessimistic_policy(loaded_set, population, objective=objective)
    assert_same(before, after)
    if objective == "exact":
        assert after.certificate is not None and after.theta is not None


def test_policy_of_a_loaded_mle_and_low_rank_fit_is_bit_identical(small, tmp_path):
    _, _, population, mle, low_rank, _, _ = small
    for fit in (mle, low_rank):
        loaded = roundtrip(fit, tmp_path)
        assert_same(bl.pessimistic_policy(fit.calibrated_set(0.9), population, objective="exact"),
                    bl.pessimistic_policy(loaded.calibrated_set(0.9), population, objective="exact"))


# -------------------------------------------------------------------------------------- errors


def _rewrite_root_attrs(source: Path, target: Path, **attrs) -> Path:
    with xr.open_datatree(source, engine="h5netcdf") as tree:
        tree = tree.load()
    tree.attrs = {**tree.attrs, **attrs}
    tree.to_netcdf(target, engine="h5netcdf")
    return target


def test_other_format_version_is_refused(results, tmp_path):
    path = save(results["data"], tmp_path / "data.nc")
    future = _rewrite_root_attrs(path, tmp_path / "future.nc", bayes_loco_format=999,
                                 bayes_loco_version="9.9.9")
    with pytest.raises(ValueError, match="format version 999") as err:
        load(future)
    message = str(err.value)
    assert f"reads format version {FORMAT_VERSION}" in message
    assert "bayes_loco 9.9.9" in message and "load it with that version" in message


def test_foreign_files_are_refused(tmp_path):
    plain = tmp_path / "plain.nc"
    xr.Dataset({"a": ("x", [1.0, 2.0])}, attrs={"title": "not ours"}).to_netcdf(plain, engine="h5netcdf")
    with pytest.raises(ValueError, match=r"was not written by bayes_loco\.save"):
        load(plain)
    text = tmp_path / "notes.nc"
    text.write_text("just some text\n")
    with pytest.raises(ValueError, match=r"not written by bayes_loco\.save"):
        load(text)
    missing = tmp_path / "missing.nc"
    with pytest.raises(FileNotFoundError, match=r"missing\.nc"):
        load(missing)
    with pytest.raises(FileNotFoundError):
        load(str(missing))


@pytest.mark.parametrize("type_name", ["os:system", "builtins:eval", "bayes_loco_evil.x:Y", "pickle:loads"])
def test_types_outside_the_package_are_refused(results, tmp_path, type_name):
    path = save(results["data"], tmp_path / "a.nc")
    forged = _rewrite_root_attrs(path, tmp_path / "forged.nc", bayes_loco_type=type_name)
    with pytest.raises(ValueError, match="not a class of bayes_loco"):
        load(forged)


def test_nested_types_outside_the_package_are_refused(results, tmp_path):
    path = save(results["exact_policy"], tmp_path / "policy.nc")
    with xr.open_datatree(path, engine="h5netcdf") as tree:
        tree = tree.load()
    fields = json.loads(tree.attrs["fields"])
    fields["status"]["$enum"] = "os:system"
    tree.attrs = {**tree.attrs, "fields": json.dumps(fields)}
    forged = tmp_path / "forged.nc"
    tree.to_netcdf(forged, engine="h5netcdf")
    with pytest.raises(ValueError, match="not a class of bayes_loco"):
        load(forged)


@dataclasses.dataclass(frozen=True)
class Foreign:
    value: float


def test_unsupported_objects_are_refused(results, tmp_path):
    for obj, what in ((np.zeros(3), "ndarray"), ({"a": 1}, "dict"), (Foreign(1.0), "Foreign"),
                      (Foreign, "type")):
        with pytest.raises(TypeError, match=what) as err:
            save(obj, tmp_path / "x.nc")
        assert "PreferenceData" in str(err.value) and "Posterior" in str(err.value)
    assert not (tmp_path / "x.nc").exists()
    path = save(results["exact_policy"], tmp_path / "policy.nc")
    broken = dataclasses.replace(results["exact_policy"], message=object())
    with pytest.raises(TypeError, match=r"Policy\.message is of type object"):
        save(broken, path)
    with pytest.raises(TypeError, match=r"Foreign"):
        save(dataclasses.replace(results["exact_policy"], certificate=Foreign(1.0)), path)
    assert_same(results["exact_policy"], load(path))  # a failed save leaves the file as it was


def test_saving_frequentist_results_does_not_import_pymc(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        import bayes_loco as bl
        from bayes_loco.io import load, save
        from bayes_loco import simulate
        data = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0).sample(200, seed=1)
        fit = bl.fit_low_rank(data, 2)
        save(fit, {str(tmp_path / "fit.nc")!r})
        load({str(tmp_path / "fit.nc")!r})
        assert "pymc" not in sys.modules, "saving or loading a frequentist fit imported PyMC"
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert run.returncode == 0, run.stderr


# ----------------------------------------------------------------------------------- posteriors


POSTERIOR_SCRIPT = """
import json, sys
import numpy as np
from bayes_loco import simulate
from bayes_loco.io import load

sys.path.insert(0, sys.argv[3])
from test_io import _posterior_sets_and_policies

post = load(sys.argv[1])
out = sys.argv[2]
population = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0).population(50, seed=1)
credible, draws, policies = _posterior_sets_and_policies(post, population)
np.save(out + "/center.npy", credible.center)
np.save(out + "/precision.npy", credible.precision)
np.save(out + "/draws.npy", draws.draws)
for name, policy in policies.items():
    np.save(out + f"/{name}_probabilities.npy", policy.probabilities)
    np.save(out + f"/{name}_theta.npy", policy.theta)
with open(out + "/scalars.json", "w") as f:
    json.dump({"radius": credible.radius, "attrs": {k: type(v).__name__ for k, v in post.tree.attrs.items()},
               **{name: [p.certificate.lower, p.certificate.upper, p.pessimistic_value, p.status.value]
                  for name, p in policies.items()}}, f)
"""


def _posterior_sets_and_policies(post, population):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        credible = post.calibrated_set(0.9, "credible")
        draws = post.calibrated_set(0.9, "draws")
        policies = {name: bl.pessimistic_policy(s, population, objective="exact")
                    for name, s in (("credible", credible), ("draws", draws))}
    return credible, draws, policies


def test_posterior_round_trip(bayes_nuts, tmp_path):
    post = bayes_nuts
    back = roundtrip(post, tmp_path, "posterior.nc")
    assert_same(post, back)
    # Extra attributes of every kind netCDF cannot hold come back with their types, and in order.
    tree = post.tree.copy()
    tree.attrs = {**tree.attrs, "flag": True, "nothing": None, "options": {"a": [1, 2.5], "b": (True, "x")},
                  "names": ["chain", "draw"], "count": 3, "share": 0.5, "single": np.float32(1.5),
                  "bayes_loco_version": "0.0.1", "fields": "user text"}
    tree["posterior"].attrs = {**tree["posterior"].attrs, "empty": [], "big": 2**70}
    tree["posterior"]["theta_rtv"].attrs = {**tree["posterior"]["theta_rtv"].attrs, "ok": False}
    typed = dataclasses.replace(post, tree=tree)
    assert_same(typed, roundtrip(typed, tmp_path, "typed.nc"))
    assert post.tree.attrs.get("flag") is None, "saving must not change the posterior's own tree"


def test_posterior_pickles(bayes_nuts):
    assert_same(bayes_nuts, pickle.loads(pickle.dumps(bayes_nuts)))


def test_posterior_file_is_an_arviz_datatree(bayes_nuts, tmp_path):
    path = save(bayes_nuts, tmp_path / "posterior.nc")
    with xr.open_datatree(path, engine="h5netcdf") as tree:
        assert "theta_rtv" in tree["posterior"].data_vars
        assert tree["posterior"]["theta_rtv"].sizes == bayes_nuts.tree["posterior"]["theta_rtv"].sizes
        assert [g for g in tree.children if g != "bayes_loco"] == list(bayes_nuts.tree.children)
        assert tree.attrs["bayes_loco_format"] == FORMAT_VERSION
        assert tree.attrs["bayes_loco_type"] == "Posterior"
    back = load(path)
    assert "bayes_loco" not in back.tree.children
    import pymc as pm

    assert isinstance(back.model, pm.Model)  # rebuilt from the loaded data and settings
    assert_same(dict(bayes_nuts.tree.attrs), dict(back.tree.attrs), "tree.attrs")
    assert back.tree.attrs["rank"] == 2 and type(back.tree.attrs["rank"]) is int


def test_posterior_loaded_in_another_process_gives_the_same_sets_and_policy(bayes_nuts, bayes_problem,
                                                                             tmp_path):
    post = bayes_nuts
    path = save(post, tmp_path / "posterior.nc")
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, "-c", POSTERIOR_SCRIPT, str(path), str(out),
                          str(Path(__file__).parent)], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr
    population = bayes_problem[0].population(50, seed=1)
    credible, draws, policies = _posterior_sets_and_policies(post, population)
    assert_same(credible.center, np.load(out / "center.npy"))
    assert_same(credible.precision, np.load(out / "precision.npy"))
    assert_same(draws.draws, np.load(out / "draws.npy"))
    scalars = json.loads((out / "scalars.json").read_text())
    assert_same(credible.radius, scalars["radius"])
    assert scalars["attrs"] == {k: type(v).__name__ for k, v in post.tree.attrs.items()}
    for name, policy in policies.items():
        assert_same(policy.probabilities, np.load(out / f"{name}_probabilities.npy"))
        assert_same(policy.theta, np.load(out / f"{name}_theta.npy"))
        expected = [policy.certificate.lower, policy.certificate.upper, policy.pessimistic_value,
                    policy.status.value]
        assert_same(expected, scalars[name], name)
