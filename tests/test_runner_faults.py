"""The runner under faults: it never loses or duplicates a row, and leaves no process behind.

Found with the study ``split``: two runners on one folder both wrote every task;
a task with a missing row counted as done; a torn last line broke every later
run and plot; the workers of a killed runner lived on; ``--workers 1`` and ``2``
differed in the last bits. The study here is ``split`` made tiny through
``--set`` (d_x = 4, d_a = 4, rank 1), 12 tasks of two rows per replication.
"""

from __future__ import annotations

import csv
import io
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bayes_loco import cli
from bayes_loco.experiments import STUDIES, Study, run_study, store
from bayes_loco.experiments import runner as runner_module

SMALL = {"d_x": 4, "d_s": 3, "d_a": 4, "rank": 1, "population": 40, "global_states": 5,
         "contexts_per_state": 4}
SPLIT = STUDIES["split"]
KEY = ["cell", "rep", "method", "scope"]
# Wall-clock columns: the only ones that may differ between two runs of the same tasks.
CLOCK = ["fit_seconds", "policy_seconds"]


def arguments(out: Path, workers: int, reps: int) -> list[str]:
    sets = [item for key, value in SMALL.items() for item in ("--set", f"{key}={value}")]
    return ["run", "split", "--out", str(out), "--quiet", "--reps", str(reps), "--workers", str(workers),
            *sets]


def start(out: Path, workers: int, reps: int) -> subprocess.Popen:
    """A runner in a session of its own, so that every process it starts can be found after it dies."""
    return subprocess.Popen([sys.executable, "-m", "bayes_loco.cli", *arguments(out, workers, reps)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def session_processes(session: int) -> list[int]:
    """Live (not zombie) processes of ``session``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def assert_no_orphans(session: int, timeout: float = 60.0) -> float:
    """Wait for every process the killed runner started to end; return how long that took."""
    begin = time.monotonic()
    while session_processes(session):
        if time.monotonic() - begin > timeout:
            pytest.fail(f"processes {session_processes(session)} of the killed runner {session} still alive "
                        f"{timeout:.0f} s after it was killed")
        time.sleep(0.2)
    return time.monotonic() - begin


def records(path: Path) -> list[dict[str, str]]:
    """The CSV's rows as the strings on disk (no float parsing: bit-for-bit comparisons)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def assert_rows_once_and_equal(path: Path, reference: Path, reps: int, ignore: tuple[str, ...] = ()) -> None:
    """Every (cell, rep, method, scope) of ``reps`` replications exactly once, each as in ``reference``
    but for the clock and ``ignore`` columns."""
    rows = records(path)
    keys = [tuple(row[k] for k in KEY) for row in rows]
    assert len(keys) == len(set(keys)), "a row is written twice"
    expected = {tuple(row[k] for k in KEY): row for row in records(reference) if int(row["rep"]) < reps}
    assert set(keys) == set(expected), "a row is missing"
    for row in rows:
        want = expected[tuple(row[k] for k in KEY)]
        differ = [c for c in want if c not in (*CLOCK, *ignore) and row.get(c) != want[c]]
        assert not differ, f"{differ} differ in {tuple(row[k] for k in KEY)}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """Two replications of the tiny split study, run in this process with one worker."""
    out = tmp_path_factory.mktemp("reference")
    run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    return out


def copy_of(reference: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    return out


def test_second_runner_on_one_folder_is_refused_naming_the_first(reference, tmp_path, capsys):
    out = tmp_path / "out"
    first = start(out, workers=1, reps=20)
    lock = out / store.LOCK_NAME
    deadline = time.monotonic() + 180
    while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
        assert first.poll() is None and time.monotonic() < deadline, "the first runner never took the lock"
        time.sleep(0.1)
    try:
        code = cli.main(arguments(out, workers=1, reps=1))
        err = capsys.readouterr().err
        assert code == cli.EXIT_BUSY
        assert f"pid {first.pid}" in err and "--out" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    finally:
        first.kill()
        first.wait()
    assert_no_orphans(first.pid)
    # The killed runner's lock file still names it, and blocks nothing: the kernel dropped its lock.
    assert lock.read_text().strip() == str(first.pid)
    assert cli.main(arguments(out, workers=1, reps=1)) == 0
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps=1)


def kill_cycles(out: Path, workers: int, reps: int, cycles: int, seed: int) -> list[float]:
    """Start the runner and ``kill -9`` it at a random point, ``cycles`` times; return the orphans' lifetimes.

    A quarter of the kills land at a random time after the start (import, lock, metadata); the rest a
    random moment after new rows reach the CSV, where a task's block is being written.
    """
    rng = random.Random(seed)
    csv_path = out / "split.csv"
    lifetimes = []
    for _ in range(cycles):
        size = csv_path.stat().st_size if csv_path.exists() else 0
        runner = start(out, workers, reps)
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0.2, 4.0))
        else:
            deadline = time.monotonic() + 120
            while (runner.poll() is None and time.monotonic() < deadline
                   and (csv_path.stat().st_size if csv_path.exists() else 0) == size):
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.6))
        runner.kill()
        runner.wait()
        lifetimes.append(assert_no_orphans(runner.pid))
    return lifetimes


def resume_and_check(out: Path, reference: Path, workers: int, reps: int) -> None:
    finished = subprocess.run([sys.executable, "-m", "bayes_loco.cli", *arguments(out, workers, reps)],
                              capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    assert "Traceback" not in finished.stderr
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps)


# One worker is killed and resumed in the default run by test_experiments.py::test_killed_cli_run_resumes;
# two workers leave processes that could be orphaned, so that case runs here by default.
@pytest.mark.parametrize("workers", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_killed_runner_resumes_with_every_row_once_and_no_orphan(workers, reference, tmp_path):
    kill_cycles(tmp_path, workers, reps=2, cycles=3, seed=33 + workers)
    resume_and_check(tmp_path, reference, workers, reps=2)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_twenty_random_kills_then_resume(workers, tmp_path):
    """Six replications (72 tasks), so that the twenty kills keep landing in an unfinished run."""
    run_study(SPLIT, tmp_path / "reference", reps=6, overrides=SMALL, workers=1, progress=False)
    kill_cycles(tmp_path / "out", workers, reps=6, cycles=20, seed=2033 + workers)
    resume_and_check(tmp_path / "out", tmp_path / "reference", workers, reps=6)


@pytest.mark.parametrize("cut", [1, 7, 60, 250, 500])
def test_torn_last_line_is_cut_with_a_warning_and_the_task_rerun(cut, reference, tmp_path):
    """A write torn ``cut`` bytes before its end (a task's block is about 800 bytes, so the larger cuts
    reach its first row): the resumed run warns, cuts the torn line, reruns the task."""
    out = copy_of(reference, tmp_path)
    data = (out / "split.csv").read_bytes()
    (out / "split.csv").write_bytes(data[:-cut])
    with pytest.warns(RuntimeWarning, match="repaired"):
        run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps=2)


def test_task_with_a_missing_row_is_not_done(reference, tmp_path):
    out = copy_of(reference, tmp_path)
    rows = records(out / "split.csv")
    lost = rows.pop(5)
    pd.DataFrame(rows).to_csv(out / "split.csv", index=False)
    with pytest.warns(RuntimeWarning, match=rf"incomplete task.*\('{lost['cell']}', '{lost['rep']}'\)"):
        run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps=2)


def test_a_failed_write_leaves_the_file_as_it_was(reference, tmp_path, monkeypatch):
    """A full disk in the middle of a block: the block is undone, the error goes on, a rerun is whole."""
    out = copy_of(reference, tmp_path)
    rows = records(out / "split.csv")
    pd.DataFrame([r for r in rows if r["rep"] == "0"]).to_csv(out / "split.csv", index=False)
    before = (out / "split.csv").read_bytes()
    real_write = os.write

    def full_disk(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("split.csv"):
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(runner_module.os, "write", full_disk)
    with pytest.raises(OSError, match="No space"):
        run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    monkeypatch.undo()
    assert (out / "split.csv").read_bytes() == before
    run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps=2)


def test_results_written_before_task_rows_existed_resume(reference, tmp_path):
    """A CSV of an older version (no task_rows): its tasks count as done, and the column is added."""
    out = copy_of(reference, tmp_path)
    frame = pd.read_csv(io.StringIO((out / "split.csv").read_text()), dtype=str, keep_default_na=False)
    frame[frame["rep"] == "0"].drop(columns="task_rows").to_csv(out / "split.csv", index=False)
    run_study(SPLIT, out, reps=2, overrides=SMALL, workers=1, progress=False)
    assert_rows_once_and_equal(out / "split.csv", reference / "split.csv", reps=2, ignore=("task_rows",))
    rows = records(out / "split.csv")
    assert {r["task_rows"] for r in rows if r["rep"] == "0"} == {""}
    assert {r["task_rows"] for r in rows if r["rep"] == "1"} == {"2"}


def test_one_and_two_workers_write_bit_identical_csvs(tmp_path):
    """The same numbers to the last bit whatever the worker count, the Wald set's radius included."""
    study = Study("bits", ({"n": 300, "imbalance": 1.0}, {"n": 600, "imbalance": 3.0}),
                  methods=("MLE-Greedy", "PRS", "PRS-exact-Wald"), fixed=SMALL, reps=2)
    for workers in (1, 2):
        run_study(study, tmp_path / f"w{workers}", workers=workers, progress=False)

    def table(workers):
        rows = records(tmp_path / f"w{workers}" / "bits.csv")
        return sorted(tuple((k, v) for k, v in row.items() if k not in CLOCK) for row in rows)

    one, two = table(1), table(2)
    assert len(one) == 2 * 2 * 3 * 2
    assert one == two


# ------------------------------------------------------------------- the store, without a runner


def test_store_appends_whole_tasks_and_resume_keeps_only_those(tmp_path):
    """append_task writes each task's rows with their count; resume cuts a torn line and a short task."""
    path = tmp_path / "s.csv"
    store.append_task(path, [{"cell": 0, "rep": 0, "value": 1.5}, {"cell": 0, "rep": 0, "value": 2.5}])
    store.append_task(path, [{"cell": 1, "rep": 0, "value": 3.5, "extra": "x"}])  # a column the file lacks
    assert [list(row.values()) for row in records(path)] == [
        ["0", "0", "1.5", "2", ""], ["0", "0", "2.5", "2", ""], ["1", "0", "3.5", "1", "x"]]
    whole = path.read_bytes()
    with open(path, "a") as handle:  # a task that lost a row (2 announced, 1 written), then a torn line
        handle.write("2,0,4.5,2,\n3,0,5.")
    with pytest.warns(RuntimeWarning, match=r"cut 1 torn line.*dropped the 1 rows of 1 incomplete task"):
        done = store.resume(path)
    assert done == {(0, 0), (1, 0)}
    assert path.read_bytes() == whole
    assert store.resume(tmp_path / "none.csv") == set()


def test_store_read_results_leaves_a_torn_line_out_and_write_atomic_replaces(tmp_path):
    path = tmp_path / "r.csv"
    store.write_atomic(path, b"cell,rep\n0,0\n1,")
    with pytest.warns(RuntimeWarning, match="ignored 1 torn line"):
        frame = store.read_results(path)
    assert frame.to_dict("list") == {"cell": [0], "rep": [0]}
    store.write_atomic(path, b"cell,rep\n")
    assert path.read_bytes() == b"cell,rep\n" and [p.name for p in tmp_path.iterdir()] == ["r.csv"]
    store.write_atomic(path, b"")
    with pytest.raises(store.StudyConfigError, match="holds no CSV header"):
        store.read_results(path)
