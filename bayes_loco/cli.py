"""The ``bayes-loco`` command line: run studies, compare methods, redraw figures, and the shift
study's radius frontier and the held-out study.

Its help is plain text, with one line per study in ``run --help``. Exit codes: 0
success; 2 a bad argument (one line naming the option, as argparse does); 3 a study
or input file problem (a CSV that is not a run's results, a folder holding another
configuration's results); 4 the output folder is in use by another run. No error
ends in a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ._version import __version__
from .config import get_config
from .datasets.personalllm import write_standin
from .experiments import METHODS, STUDIES, frontier, heldout, run_study, summarise
from .experiments.figures import STUDY_FIGURES, plot_calibration, plot_results
from .experiments.problems import PERSONALLLM_FILES
from .experiments.runner import SettingError, check_overrides, select_cells
from .experiments.store import (
    OutputBusyError,
    OutputFolderError,
    StudyConfigError,
    output_folder,
    read_results,
)
from .experiments.studies import Study

EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_BUSY = 4
# The columns `plot` needs of a results CSV.
RESULT_KEYS = ("study", "cell", "rep", "method", "scope", "suboptimality")


class UsageError(Exception):
    """A bad argument found after parsing; the message names the option (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the option and what is wrong, no usage block."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _integer(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def _positive_int(text: str) -> int:
    return _integer(text, 1, "a positive integer")


def _seed(text: str) -> int:
    return _integer(text, 0, "a non-negative integer")


def _imbalance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a real number >= 1, got {text!r}") from None
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"must be a real number >= 1, got {text}")
    return value


def _value(text: str):
    """A setting's value from the command line: a JSON number, true/false/null, or else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _print_table(results: pd.DataFrame, by: list[str]) -> None:
    table = summarise(results, by)
    with pd.option_context("display.width", 160, "display.max_rows", 500,
                           "display.float_format", "{:.4f}".format):
        print(table.to_string(index=False))


def _figures(results: pd.DataFrame, study: Study | None, stem: Path) -> None:
    """One figure per scope, and a calibration figure where the results hold truth distances."""
    x, panel, y = (study.x, study.panel, study.y) if study else ("n", None, "suboptimality")
    title = f"{study.name}: {study.description}" if study else ""
    for scope in results["scope"].unique():
        figure = stem.with_name(f"{stem.name}_{scope}")
        plt.close(plot_results(results, x=x, panel=panel, y=y, scope=scope, title=title, out=figure))
        print(f"figure: {figure}.png")
    if "truth_distance" in results and results[["truth_distance", "level"]].notna().all(axis=1).any():
        figure = stem.with_name(f"{stem.name}_calibration")
        # Coverage depends on N more than on the other settings: panels by N unless the study
        # varies Θ* itself.
        plt.close(plot_calibration(results, panel="theta_kind" if panel == "theta_kind" else "n",
                                   title=f"{study.name if study else stem.name}: coverage of θ*_rtv "
                                         "against nominal level", out=figure))
        print(f"figure: {figure}.png")
    if study is not None and study.figure:
        figure = stem.with_name(f"{stem.name}_{study.figure}")
        plt.close(STUDY_FIGURES[study.figure](results, title=title, out=figure))
        print(f"figure: {figure}.png")


def _table_columns(study: Study | None, results: pd.DataFrame) -> list[str]:
    # The figure's x (a level, C₂, d_x) is a cell setting too: averaging over it would hide the curve.
    extra = (study.panel, study.x) if study else ()
    return list(dict.fromkeys(c for c in ("scope", "n", *extra, "method") if c in results))


def _finish(study: Study, results: pd.DataFrame, out: Path) -> None:
    _print_table(results, _table_columns(study, results))
    _figures(results, study, out / study.name)
    print(f"results: {out / (study.name + '.csv')}")


def _personalllm_files(args) -> dict:
    """The user's PersonalLLM files, or a generated stand-in in the output folder (said loudly)."""
    if args.train and args.test:
        return {"personalllm_train": str(Path(args.train).resolve()),
                "personalllm_test": str(Path(args.test).resolve())}
    if args.train or args.test:
        raise UsageError("--train and --test: give both for the PersonalLLM study")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create the folder {out}: {exc.strerror}") from None
    train, test = out / "personalllm_standin_train.csv", out / "personalllm_standin_test.csv"
    if not train.exists():
        write_standin(train, 9402, seed=1)
        write_standin(test, 1000, seed=2)
    print(f"PersonalLLM: no --train/--test given, using a GENERATED stand-in with the benchmark's layout "
          f"and moments ({train}, {test}); results are not the benchmark's.")
    return {"personalllm_train": str(train.resolve()), "personalllm_test": str(test.resolve())}


def _check_files(args) -> None:
    for option in ("train", "test"):
        path = getattr(args, option)
        if path and not Path(path).is_file():
            raise UsageError(f"--{option}: {path} " + ("is a folder, not a file" if Path(path).is_dir()
                                                        else "does not exist"))


def _run(args, study: Study, options: dict, **kwargs) -> pd.DataFrame:
    """:func:`run_study`, with its refusals said in terms of the command's options.

    ``options`` maps a setting to the option that gave it, and None to the option
    blamed for an error that names no setting; a setting no option gave is the study's own.
    """
    try:
        results = run_study(study, args.out, seed=args.seed, workers=args.workers, progress=not args.quiet,
                            **kwargs)
    except OutputFolderError as exc:
        raise UsageError(f"--out: {exc}") from None
    except SettingError as exc:
        option = options.get(exc.key) if exc.key else options.get(None)
        if option is None:
            raise
        raise UsageError(f"{option}: {exc}") from None
    _say_warnings(results)
    return results


def _say_warnings(results: pd.DataFrame) -> None:
    """The distinct warnings the run's tasks recorded (the results' ``warnings`` column), on stderr."""
    if "warnings" not in results:
        return
    notes = results.drop_duplicates(["cell", "rep"])["warnings"].astype(object).fillna("").astype(str)
    counts = notes[notes != ""].value_counts()
    for note, count in counts.head(get_config()["shown_warnings"]).items():
        print(f"warning ({count} of {notes.size} tasks): {note}", file=sys.stderr)
    if counts.size > get_config()["shown_warnings"]:
        print(f"warning: {counts.size - get_config()["shown_warnings"]} more distinct warnings in the "
              f"results' `warnings` "
              "column", file=sys.stderr)


def _cmd_run(args) -> int:
    study = STUDIES[args.study]
    overrides = {"population": args.population} if args.population else {}
    overrides |= {key: _value(value) for key, value in args.set or []}
    only = {key: [_value(v) for v in values.split(",")] for key, values in args.only or []}
    try:
        check_overrides(study, overrides)
    except SettingError as exc:
        raise UsageError(f"--set: {exc}") from None
    try:
        select_cells(study, only)
    except ValueError as exc:
        raise UsageError(f"--only: {exc}") from None
    blame = "--set" if args.set else None
    options = dict.fromkeys(overrides, "--set") | {"population": "--population", None: blame}
    if study.problem == "personalllm":
        _check_files(args)
        overrides |= _personalllm_files(args)
        options |= dict.fromkeys(PERSONALLLM_FILES, "--train/--test")
        options[None] = options[None] or "--train/--test"
    elif args.train or args.test:
        raise UsageError(f"--train and --test are the PersonalLLM files; study {study.name!r} runs on the "
                         f"{study.problem!r} problem")
    executor = None
    if args.scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--scheduler needs Dask: pip install 'bayes_loco[dask]'") from None
        try:
            executor = Client(args.scheduler, timeout=10).get_executor()
        except (OSError, ValueError, TypeError) as exc:
            raise UsageError(f"--scheduler: cannot connect to {args.scheduler!r}: {exc}") from None
    results = _run(args, study, options, reps=args.reps, executor=executor, overrides=overrides, only=only)
    _finish(study, results, Path(args.out))
    return 0


DEMO_NOTE = """
Columns: mean = sub-optimality, the optimal policy's value minus this policy's on the evaluation
population under the true theta (lower is better; 0 is optimal), averaged over the replications
(reps); se = its standard error over them; coverage = share of replications whose uncertainty set
contains the true theta (NaN where the method has no set, or its set is not meant to cover theta);
value_coverage = share where the policy's true value, relative to the reference action, is at least
the pessimistic value it reported; theta_error = ||Theta_hat - Theta*||_F of the fit behind it.

How to read the personalised rows: one action per (x, s). MLE-Greedy bets on actions the data barely
compare and is worst. PRS-exact-Wald, the exact minimax policy of PRS's calibrated 90% Wald set, is
best and its value bound holds (value_coverage 1). The paper's PRS (relaxed objective, the tuned
Gram ball C2 = 5) can lose to MLE-Pessimistic at this size: C2 = 5 is a tuned strength and its ball
shrinks like sqrt(k/N), before rarely compared actions are estimated well (docs/results/baselines.md,
notebook 04). Neither tuned ball covers theta (coverage 0): they are penalties, not confidence sets.

How to read the global rows: one action per state for a population deployed away from the training
contexts (x centred at (1, -1, 0, ...), outside [-1, 1]^20). The data cover action 1, which is the best
there; the other actions are compared rarely. PRS-exact-Wald guards every direction of theta (radius
sqrt(chi2_78) = 9.7) and falls back to the reference action; PRS-exact-Wald-values guards only the values a
global policy can reach (radius about 4) and keeps the well-covered best action. Personalised rows of the
two are the same: personalised policies reach every direction. docs/results/pessimism.md has
the 20-seed study: `bayes-loco run shift`."""


def _cmd_demo(args) -> int:
    args.study = "demo"
    args.scheduler = args.population = args.reps = args.train = args.test = args.set = args.only = None
    code = _cmd_run(args)
    print(DEMO_NOTE)
    return code


def _cmd_compare(args) -> int:
    study = Study(f"compare_n{args.n}_q{args.q:g}_r{args.rank}",
                  ({"n": args.n, "imbalance": args.q, "rank": args.rank},), methods=tuple(args.methods),
                  reps=args.reps)
    results = _run(args, study, {"n": "--n", "imbalance": "--q", "rank": "--rank", None: "--n/--q/--rank"})
    table = summarise(results, ["scope", "method", "objective", "set_kind", "level"])
    if args.format == "json":
        print(json.dumps(table.to_dict(orient="records"), indent=2, default=float))
    else:
        _print_table(results, ["scope", "method", "objective", "set_kind"])
    return 0


def _cmd_frontier(args) -> int:
    out = output_folder(Path(args.out))
    table = frontier.run(args.reps, args.seed, out, progress=(lambda line: None) if args.quiet else print)
    print(frontier.ratios(table).round(2).to_string())
    print(f"wrote {out / 'shift-frontier.csv'} and {out / 'shift-frontier.png'}")
    return 0


def _cmd_heldout(args) -> int:
    out = Path(args.out)
    output_folder(out.parent)
    table = heldout.run(args.n, args.users, args.folds, args.seed, out,
                        progress=(lambda line: None) if args.quiet else print)
    print(heldout.markdown(table))
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.md')}")
    return 0


class InputFileError(Exception):
    """A file given to a command is missing or is not what the command reads (exit code 3)."""


def _results_csv(path: Path) -> pd.DataFrame:
    """The rows of a results CSV of `run`, or an :class:`InputFileError` saying what the file is instead."""
    if not path.exists():
        raise InputFileError(f"{path} does not exist")
    if path.is_dir():
        raise InputFileError(f"{path} is a folder, not a results CSV (give the <study>.csv in it)")
    try:
        frame = read_results(path)
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
        raise InputFileError(f"{path} is not a results CSV of `bayes-loco run`: {exc}") from None
    missing = [c for c in RESULT_KEYS if c not in frame]
    if missing:
        raise InputFileError(f"{path} is not a results CSV of `bayes-loco run`: it has no column "
                             f"{', '.join(map(repr, missing))}")
    if frame.empty:
        raise InputFileError(f"{path} holds no rows")
    return frame


def _cmd_plot(args) -> int:
    paths = [Path(p) for p in args.csv]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        frames = [_results_csv(p) for p in paths]
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    results = pd.concat(frames, ignore_index=True)
    names = sorted(results["study"].astype(str).unique())
    if len(names) > 1:
        raise InputFileError(f"the CSVs hold different studies {names}")
    repeated = results.duplicated(["cell", "rep", "method", "scope"])
    if repeated.any():
        raise InputFileError(f"{int(repeated.sum())} rows repeat a (cell, rep, method, scope) of another "
                             "CSV: combine runs of different cells or replications only")
    study = STUDIES.get(names[0])
    if len(paths) > 1:
        _print_table(results, _table_columns(study, results))
    _figures(results, study, paths[0].with_suffix(""))
    return 0


DESCRIPTION = "Run the studies of bayes_loco, compare its methods at one setting, and redraw figures."
EPILOG = """\
Exit codes: 0 success, 2 a bad argument, 3 a study or input file problem, 4 the
output folder is in use by another run. 'bayes-loco command --help' describes
each command."""
DEMO_DESCRIPTION = """\
The paper's simulation at N = 3,000 comparisons, imbalance q = 3, rank 3, three
replications, through MLE-Greedy, MLE-Pessimistic, PRS and the exact
pessimistic policies of PRS's calibrated Wald set, for personalised policies
and for a global policy deployed to shifted contexts. Prints a table and how to
read it, and writes a CSV and figures to --out. About three minutes on two
cores."""
RUN_DESCRIPTION = """\
Run a study, or resume it: every (cell, replication) is one task with its own
seed, and each finished task's rows are appended to OUT/study.csv, so a run
that stops continues where it stopped. Prints a table (mean, standard error,
seeds, coverage) and draws one figure per scope."""


def _study_list() -> str:
    width = max(map(len, STUDIES))
    return "studies:\n" + "\n".join(f"  {name:<{width}}  {study.description}"
                                     for name, study in STUDIES.items())


def _method_list() -> str:
    names = textwrap.fill(", ".join(METHODS), width=88, initial_indent="  ", subsequent_indent="  ",
                          break_on_hyphens=False)
    return f"methods (default: {' '.join(list(METHODS)[:4])}):\n{names}"


def _add_study_commands(sub) -> None:
    """The two studies of their own shape: ``frontier`` and ``heldout``."""
    front = sub.add_parser("frontier", help="the shift study's global policy against the Wald set's radius",
                           description=frontier.__doc__.split("\n\n")[0] + ".",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    front.add_argument("--reps", type=_positive_int, default=20, help="seeds per cell")
    front.add_argument("--seed", type=_seed, default=0, help="base seed (the shift study's task seeds)")
    front.add_argument("--out", default="shift-frontier", help="folder for the CSV and the figure")
    front.add_argument("--quiet", action="store_true", help="no line per seed")
    front.set_defaults(func=_cmd_frontier)

    held = sub.add_parser("heldout", help="held-out log-loss of BT, the MLE and PRS on unseen users",
                          description=heldout.__doc__.split("\n\n")[0] + ".",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    held.add_argument("--n", type=_positive_int, default=3000, help="comparisons per problem")
    held.add_argument("--users", type=_positive_int, default=300, help="users (contexts) per problem")
    held.add_argument("--folds", type=_positive_int, default=5, help="folds (grouped by user)")
    held.add_argument("--seed", type=_seed, default=0, help="seed of the problems, users and folds")
    held.add_argument("--out", default="heldout", help="write OUT.csv (per fold) and OUT.md (the table)")
    held.add_argument("--quiet", action="store_true", help="no line per method")
    held.set_defaults(func=_cmd_heldout)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bayes-loco", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bayes-loco {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def common(p, out_default):
        p.add_argument("--out", default=out_default, help="folder for CSV, JSON and figures")
        p.add_argument("--seed", type=_seed, default=0, help="base seed (task seeds derive from it)")
        p.add_argument("--workers", type=_positive_int, default=None, help="local worker processes")
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    demo = sub.add_parser("demo", help="the paper's simulation at one setting: a table and figures",
                          description=DEMO_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(demo, "bayes_loco_demo")
    demo.set_defaults(func=_cmd_demo)

    run = sub.add_parser("run", help="run (or resume) a study", description=RUN_DESCRIPTION,
                         epilog=_study_list(), formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("study", choices=list(STUDIES), metavar="study", help="one of the studies listed below")
    run.add_argument("--reps", type=_positive_int, default=None, help="replications per cell")
    run.add_argument("--population", type=_positive_int, default=None, help="evaluation population size")
    run.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786)")
    run.add_argument("--train", default=None, help="PersonalLLM train split (parquet or CSV)")
    run.add_argument("--test", default=None, help="PersonalLLM test split (parquet or CSV)")
    run.add_argument("--set", type=_setting, action="append", metavar="KEY=VALUE",
                     help="a setting for every cell, e.g. level=0.95 or posterior_nuts_sampler=numpyro "
                          "(posterior_<group>_<field> go to fit_posterior's nuts, prior or vi settings, "
                          "e.g. posterior_nuts_draws=200, posterior_prior_scale=2); repeatable")
    run.add_argument("--only", type=_setting, action="append", metavar="KEY=V1,V2",
                     help="run only the cells with these settings, e.g. n=10000; seeds are the whole "
                          "study's, so subsets run apart combine; repeatable")
    common(run, "results")
    run.set_defaults(func=_cmd_run)

    compare = sub.add_parser("compare", help="sub-optimality of each method at one setting",
                             description="Sub-optimality of each method on the paper's simulation at one "
                                         "setting of N, q and the rank, over a few replications.",
                             epilog=_method_list(), formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("--n", type=_positive_int, default=3000, help="comparisons N")
    compare.add_argument("--q", type=_imbalance, default=3.0, help="imbalance q >= 1")
    compare.add_argument("--rank", type=_positive_int, default=3, help="rank r")
    compare.add_argument("--reps", type=_positive_int, default=3, help="replications")
    compare.add_argument("--methods", nargs="+", default=list(METHODS)[:4], choices=list(METHODS),
                         metavar="METHOD", help="methods to compare (listed below)")
    compare.add_argument("--format", choices=["table", "json"], default="table", help="print a table or JSON")
    common(compare, "results_compare")
    compare.set_defaults(func=_cmd_compare)

    _add_study_commands(sub)

    plot = sub.add_parser("plot", help="redraw a study's figures from its CSV (or several, combined)",
                          description="Redraw a study's figures from the CSV that run wrote, next to it. "
                                      "Several CSVs of one study (parts run with --only) are combined, "
                                      "and the combined table is printed.")
    plot.add_argument("csv", nargs="+", help="results CSVs written by 'run' (of one study: "
                                                             "several combine runs of different cells, e.g. "
                                                             "with --only)")
    plot.set_defaults(func=_cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        code, message = EXIT_USAGE, str(exc)
    except OutputBusyError as exc:
        code, message = EXIT_BUSY, f"--out: {exc}"
    except (InputFileError, StudyConfigError, FileNotFoundError, ValueError) as exc:
        code, message = EXIT_INPUT, str(exc)
    one_line = " ".join(message.split())
    print(f"bayes-loco {args.command}: error: {one_line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
