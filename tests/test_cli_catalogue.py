"""The CLI's and the runner's bad-input catalogue: one line naming the option, no traceback.

Every bad invocation of ``bayes-loco`` exits with the documented code (2: a bad
argument, argparse's code; 3: an input file or study problem; 4: the output
folder in use, in test_runner_faults.py) and one line on stderr that names the
option at fault. The CLI runs in-process through :func:`bayes_loco.cli.main`; a
few cases run it as a subprocess, as a user would. The runner's own refusals
come from inside bayes_loco and name the argument (:func:`catalogue.refused`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from catalogue import refused

from bayes_loco import cli
from bayes_loco.experiments import STUDIES, Study, run_study
from bayes_loco.experiments.runner import SettingError
from bayes_loco.experiments.store import OutputFolderError, StudyConfigError, read_results

pytestmark = pytest.mark.catalogue

USAGE, INPUT = cli.EXIT_USAGE, cli.EXIT_INPUT
TINY = {"d_x": 4, "d_s": 3, "d_a": 4, "rank": 1, "population": 40, "global_states": 5,
        "contexts_per_state": 4}


def invoke(argv: list[str], capsys) -> tuple[int, str]:
    """Exit code and stderr of ``bayes-loco argv`` run in this process."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def check_message(err: str, *named: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert "error:" in lines[0]
    for text in named:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Files of the wrong kind: a plain file, a folder, CSVs that are not results, two results CSVs."""
    root = tmp_path_factory.mktemp("files")
    (root / "plain.txt").write_text("not a folder\n")
    (root / "folder").mkdir()
    (root / "nostudy.csv").write_text("a,b\n1,2\n")
    (root / "empty.csv").write_text("")
    (root / "binary.csv").write_bytes(bytes(range(256)) * 4)
    header = "study,cell,rep,method,scope,suboptimality\n"
    (root / "header_only.csv").write_text(header)
    (root / "a.csv").write_text(header + "split,0,0,PRS,personalised,0.1\n")
    (root / "b.csv").write_text(header + "table,0,0,PRS,personalised,0.1\n")
    return root


# (argv with {f} for the files folder and {o} for a fresh output folder, exit code, texts the line names)
CASES = [
    # argparse: missing, unknown or malformed options
    ([], USAGE, ["command"]),
    (["bogus"], USAGE, ["command", "bogus"]),
    (["run", "nonexistent"], USAGE, ["study", "nonexistent"]),
    (["run", "split", "--reps", "0"], USAGE, ["--reps", "0"]),
    (["run", "split", "--reps", "x"], USAGE, ["--reps", "'x'"]),
    (["run", "split", "--reps", "1.5"], USAGE, ["--reps", "1.5"]),
    (["run", "split", "--population", "0"], USAGE, ["--population"]),
    (["run", "split", "--workers", "0"], USAGE, ["--workers"]),
    (["run", "split", "--workers", "two"], USAGE, ["--workers", "two"]),
    (["run", "split", "--seed", "-1"], USAGE, ["--seed", "non-negative", "-1"]),
    (["run", "split", "--seed", "abc"], USAGE, ["--seed", "abc"]),
    (["run", "split", "--seed", "1.5"], USAGE, ["--seed", "1.5"]),
    (["run", "split", "--set", "level"], USAGE, ["--set", "KEY=VALUE"]),
    (["run", "split", "--set", "=1"], USAGE, ["--set", "KEY=VALUE"]),
    (["run", "split", "--set", "level="], USAGE, ["--set", "KEY=VALUE"]),
    (["run", "split", "--only", "n"], USAGE, ["--only", "KEY=VALUE"]),
    (["run", "split", "--bogus"], USAGE, ["--bogus"]),
    (["compare", "--n", "0"], USAGE, ["--n"]),
    (["compare", "--n", "abc"], USAGE, ["--n", "abc"]),
    (["compare", "--q", "0.5"], USAGE, ["--q", ">= 1"]),
    (["compare", "--q", "abc"], USAGE, ["--q", "abc"]),
    (["compare", "--q", "nan"], USAGE, ["--q", "nan"]),
    (["compare", "--q", "inf"], USAGE, ["--q", "inf"]),
    (["compare", "--rank", "0"], USAGE, ["--rank"]),
    (["compare", "--reps", "-3"], USAGE, ["--reps"]),
    (["compare", "--methods", "Bogus"], USAGE, ["--methods", "Bogus"]),
    (["compare", "--format", "xml"], USAGE, ["--format", "xml"]),
    (["demo", "--workers", "0"], USAGE, ["--workers"]),
    (["demo", "--seed", "-2"], USAGE, ["--seed"]),
    (["plot"], USAGE, ["csv"]),
    # --set: unknown, unused, or of the wrong type or range
    (["run", "split", "--set", "levle=0.5"], USAGE, ["--set", "'levle'", "'level'"]),
    (["run", "table", "--set", "levle=0.5"], USAGE, ["--set", "'levle'", "did you mean 'level'"]),
    (["run", "split", "--set", "bogus_key=1"], USAGE, ["--set", "'bogus_key'", "unknown setting"]),
    (["run", "split", "--set", "level=0.5"], USAGE, ["--set", "does not use setting 'level'"]),
    (["run", "split", "--set", "posterior_nuts_draws=10"], USAGE, ["--set", "posterior_nuts_draws"]),
    (["run", "posterior-vs-ellipsoid", "--set", "posterior_draws=200"], USAGE, ["--set", "posterior_draws"]),
    (["run", "split", "--set", "personalllm_train=x.csv"], USAGE, ["--set", "personalllm_train"]),
    (["run", "split", "--set", "rank=2.5"], USAGE, ["--set", "rank must be an integer", "2.5"]),
    (["run", "split", "--set", "rank=25"], USAGE, ["--set", "rank", "25"]),
    (["run", "split", "--set", "rank=0"], USAGE, ["--set", "rank"]),
    (["run", "table", "--set", "level=[0.5]"], USAGE, ["--set", "level must be a real number", "[0.5]"]),
    (["run", "table", "--set", "level=1.5"], USAGE, ["--set", "level", "1.5"]),
    (["run", "table", "--set", "level=0"], USAGE, ["--set", "level"]),
    (["run", "table", "--set", "level=NaN"], USAGE, ["--set", "level", "nan"]),
    (["run", "split", "--set", "n=abc"], USAGE, ["--set", "n must be an integer", "'abc'"]),
    (["run", "split", "--set", "n=true"], USAGE, ["--set", "n must be an integer"]),
    (["run", "split", "--set", "n=0"], USAGE, ["--set", "n must be"]),
    (["run", "split", "--set", "c2=-1"], USAGE, ["--set", "c2"]),
    (["run", "split", "--set", "ridge=-1"], USAGE, ["--set", "ridge"]),
    (["run", "split", "--set", "imbalance=0.5"], USAGE, ["--set", "imbalance"]),
    (["run", "split", "--set", "theta_kind=foo"], USAGE, ["--set", "theta_kind", "foo"]),
    (["run", "split", "--set", "global_law=foo"], USAGE, ["--set", "global_law", "foo"]),
    (["run", "split", "--set", "n_initial_fraction=1.5"], USAGE, ["--set", "n_initial_fraction"]),
    (["run", "split", "--set", "d_a=1"], USAGE, ["--set", "d_a"]),
    (["run", "split", "--set", "d_x=abc"], USAGE, ["--set", "d_x", "abc"]),
    (["run", "split", "--set", "population=0"], USAGE, ["--set", "population"]),
    (["run", "split", "--set", "contexts_per_state=0"], USAGE, ["--set", "contexts_per_state"]),
    # --only
    (["run", "split", "--only", "bogus=1"], USAGE, ["--only", "bogus"]),
    (["run", "split", "--only", "n=5"], USAGE, ["--only", "matches none"]),
    # --out: a file, a path under a file, a place nothing can be written
    (["run", "split", "--out", "{f}/plain.txt"], USAGE, ["--out", "is a file"]),
    (["run", "split", "--out", "{f}/plain.txt/sub"], USAGE, ["--out", "plain.txt/sub"]),
    (["run", "split", "--out", "/proc/bayes_loco_nowhere"], USAGE, ["--out", "/proc/bayes_loco_nowhere"]),
    (["compare", "--out", "{f}/plain.txt"], USAGE, ["--out", "is a file"]),
    (["demo", "--out", "{f}/plain.txt"], USAGE, ["--out", "is a file"]),
    # --train and --test
    (["run", "split", "--train", "{f}/a.csv"], USAGE, ["--train and --test", "PersonalLLM"]),
    (["run", "personalllm", "--train", "{f}/a.csv"], USAGE, ["--train and --test", "both"]),
    (["run", "personalllm", "--train", "{f}/missing.csv", "--test", "{f}/a.csv"], USAGE,
     ["--train", "missing.csv", "does not exist"]),
    (["run", "personalllm", "--train", "{f}/folder", "--test", "{f}/folder"], USAGE, ["--train", "folder"]),
    # --scheduler: not an address
    (["run", "split", "--scheduler", "nonsense"], USAGE, ["--scheduler", "nonsense"]),
    # compare's settings, refused by the problem they build
    (["compare", "--rank", "25", "--out", "{o}"], USAGE, ["--rank", "25"]),
    # plot: files that are not results CSVs (exit 3, a study or input file problem)
    (["plot", "{f}/missing.csv"], INPUT, ["missing.csv", "does not exist"]),
    (["plot", "{f}/folder"], INPUT, ["folder", "is a folder"]),
    (["plot", "{f}/nostudy.csv"], INPUT, ["nostudy.csv", "'study'"]),
    (["plot", "{f}/empty.csv"], INPUT, ["empty.csv", "no CSV header"]),
    (["plot", "{f}/binary.csv"], INPUT, ["binary.csv", "not a results CSV"]),
    (["plot", "{f}/header_only.csv"], INPUT, ["header_only.csv", "no rows"]),
    (["plot", "{f}/a.csv", "{f}/b.csv"], INPUT, ["different studies", "split", "table"]),
    (["plot", "{f}/a.csv", "{f}/a.csv"], INPUT, ["repeat"]),
]


def _ids(case) -> str:
    return " ".join(case[0]).replace("{f}/", "").replace("{o}", "OUT")[:60] or "(nothing)"


@pytest.mark.parametrize(("argv", "code", "named"), CASES, ids=[_ids(c) for c in CASES])
def test_bad_invocation_exits_with_one_line_naming_the_option(argv, code, named, files, tmp_path, capsys):
    argv = [a.format(f=files, o=tmp_path / "out") for a in argv]
    if argv[:1] in (["run"], ["demo"], ["compare"]) and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]  # never the default folder in the working directory
    exit_code, err = invoke(argv, capsys)
    assert exit_code == code, err
    check_message(err, *named)
    assert not (tmp_path / "out" / "split.csv").exists()


@pytest.mark.parametrize(("argv", "named"), [
    (["run", "split", "--set", "levle=0.5"], ["--set", "'levle'"]),
    (["run", "split", "--seed", "-1"], ["--seed", "non-negative"]),
    (["compare", "--q", "0.5"], ["--q"]),
    (["plot", "{f}/folder"], ["is a folder"]),
])
def test_bad_invocation_of_the_installed_command(argv, named, files, tmp_path):
    argv = [a.format(f=files) for a in argv] + (["--out", str(tmp_path)] if argv[0] != "plot" else [])
    proc = subprocess.run([sys.executable, "-m", "bayes_loco.cli", *argv], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (USAGE, INPUT)
    check_message(proc.stderr, *named)


def test_plot_of_a_torn_csv_warns_and_draws(files, tmp_path, capsys):
    """Warned and right: a torn last line is left out of the figure, with a warning, not a tokenizer error."""
    header = "study,cell,rep,method,scope,suboptimality,n,imbalance\n"
    rows = "".join(f"split,{c},0,PRS,personalised,0.{c},1000,3\n" for c in range(3))
    torn = tmp_path / "split.csv"
    torn.write_text(header + rows + "split,3,0,PRS,person")
    code, err = invoke(["plot", str(torn)], capsys)
    assert code == 0
    assert "warning:" in err and "torn" in err and "Traceback" not in err
    assert (tmp_path / "split_personalised.png").exists()
    with pytest.warns(RuntimeWarning, match="torn"):
        assert len(read_results(torn)) == 3


def tiny() -> Study:
    return Study("tiny", ({"n": 300, "imbalance": 1.0},), methods=("MLE-Greedy", "PRS"), fixed=TINY, reps=1)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"reps": 0}, ValueError, "reps must be"),
    ({"reps": 1.5}, TypeError, "reps must be an integer"),
    ({"seed": -1}, ValueError, "seed must be"),
    ({"seed": "0"}, TypeError, "seed must be an integer"),
    ({"workers": 0}, ValueError, "workers must be"),
    ({"overrides": {"levle": 0.5}}, SettingError, "unknown setting 'levle'.*'level'"),
    ({"overrides": {"level": 0.5}}, SettingError, "does not use setting 'level'"),
    ({"overrides": {"rank": 2.5}}, SettingError, "rank must be an integer"),
    ({"overrides": {"ridge": "a"}}, SettingError, "ridge must be a real number"),
    ({"only": {"bogus": [1]}}, ValueError, "only: .*bogus"),
])
def test_runner_refuses_bad_arguments_naming_them(kwargs, error, match, tmp_path):
    kwargs = {"workers": 1} | kwargs
    refused(lambda: run_study(tiny(), tmp_path / "out", progress=False, **kwargs), match, error)
    assert not (tmp_path / "out").exists()


def test_runner_refuses_an_output_folder_that_is_a_file(files):
    refused(lambda: run_study(tiny(), files / "plain.txt", progress=False, workers=1), "is a file",
            OutputFolderError)


def test_read_results_refuses_a_file_with_no_header(files):
    refused(lambda: read_results(files / "empty.csv"), "no CSV header", StudyConfigError)


def test_every_study_accepts_the_settings_it_uses():
    """The check does not refuse what a study reads: every study's own cell settings pass as overrides."""
    from bayes_loco.experiments.runner import check_overrides

    for study in STUDIES.values():
        check_overrides(study, {**study.fixed, **study.cells[0]})
    with pytest.raises(SettingError, match="level"):
        check_overrides(STUDIES["split"], {"level": 0.9})
