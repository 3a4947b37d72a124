"""The study runner, its seeds and resumption, the figures and the command line."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bayes_loco import cli
from bayes_loco.experiments import (
    FITTERS,
    POSTERIOR_DEFAULTS,
    PROBLEMS,
    STUDIES,
    Fitter,
    Study,
    calibration,
    plot_calibration,
    plot_results,
    posterior_settings,
    run_methods,
    run_study,
    run_task,
    summarise,
    task_seed,
)
from bayes_loco.experiments import runner as runner_module
from bayes_loco.experiments.methods import posterior_arguments
from bayes_loco.experiments.problems import PROBLEM_KEYS
from bayes_loco.experiments.runner import select_cells
from bayes_loco.experiments.store import StudyConfigError
from bayes_loco.frequentist import fit_prs
from bayes_loco.simulate import paper_problem

TINY = {"d_x": 4, "d_s": 3, "d_a": 4, "rank": 1, "population": 40, "global_states": 5,
        "contexts_per_state": 4}
NUMERIC = ["suboptimality", "pessimistic_value", "covered", "theta_error", "relative_gap"]


def tiny_study(name="tiny", reps=2):
    return Study(name, ({"n": 300, "imbalance": 1.0}, {"n": 600, "imbalance": 3.0}),
                 methods=("MLE-Greedy", "PRS", "PRS-exact-Wald"), fixed=TINY, reps=reps, panel="imbalance")


def numbers(frame):
    return frame.sort_values(["cell", "rep", "method", "scope"])[NUMERIC].to_numpy()


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    return out, run_study(tiny_study(), out, progress=False, workers=1)


def test_study_writes_one_row_per_method_scope_task(reference_run):
    out, results = reference_run
    assert len(results) == 2 * 2 * 3 * 2  # cells x reps x methods x scopes
    assert set(results["scope"]) == {"personalised", "global"}
    assert (results["suboptimality"] >= -1e-12).all()
    meta = json.loads((out / "tiny.json").read_text())
    assert meta["config"]["methods"] == ["MLE-Greedy", "PRS", "PRS-exact-Wald"]
    assert meta["versions"]["numpy"] == np.__version__


def test_seeds_depend_only_on_study_cell_and_replication():
    a = task_seed(0, "imbalance", 3, 7).generate_state(4)
    assert np.array_equal(a, task_seed(0, "imbalance", 3, 7).generate_state(4))
    others = (task_seed(1, "imbalance", 3, 7), task_seed(0, "rank", 3, 7), task_seed(0, "imbalance", 4, 7),
              task_seed(0, "imbalance", 3, 8))
    for other in others:
        assert not np.array_equal(a, other.generate_state(4))


def test_process_pool_gives_identical_numbers(reference_run, tmp_path):
    _, serial = reference_run
    parallel = run_study(tiny_study(), tmp_path, progress=False, workers=2)
    assert np.array_equal(numbers(serial), numbers(parallel), equal_nan=True)


def test_interrupted_study_resumes_only_missing_tasks(reference_run, tmp_path, monkeypatch):
    out, full = reference_run
    done = full[(full["cell"] == 0)]  # as if killed after the first cell's tasks
    shutil.copy(out / "tiny.json", tmp_path / "tiny.json")
    done.to_csv(tmp_path / "tiny.csv", index=False)
    calls = []
    original = runner_module.run_task

    def spy(study, cell, settings, rep, seed, methods, **kwargs):
        calls.append((cell, rep))
        return original(study, cell, settings, rep, seed, methods, **kwargs)

    monkeypatch.setattr(runner_module, "run_task", spy)
    resumed = run_study(tiny_study(), tmp_path, progress=False, workers=1)
    assert sorted(calls) == [(1, 0), (1, 1)]
    assert np.array_equal(numbers(full), numbers(resumed), equal_nan=True)


def test_killed_cli_run_resumes(tmp_path):
    """A real interruption: the process is killed once its first task is on disk."""
    cmd = [sys.executable, "-m", "bayes_loco.cli", "compare", "--n", "400", "--reps", "6", "--methods",
           "MLE-Greedy", "PRS", "--out", str(tmp_path), "--quiet", "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    csvs = []
    deadline = time.monotonic() + 300
    # The CSV exists a moment before its first rows are written: wait for a row, not for the file.
    while not csvs and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        csvs = [p for p in tmp_path.glob("*.csv") if p.read_text().count("\n") >= 2]
    proc.kill()
    proc.wait()
    first = pd.read_csv(csvs[0])
    assert 0 < first["rep"].nunique() < 6, "the run must be killed midway"
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    final = pd.read_csv(csvs[0])
    assert sorted(final["rep"].unique()) == list(range(6))
    assert len(final) == 6 * 2 * 2  # each task once: reps x methods x scopes
    kept = final[final["rep"].isin(first["rep"])].sort_values(["rep", "method", "scope"])
    np.testing.assert_array_equal(kept[NUMERIC].to_numpy(),
                                  first.sort_values(["rep", "method", "scope"])[NUMERIC].to_numpy())


def test_dask_cluster_gives_identical_numbers(reference_run, tmp_path):
    distributed = pytest.importorskip("distributed")
    _, local = reference_run
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = run_study(tiny_study(), tmp_path, progress=False, executor=client.get_executor())
    assert np.array_equal(numbers(local), numbers(remote), equal_nan=True)


def test_another_configuration_in_the_same_folder_is_refused(reference_run, tmp_path):
    out, _ = reference_run
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    with pytest.raises(StudyConfigError, match="another configuration"):
        run_study(tiny_study(), tmp_path, seed=1, progress=False, workers=1)


def test_subsets_run_apart_combine_into_the_whole_study(reference_run, tmp_path):
    _, whole = reference_run
    parts = [run_study(tiny_study(), tmp_path / f"n{n}", progress=False, workers=1, only={"n": [n]})
             for n in (600, 300)]
    assert [sorted(p["n"].unique()) for p in parts] == [[600], [300]]
    assert np.array_equal(numbers(whole), numbers(pd.concat(parts)), equal_nan=True)


def test_select_cells_names_the_bad_setting():
    assert select_cells(tiny_study(), {"imbalance": [3.0], "rank": [1]}) == [1]
    assert select_cells(tiny_study(), None) == [0, 1]
    with pytest.raises(ValueError, match=r"'level'.*not settings"):
        select_cells(tiny_study(), {"level": [0.9]})
    with pytest.raises(ValueError, match="matches none"):
        select_cells(tiny_study(), {"n": [1000]})


def test_workers_get_a_share_of_the_blas_threads():
    code = ("import numpy; from threadpoolctl import threadpool_info; "
            "from bayes_loco.experiments.runner import _limit_threads; _limit_threads(1); "
            "print(sorted({i['num_threads'] for i in threadpool_info()}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "2", "PATH": ""}).stdout
    assert out.strip() == "[1]"


def test_cli_run_with_settings_and_a_subset_of_cells(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(cli.STUDIES, "tiny", tiny_study(reps=1))
    args = ["run", "tiny", "--out", str(tmp_path), "--quiet", "--workers", "1", "--set", "level=0.5",
            "--set", "ridge=2", "--only", "n=600,700"]
    assert cli.main(args) == 0
    results = pd.read_csv(tmp_path / "tiny.csv")
    assert set(results["n"]) == {600}
    assert set(results.loc[results["method"] == "PRS-exact-Wald", "level"]) == {0.5}
    meta = json.loads((tmp_path / "tiny.json").read_text())
    assert meta["config"]["overrides"] == {"level": 0.5, "ridge": 2}
    assert cli.main(["run", "tiny", "--out", str(tmp_path / "x"), "--only", "n=5"]) == cli.EXIT_USAGE
    assert "--only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "tiny", "--set", "level"])
    assert exc.value.code == 2


def test_cli_plot_combines_runs_of_different_cells(reference_run, tmp_path, capsys):
    out, whole = reference_run
    for n in (300, 600):
        whole[whole["n"] == n].to_csv(tmp_path / f"tiny{n}.csv", index=False)
    open_before = set(plt.get_fignums())
    assert cli.main(["plot", str(tmp_path / "tiny300.csv"), str(tmp_path / "tiny600.csv")]) == 0
    assert set(plt.get_fignums()) == open_before  # the CLI closes the figures it saved
    table = capsys.readouterr().out
    assert {"300", "600"} <= set(table.split())
    assert (tmp_path / "tiny300_personalised.png").exists()
    assert cli.main(["plot", str(out / "tiny.csv"), str(tmp_path / "tiny300.csv")]) == cli.EXIT_INPUT
    assert "repeat" in capsys.readouterr().err


def test_run_task_records_warnings_and_settings():
    rows = run_task("t", 0, {"n": 200, **TINY}, 0, 0, ("MLE-Greedy",))
    assert {r["n"] for r in rows} == {200}
    assert all("warnings" in r for r in rows)


def test_posterior_methods_share_one_fit_and_report_coverage_consistently():
    from scipy import stats

    methods = ("PRS-exact-Wald", "Posterior-mean-Greedy", "Posterior-exact-ellipsoid",
               "Posterior-exact-draws", "Posterior-relaxed-quantile")
    settings = {"n": 400, **TINY, "posterior_nuts_draws": 150, "posterior_nuts_tune": 150,
                "posterior_nuts_chains": 2, "posterior_nuts_sampler": "pymc"}
    frame = pd.DataFrame(run_task("t", 0, settings, 0, 0, methods))
    assert len(frame) == len(methods) * 2
    post = frame[frame.method.str.startswith("Posterior")]
    # One NUTS run serves every posterior method: the same diagnostics on every row.
    assert post.max_rhat.nunique() == 1 and np.isfinite(post.max_rhat).all()
    assert frame[~frame.method.str.startswith("Posterior")].max_rhat.isna().all()
    # Which parametrisation "auto" ran is on every posterior row: r₁ components charted, 0 ≤ r₁ ≤ r.
    assert post.chart_rank.nunique() == 1 and post.chart_rank.iloc[0] in range(settings.get("rank", 3) + 1)
    assert frame[~frame.method.str.startswith("Posterior")].chart_rank.isna().all()
    ellipsoids = frame[frame.method.isin(["PRS-exact-Wald", "Posterior-exact-ellipsoid"])]
    assert (ellipsoids.level == 0.9).all()
    # Coverage at the run's level, and at any other level, follows from distance, radius and k_eff.
    assert np.array_equal(ellipsoids.covered == 1.0, ellipsoids.truth_distance <= ellipsoids.radius)
    assert np.allclose(ellipsoids.radius ** 2, stats.chi2.ppf(0.9, ellipsoids.k_eff))
    assert frame[frame.method == "Posterior-relaxed-quantile"].covered.isna().all()
    assert frame[frame.method == "Posterior-exact-draws"].covered.isin([0.0, 1.0]).all()
    assert (frame.suboptimality >= -1e-9).all()
    # The method names stay; the set kinds are the fits' own.
    kinds = frame.drop_duplicates("method").set_index("method").set_kind
    assert kinds["Posterior-exact-ellipsoid"] == "credible" and kinds["Posterior-mean-Greedy"] == "none"


def test_gic_method_reports_its_rank_and_summarise_scores_it():
    settings = {"n": 3000, **TINY, "rank": 2, "theta_kind": "diagonal", "global_states": 0}
    frame = pd.DataFrame(run_task("t", 0, settings, 0, 0, ("PRS", "PRS-GIC")))
    chosen = frame[frame.method == "PRS-GIC"].selected_rank
    assert chosen.between(1, 4).all() and frame[frame.method == "PRS"].selected_rank.isna().all()
    table = summarise(pd.concat([frame, frame.assign(selected_rank=frame.selected_rank + 1)]), ["method"])
    gic = table.set_index("method").loc["PRS-GIC", "rank_correct"]
    assert gic == 0.5 * ((chosen.iloc[0] == 2) + (chosen.iloc[0] + 1 == 2))
    assert np.isnan(table.set_index("method").loc["PRS", "rank_correct"])


def test_summarise_computes_mean_and_standard_error():
    frame = pd.DataFrame({"method": ["a"] * 4 + ["b"] * 2, "suboptimality": [1.0, 2.0, 3.0, 4.0, 5.0, 7.0],
                          "covered": [1, 0, 1, 1, np.nan, np.nan], "theta_error": [0.0] * 6,
                          "value_covered": [1, 1, 0, 1, 0, 1]})
    table = summarise(frame, ["method"]).set_index("method")
    assert table.loc["a", "value_coverage"] == 0.75 and table.loc["b", "value_coverage"] == 0.5
    assert "value_coverage" not in summarise(frame.drop(columns="value_covered"), ["method"])
    assert table.loc["a", "mean"] == 2.5
    assert table.loc["a", "se"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert table.loc["a", "coverage"] == 0.75
    assert table.loc["b", "reps"] == 2


def test_cli_help_and_exit_codes(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    for bad in (["run", "nonexistent"], ["compare", "--n", "0"], ["compare", "--reps", "x"],
                ["compare", "--q", "0.5"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2
    assert cli.main(["plot", str(tmp_path / "missing.csv")]) == cli.EXIT_INPUT
    assert "does not exist" in capsys.readouterr().err


def test_cli_compare_json(tmp_path, capsys):
    code = cli.main(["compare", "--n", "400", "--q", "1", "--reps", "1", "--methods", "MLE-Greedy", "PRS",
                     "--format", "json", "--out", str(tmp_path), "--quiet", "--workers", "1"])
    assert code == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in records} == {"MLE-Greedy", "PRS"}
    assert all(r["mean"] >= 0 for r in records)


def test_cli_says_the_warnings_its_tasks_recorded_once_each(tmp_path, capsys):
    """Rank 10 on the paper's 10 actions (their differences span 9): the DataWarning reaches stderr whole."""
    code = cli.main(["compare", "--n", "300", "--rank", "10", "--reps", "2", "--methods", "MLE-Greedy",
                     "--out", str(tmp_path), "--quiet", "--workers", "1"])
    assert code == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "exceeds the dimensions" in line]
    assert len(said) == 1
    assert said[0].startswith("warning (2 of 2 tasks): DataWarning: rank 10 exceeds")
    assert said[0].endswith("Fit a rank of at most 9.")
    cli.main(["compare", "--n", "300", "--rank", "3", "--reps", "1", "--methods", "MLE-Greedy",
              "--out", str(tmp_path / "within"), "--quiet", "--workers", "1"])
    assert "exceeds the dimensions" not in capsys.readouterr().err


def test_finished_study_table_keeps_the_figure_x_apart(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame([{"scope": "personalised", "n": 3000, "imbalance": q, "level": level,
                           "method": "PRS-exact-Wald", "suboptimality": level + rng.normal(0, 0.01),
                           "covered": 1.0, "theta_error": 1.0}
                          for q in (3, 10) for level in (0.5, 0.9) for _ in range(3)])
    cli._finish(cli.STUDIES["level"], frame, tmp_path)
    lines = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("personalised")]
    assert len(lines) == 4  # 2 imbalances x 2 levels, not averaged over the level
    assert sorted({line[3] for line in lines}) == ["0.5000", "0.9000"]


def test_posterior_settings_nest_by_group_over_the_defaults():
    flat = {"n": 3000, "posterior_nuts_sampler": "numpyro", "posterior_nuts_draws": 200,
            "posterior_nuts_target_accept": 0.95, "posterior_prior_scale": 2, "posterior_method": "vi",
            "posterior_vi_learning_rate": 0.1}
    nested = posterior_settings(flat)
    assert nested == {"nuts": {"sampler": "numpyro", "draws": 200, "target_accept": 0.95},
                      "prior": {"scale": 2}, "vi": {"learning_rate": 0.1}, "method": "vi"}
    merged = posterior_arguments(nested)
    assert merged["nuts"] == {"draws": 200, "tune": 500, "chains": 4, "cores": 1, "sampler": "numpyro",
                              "target_accept": 0.95}
    assert merged["prior"] == {"scale": 2} and merged["method"] == "vi"
    defaults = posterior_arguments(None)
    assert defaults == POSTERIOR_DEFAULTS
    defaults["nuts"]["draws"] = 1
    assert POSTERIOR_DEFAULTS["nuts"]["draws"] == 500  # a copy, not the module's defaults
    for bad in ("posterior_draws", "posterior_nuts", "posterior_foo_bar"):
        with pytest.raises(ValueError, match=bad):
            posterior_settings({bad: 1})


def test_runner_hands_the_nested_posterior_settings_to_the_posterior_fitter(monkeypatch):
    seen = []

    def fake_posterior(fits):
        seen.append(posterior_arguments(fits.posterior))
        return fits["prs"]

    monkeypatch.setitem(FITTERS, "posterior", Fitter(fake_posterior))
    settings = {"n": 300, **TINY, "global_states": 0, "posterior_nuts_sampler": "numpyro",
                "posterior_nuts_draws": 7, "posterior_prior_scale": 2}
    rows = run_task("t", 0, settings, 0, 0, ("Posterior-mean-Greedy",))
    assert seen == [{"nuts": {"draws": 7, "tune": 500, "chains": 4, "cores": 1, "sampler": "numpyro"},
                     "prior": {"scale": 2}}]
    assert [r["posterior_nuts_sampler"] for r in rows] == ["numpyro"]  # the flat setting is recorded


def test_cli_refuses_a_malformed_posterior_setting_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(cli.STUDIES, "tiny", tiny_study(reps=1))
    code = cli.main(["run", "tiny", "--out", str(tmp_path), "--quiet", "--workers", "1",
                     "--set", "posterior_draws=200"])
    assert code == cli.EXIT_USAGE
    assert "posterior_draws" in capsys.readouterr().err
    assert not (tmp_path / "tiny.csv").exists()


def test_rows_come_from_the_fit_protocol_whatever_the_road():
    """A frequentist fit reporting sampler diagnostics gets them in its rows: nothing asks which road."""
    problem = paper_problem(d_s=3, d_a=4, d_x=4, rank=1)
    data, pop = problem.sample(400, seed=1), problem.population(40, seed=2)
    prs = fit_prs(data, 1)
    odd = dataclasses.replace(prs, diagnostics=dataclasses.replace(prs.diagnostics, max_rhat=1.5,
                                                                   divergences=3, seconds=100.0))
    methods = ["PRS", "PRS-exact-Wald", "LowRank-Greedy", "MLE-Greedy"]
    frame = pd.DataFrame(run_methods(problem, data, {"personalised": pop}, methods, rank=1,
                                     fits={"prs": odd})).set_index("method")
    assert (frame.loc[["PRS", "PRS-exact-Wald"], "max_rhat"] == 1.5).all()
    assert (frame.loc[["PRS", "PRS-exact-Wald"], "divergences"] == 3).all()
    # A fit passed in counts its own seconds; the low-rank fit counts the PRS fit it came from.
    assert (frame.loc[["PRS", "LowRank-Greedy"], "fit_seconds"] >= 100.0).all()
    assert frame.loc["MLE-Greedy", ["max_rhat", "divergences"]].isna().all()
    assert frame.loc["MLE-Greedy", "fit_seconds"] < 100.0
    assert list(frame.loc[methods, "set_kind"]) == ["gram", "wald", "none", "none"]
    assert np.isnan(frame.loc["PRS", "level"]) and frame.loc["PRS-exact-Wald", "level"] == 0.9
    with pytest.raises(ValueError, match="fits"):
        run_methods(problem, data, {"personalised": pop}, methods, rank=2, fits={"prs": odd})
    with pytest.raises(ValueError, match="fits"):
        run_methods(problem, data, {"personalised": pop}, methods, rank=1, fits={"wald": odd})
    with pytest.raises(ValueError, match="methods"):
        run_methods(problem, data, {"personalised": pop}, ["PRS-Wald"], rank=1)
    with pytest.raises(ValueError, match="truth"):
        run_methods(np.zeros((2, 2)), data, {"personalised": pop}, methods, rank=1)


class PersonalisedOnly:
    """The paper's problem, declared to have no global populations."""

    has_global_populations = False

    def __init__(self, inner):
        self.inner = inner

    theta = property(lambda self: self.inner.theta)
    d_x = property(lambda self: self.inner.d_x)
    d_phi = property(lambda self: self.inner.d_phi)

    def sample(self, n, seed):
        return self.inner.sample(n, seed)

    def population(self, n, seed, **options):
        return self.inner.population(n, seed, **options)

    def rewards(self, population):
        return self.inner.rewards(population)


def test_study_runs_on_the_problem_it_names(monkeypatch, tmp_path):
    monkeypatch.setitem(PROBLEMS, "local", lambda settings, seed: PersonalisedOnly(
        paper_problem(**{k: settings[k] for k in PROBLEM_KEYS}, seed=seed)))
    study = Study("local", ({"n": 300, "imbalance": 1.0},), methods=("MLE-Greedy", "PRS"), fixed=TINY, reps=2,
                  problem="local")
    local = run_study(study, tmp_path / "local", progress=False, workers=1)
    paper = run_study(dataclasses.replace(study, problem="paper"), tmp_path / "paper", progress=False,
                      workers=1)
    assert set(local.scope) == {"personalised"} and set(paper.scope) == {"personalised", "global"}
    # The same seeds whatever the problem's name: the same data and the same numbers.
    assert np.array_equal(numbers(local), numbers(paper[paper.scope == "personalised"]), equal_nan=True)
    assert STUDIES["personalllm"].problem == "personalllm" and STUDIES["demo"].problem == "paper"


IMPORTS_OF_THE_PACKAGE = """
import importlib, json, pkgutil, sys
import bayes_loco
for module in pkgutil.walk_packages(bayes_loco.__path__, "bayes_loco."):
    importlib.import_module(module.name)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] != "bayes_loco")))
"""

IMPORT_EVERY_MODULE = """
import importlib, json, logging, pkgutil, sys, warnings
for name in json.loads(sys.stdin.read()):  # the dependencies first: their own imports may add filters
    try:
        importlib.import_module(name)
    except Exception:
        pass
import matplotlib
root = logging.getLogger()
before = (repr(warnings.filters), list(root.handlers), root.level, matplotlib.get_backend())
import bayes_loco
changed = []
for module in pkgutil.walk_packages(bayes_loco.__path__, "bayes_loco."):
    importlib.import_module(module.name)
    now = (repr(warnings.filters), list(root.handlers), root.level, matplotlib.get_backend())
    if now != before:
        changed.append(module.name)
        before = now
print(json.dumps({"backend": matplotlib.get_backend(), "changed": changed}))
"""


def test_importing_any_module_leaves_backend_warnings_and_logging_alone():
    env = {**os.environ, "MPLBACKEND": "svg"}
    deps = subprocess.run([sys.executable, "-c", IMPORTS_OF_THE_PACKAGE], capture_output=True, text=True,
                          check=True, env=env).stdout
    out = subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE], input=deps, capture_output=True,
                         text=True, check=True, env=env).stdout
    result = json.loads(out)
    assert result["backend"] == "svg"
    assert result["changed"] == []


def test_shift_study_cells_set_the_regimes_and_a_task_runs_them():
    from bayes_loco.experiments.studies import REGIMES

    study = STUDIES["shift"]
    assert {(c["regime"], c["covered_action"], c["global_law"]) for c in study.cells} == {
        (name, r["covered_action"], r["global_law"]) for name, r in REGIMES.items()}
    assert sorted({c["imbalance"] for c in study.cells}) == [1, 3, 10, 30]
    assert "PRS-exact-Wald-values" in study.methods and study.panel == "regime"
    cell = {"n": 1500, **TINY, "rank": 2, "regime": "uncovered", "covered_action": 2, "global_law": "target",
            "imbalance": 10}
    methods = ("MLE-Greedy", "PRS-exact-Wald", "PRS-exact-Wald-values")
    frame = pd.DataFrame(run_task("shift", 0, cell, 0, 0, methods))
    assert (frame.regime == "uncovered").all() and set(frame.scope) == {"personalised", "global"}
    sized = frame[frame.method == "PRS-exact-Wald-values"].set_index("scope")
    wald = frame[frame.method == "PRS-exact-Wald"].set_index("scope")
    assert sized.loc["global", "radius"] < sized.loc["personalised", "radius"]
    assert sized.value_covered.isin([0, 1]).all() and sized.covered.isna().all()
    # Personalised policies reach every identified direction: the resized set is the Wald set, exactly.
    assert sized.loc["personalised", "radius"] == wald.loc["personalised", "radius"]
    assert sized.loc["personalised", "suboptimality"] == wald.loc["personalised", "suboptimality"]


@pytest.mark.parametrize("nuts", [{"parametrization": "factored"},
                                  {"parametrization": "chart", "chart_rank": 1}])
def test_posterior_rows_record_the_parametrisation_the_fit_ran(nuts):
    from bayes_loco.bayes import fit_posterior
    from bayes_loco.experiments import compare_policies

    problem = paper_problem(d_x=4, d_s=3, d_a=4, rank=2, seed=0)
    data = problem.sample(400, seed=1)
    post = fit_posterior(data, 2, nuts={"draws": 50, "tune": 50, "chains": 1, "sampler": "pymc", **nuts},
                         progressbar=False, predictive_draws=0)
    frame = compare_policies(data, problem.population(30, seed=2), rank=2,
                             methods=["Posterior-mean-Greedy", "PRS"], fits={"posterior": post})
    expected = nuts.get("chart_rank", 0)
    assert frame.set_index("method").chart_rank.to_dict() == pytest.approx({"Posterior-mean-Greedy": expected,
                                                                           "PRS": np.nan}, nan_ok=True)


def test_task_inputs_are_the_data_and_populations_run_task_evaluates():
    from bayes_loco.evaluate import suboptimality
    from bayes_loco.experiments import Fits, task_inputs
    from bayes_loco.policy import greedy_policy

    settings = {"n": 300, **TINY}
    inputs = task_inputs("t", 2, settings, 1, 5)
    again = task_inputs("t", 2, settings, 1, 5)
    assert np.array_equal(inputs.data.contexts, again.data.contexts)
    assert set(inputs.populations) == {"personalised", "global"}
    assert not np.array_equal(inputs.data.contexts, task_inputs("t", 2, settings, 2, 5).data.contexts)
    rows = pd.DataFrame(run_task("t", 2, settings, 1, 5, ["MLE-Greedy"])).set_index("scope")
    mle = Fits(inputs.data, rank=inputs.settings["rank"], ridge=inputs.settings["ridge"])["mle"]
    for scope, population in inputs.populations.items():
        policy = greedy_policy(mle.theta, population, scope=scope)
        assert rows.loc[scope, "suboptimality"] == suboptimality(policy, inputs.truth, population)


# ------------------------------------------------------------- plot_results, calibration, plot_calibration


def legend_texts(ax):
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def test_plot_writes_png_and_pdf(reference_run, tmp_path):
    _, results = reference_run
    fig = plot_results(results, panel="imbalance", out=tmp_path / "fig")
    assert len(fig.axes) == 2  # one panel per imbalance value
    assert (tmp_path / "fig.png").stat().st_size > 1000
    assert (tmp_path / "fig.pdf").exists()
    with pytest.raises(ValueError, match="scope"):
        plot_results(results, scope="nowhere")
    timing = plot_results(results, panel=None, y="fit_seconds")  # the runtime study's figure
    assert timing.axes[0].get_ylabel().startswith("fit_seconds")
    plt.close("all")


def test_single_setting_figure_compares_methods_side_by_side(reference_run, tmp_path):
    _, results = reference_run
    one = results[results["n"] == 300]
    fig = plot_results(one, panel=None, out=tmp_path / "one")
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["MLE-Greedy", "PRS", "PRS-exact-Wald"]
    assert "n = 300" in fig.axes[0].get_xlabel()
    plt.close(fig)


@pytest.mark.parametrize(("x", "grid", "scale"),
                         [("c2", [0.5, 5.0, 50.0], "log"), ("level", [0.5, 0.9, 0.99], "linear")])
def test_strength_figure_uses_a_log_axis_for_a_wide_grid(x, grid, scale):
    frame = pd.DataFrame([{"scope": "personalised", x: v, "method": "PRS", "suboptimality": v, "imbalance": 3}
                          for v in grid for _ in range(2)])
    fig = plot_results(frame, x=x)
    assert fig.axes[0].get_xscale() == scale
    plt.close(fig)


def test_plot_results_takes_the_compare_policies_table():
    # compare_policies' table: one row per method, no "n" and no panel column.
    frame = pd.DataFrame({"method": ["PRS", "PRS-exact-Wald", "Posterior-exact-ellipsoid", "PRS"],
                          "scope": ["personalised", "personalised", "personalised", "global"],
                          "suboptimality": [0.3, 0.1, 0.2, 9.0]})
    fig = plot_results(frame, title="compare")
    (ax,) = fig.axes
    methods = ["PRS", "PRS-exact-Wald", "Posterior-exact-ellipsoid"]
    assert [t.get_text() for t in ax.get_xticklabels()] == methods
    assert ax.get_xlabel() == "method" and ax.get_ylabel() == "suboptimality (personalised)"
    means = [c.lines[0].get_ydata()[0] for c in ax.containers]
    assert means == [0.3, 0.1, 0.2]  # the global row is another scope
    assert fig._suptitle.get_text() == "compare"
    with pytest.raises(ValueError, match="y='regret'"):
        plot_results(frame, y="regret")
    plt.close(fig)


def test_plot_results_on_a_study_frame_draws_one_curve_per_method():
    frame = pd.DataFrame([{"scope": "personalised", "n": n, "imbalance": q, "method": m,
                           "suboptimality": n * s}
                          for n in (1000, 3000, 10000) for q in (1, 3)
                          for m, s in (("PRS", 1e-4), ("W", 2e-4)) for _ in range(3)])
    fig = plot_results(frame)
    assert [ax.get_title() for ax in fig.axes] == ["imbalance = 1", "imbalance = 3"]
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "n"
        # the grid's own values label the log axis, with no minor labels between them
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1000", "3000", "10000"]
        assert not ax.get_xticks(minor=True).size
        assert len(ax.containers) == 2
        np.testing.assert_allclose(np.asarray(ax.containers[1].lines[0].get_ydata(), float), [0.2, 0.6, 2.0])
    assert legend_texts(fig.axes[-1]) == ["PRS", "W"]
    plt.close(fig)


def _distances(seed=0, n=400, k=12):
    """A calibrated method (distance² ~ χ²_k, as for a correct set), one at distance 0, and a Gram row."""
    from scipy import stats

    d2 = stats.chi2.rvs(k, size=n, random_state=np.random.default_rng(seed))
    calibrated = pd.DataFrame({"method": "calibrated", "rep": range(n), "truth_distance": np.sqrt(d2),
                               "k_eff": k, "level": 0.9, "n": 1000})
    return pd.concat([calibrated, calibrated.assign(method="centred", truth_distance=0.0),
                      calibrated.assign(method="gram", level=np.nan)], ignore_index=True)


def test_calibration_recovers_nominal_coverage_of_a_correct_set():
    n = 400
    table = calibration(_distances(n=n))
    assert set(table.method) == {"calibrated", "centred"}  # the Gram set has no level
    calibrated = table[table.method == "calibrated"]
    half = 4 * np.sqrt(calibrated.level * (1 - calibrated.level) / n)
    assert (np.abs(calibrated.coverage - calibrated.level) <= half).all()
    assert (table[table.method == "centred"].coverage == 1.0).all()
    assert (table.seeds == n).all()
    with pytest.raises(ValueError, match="truth_distance"):
        calibration(pd.DataFrame({"method": ["a"], "level": [0.9]}))
    with pytest.raises(ValueError, match="levels"):
        calibration(_distances(), levels=[0.5, 1.0])


def test_plot_calibration_draws_one_panel_per_value(tmp_path):
    frame = pd.concat([_distances(0).assign(n=10000), _distances(1).assign(n=3000)], ignore_index=True)
    fig = plot_calibration(frame, panel="n", out=tmp_path / "cal")
    assert [ax.get_title() for ax in fig.axes] == ["n = 3000", "n = 10000"]  # numeric order
    assert (tmp_path / "cal.png").stat().st_size > 1000 and (tmp_path / "cal.pdf").exists()
    ax = fig.axes[0]
    assert ax.get_xlabel() == "nominal level" and ax.get_ylabel() == "coverage of θ*_rtv"
    assert legend_texts(fig.axes[-1]) == ["±1.96 s.e. (400 seeds)", "calibrated", "centred"]
    plt.close(fig)


def test_plot_calibration_takes_the_compare_policies_table():
    frame = pd.DataFrame({"method": ["PRS", "PRS-exact-Wald", "Posterior-exact-ellipsoid"],
                          "scope": "personalised", "truth_distance": [30.0, 8.0, 20.0],
                          "k_eff": [78.0, 78.0, 78.0], "level": [np.nan, 0.9, 0.9]})
    fig = plot_calibration(frame)
    (ax,) = fig.axes
    curves = {line.get_label(): line for line in ax.get_lines()}
    assert set(curves) >= {"PRS-exact-Wald", "Posterior-exact-ellipsoid"} and "PRS" not in curves
    # One seed: coverage is 0 below the level where χ²_78 reaches the distance², 1 above.
    from scipy import stats

    level, coverage = curves["PRS-exact-Wald"].get_data()
    np.testing.assert_array_equal(coverage, (stats.chi2.ppf(level, 78) >= 64.0).astype(float))
    plt.close(fig)


def test_the_study_figures_live_in_experiments_only():
    import bayes_loco as bl
    from bayes_loco.experiments import figures

    assert bl.experiments.calibration is figures.calibration
    assert bl.experiments.plot_results is figures.plot_results
    for name in ("LEVELS", "calibration", "plot_calibration", "plot_results"):
        assert not hasattr(bl.plots, name)  # no second path to them


def test_importing_the_geometry_plots_leaves_the_studies_and_pymc_unloaded():
    code = ("import sys, bayes_loco.plots; "
            "print('bayes_loco.experiments' in sys.modules, 'pymc' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_rerun_says_it_reuses_the_saved_tasks(reference_run, tmp_path, capsys):
    out, first = reference_run
    for name in ("tiny.csv", "tiny.json"):
        if (out / name).exists():
            shutil.copy(out / name, tmp_path / name)
    again = run_study(tiny_study(), tmp_path, progress=True, workers=1)
    printed = capsys.readouterr()
    tasks = first[["cell", "rep"]].drop_duplicates().shape[0]
    assert f"tiny: reusing {tasks} saved task(s) from {tmp_path / 'tiny.csv'}; 0 to run" in printed.out
    assert "0task" not in printed.err  # no empty progress bar
    pd.testing.assert_frame_equal(again.reset_index(drop=True), first.reset_index(drop=True))


@pytest.mark.slow
def test_the_demo_note_says_what_the_demo_table_shows(tmp_path):
    """Every comparison in cli.DEMO_NOTE, checked on the demo's own rows (its fixed seeds; about a minute)."""
    assert cli.main(["demo", "--out", str(tmp_path), "--quiet"]) == 0
    rows = pd.read_csv(tmp_path / "demo.csv")
    mean = rows.groupby(["scope", "method"])["suboptimality"].mean()
    personal, global_ = mean["personalised"], mean["global"]
    assert personal.idxmax() == "MLE-Greedy"
    assert personal.idxmin() in ("PRS-exact-Wald", "PRS-exact-Wald-values")
    assert personal["PRS-exact-Wald"] == personal["PRS-exact-Wald-values"]  # same rows personalised
    assert personal["PRS"] > personal["MLE-Pessimistic"]  # "the paper's PRS can lose to MLE-Pessimistic"
    by = rows.groupby(["scope", "method"])
    assert by["value_covered"].mean()["personalised", "PRS-exact-Wald"] == 1.0
    covered = by["covered"].mean()["personalised"]
    assert covered["PRS"] == 0 and covered["MLE-Pessimistic"] == 0
    assert global_["PRS-exact-Wald-values"] < global_["PRS-exact-Wald"]  # guarding values keeps the best


def _demo_rows():
    """The demo's layout in two seeds: a set that covers θ* and two policies of it, one of which is sized for
    values (``covered`` empty, as the runner leaves it), a Gram set, and a greedy policy with no set."""
    rows = []
    for rep, (distance, sub) in enumerate(((8.8, 0.075), (9.1, 0.063))):
        wald = {"rep": rep, "cell": 0, "n": 3000, "imbalance": 3, "scope": "personalised", "k_eff": 78.0,
                "level": 0.9, "truth_distance": distance, "suboptimality": sub}
        rows += [wald | {"method": "PRS-exact-Wald", "covered": 1.0},
                 wald | {"method": "PRS-exact-Wald-values", "covered": np.nan},
                 wald | {"method": "PRS-relaxed-Wald", "covered": 1.0, "suboptimality": sub + 0.01},
                 wald | {"method": "PRS", "covered": 0.0, "level": np.nan, "truth_distance": 20.0,
                         "suboptimality": 0.14},
                 wald | {"method": "MLE-Greedy", "covered": np.nan, "level": np.nan, "truth_distance": np.nan,
                         "k_eff": np.nan, "suboptimality": 0.31 + rep / 100}]
    return pd.DataFrame(rows)


def test_plot_calibration_draws_no_set_that_does_not_claim_theta_and_each_curve_once():
    frame = _demo_rows()
    assert set(calibration(frame).method) == {"PRS-exact-Wald", "PRS-relaxed-Wald"}
    fig = plot_calibration(frame, panel="n")
    (ax,) = fig.axes
    # Its coverage is empty in every row: drawn, it would lie exactly on PRS-exact-Wald's curve.
    assert not any("values" in line.get_label() for line in ax.get_lines())
    assert legend_texts(ax) == ["±1.96 s.e. (2 seeds)", "PRS-exact-Wald = PRS-relaxed-Wald"]
    curves = [line for line in ax.get_lines() if line.get_label().startswith("PRS")]
    assert len(curves) == 1
    # Off the curves: the legend starts right of the panel.
    legend = ax.get_legend()
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_plot_results_draws_each_method_once_skips_empty_ones_and_starts_at_zero():
    frame = _demo_rows()
    fig = plot_results(frame)  # one setting: the methods side by side
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["PRS-exact-Wald\n= PRS-exact-Wald-values", "PRS-relaxed-Wald", "PRS", "MLE-Greedy"]
    assert len(ax.containers) == 4 and ax.get_ylim()[0] == 0.0
    plt.close(fig)
    empty = frame.assign(covered=np.where(frame["method"] == "PRS", np.nan, frame["covered"]))
    covered = plot_results(empty, y="covered", x="rep")  # a curve per method, across seeds
    assert legend_texts(covered.axes[0]) == ["PRS-exact-Wald = PRS-relaxed-Wald"]  # no empty curve
    plt.close(covered)
    with pytest.raises(ValueError, match="missing in every row"):
        plot_results(frame.assign(covered=np.nan), y="covered")


def test_plot_results_can_give_each_panel_its_own_value_axis():
    frame = pd.DataFrame([{"scope": "personalised", "n": n, "noise": q, "method": m,
                           "suboptimality": s * (1 + 99 * q)}
                          for n in (1000, 3000) for q in (0, 1) for m, s in (("PRS", 0.01), ("W", 0.02))])
    shared = plot_results(frame, panel="noise")
    assert shared.axes[0].get_ylim() == shared.axes[1].get_ylim()
    low, high = shared.axes[1].get_ylim()
    assert low == 0.0 and high >= frame["suboptimality"].max()  # no panel's curve cut off
    own = plot_results(frame, panel="noise", sharey=False)
    low, high = own.axes[0].get_ylim()
    assert low == 0.0 and 0.02 <= high < 0.05 and own.axes[1].get_ylim()[1] > 2
    plt.close("all")
