"""The two studies of their own shape: the shift study's radius frontier and the held-out study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_loco.cli import main
from bayes_loco.experiments import frontier, heldout


@pytest.fixture(scope="module")
def one_cell(tmp_path_factory):
    out = tmp_path_factory.mktemp("frontier")
    return out, frontier.run(1, 0, out, imbalances=(10,), regimes=("covered",), progress=lambda line: None)


def test_the_frontier_solves_every_radius_and_both_yardsticks(one_cell):
    out, table = one_cell
    assert set(table["method"]) == {"MLE-Greedy", "PRS-Greedy", "exact", "exact-values"}
    assert sorted(table.loc[table["method"] == "exact", "radius"]) == sorted(frontier.GRID["radii"])
    assert (table["suboptimality"] >= -1e-12).all()
    sized = table.loc[table["method"] == "exact-values", "radius"].item()
    assert sized > 0
    assert (out / "shift-frontier.png").stat().st_size > 0
    ratios = frontier.ratios(table)
    np.testing.assert_allclose(ratios["MLE-Greedy"], 1.0)
    greedy = table.loc[table["method"] == "MLE-Greedy", "suboptimality"].item()
    np.testing.assert_allclose(ratios["exact-values"], table.loc[table["method"] == "exact-values",
                                                                 "suboptimality"].item() / greedy)


def test_a_second_frontier_run_skips_the_tasks_already_written(one_cell):
    out, table = one_cell
    again = frontier.run(1, 0, out, imbalances=(10,), regimes=("covered",), progress=lambda line: None)
    pd.testing.assert_frame_equal(again, table)


def test_the_heldout_table_is_the_folds_means_and_paired_differences():
    rng = np.random.default_rng(0)
    folds = pd.DataFrame([{"problem": p, "method": m, "fold": f, "log_loss": rng.uniform(0.5, 0.7),
                           "accuracy": rng.uniform(0.5, 0.7), "brier": rng.uniform(0.2, 0.3)}
                          for p in ("a", "b") for m in ("BT", "MLE", "PRS") for f in range(5)])
    table = heldout.summarise(folds)
    for (problem, method), part in folds.groupby(["problem", "method"]):
        row = table[(table["problem"] == problem) & (table["method"] == method)]
        prs = folds[(folds["problem"] == problem) & (folds["method"] == "PRS")]["log_loss"].to_numpy()
        diff = part["log_loss"].to_numpy() - prs
        assert row["log-loss"].item() == pytest.approx(part["log_loss"].mean(), rel=1e-12)
        assert row["s.e."].item() == pytest.approx(part["log_loss"].std(ddof=1) / np.sqrt(5), rel=1e-12)
        assert row["Δ log-loss vs PRS"].item() == pytest.approx(diff.mean(), abs=1e-15)
        assert row["s.e. of Δ"].item() == pytest.approx(diff.std(ddof=1) / np.sqrt(5), abs=1e-15)
    lines = heldout.markdown(table).splitlines()
    assert len(lines) == 2 + 6 and lines[0].startswith("| problem | method | log-loss")


@pytest.mark.slow
def test_the_heldout_command_writes_its_table_and_folds(tmp_path, capsys):
    stem = tmp_path / "sub" / "heldout"
    argv = ["heldout", "--n", "400", "--users", "40", "--folds", "2", "--out", str(stem), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    folds = pd.read_csv(stem.with_suffix(".csv"))
    assert len(folds) == 2 * 3 * 2  # problems × methods × folds
    table = heldout.summarise(folds)
    assert list(table["method"]) == ["BT", "MLE", "PRS"] * 2
    np.testing.assert_allclose(table.loc[table["method"] == "PRS", "Δ log-loss vs PRS"], 0.0)
    # Δ is the paired mean difference of the folds' log-losses
    for problem, part in folds.groupby("problem"):
        by = part.pivot(index="fold", columns="method", values="log_loss")
        row = table[(table["problem"] == problem) & (table["method"] == "BT")]
        assert row["Δ log-loss vs PRS"].item() == pytest.approx((by["BT"] - by["PRS"]).mean(), rel=1e-12)
    assert stem.with_suffix(".md").read_text().strip() == heldout.markdown(table)
    assert heldout.markdown(table).splitlines()[0] in printed


def test_the_new_commands_refuse_an_output_that_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["frontier", "--out", str(blocker), "--reps", "1"]) == 3
    assert "is a file" in capsys.readouterr().err
    assert main(["heldout", "--out", str(blocker / "h")]) == 3
    assert "is a file" in capsys.readouterr().err
