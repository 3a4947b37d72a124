"""The output folder of a study run: its lock, its results CSV and the atomic writes that keep it whole.

One runner at a time writes to a folder (:func:`output_lock`, an ``flock`` on
``<out>/.bayes-loco.lock``). Each finished task's rows are appended in one write with
their count (:func:`append_task`), so a killed run leaves at most a torn last line or an
incomplete task; :func:`resume` repairs both before a rerun and :func:`read_results`
reads around them. Whole files are replaced atomically (:func:`write_atomic`).
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

LOCK_NAME = ".bayes-loco.lock"


class StudyConfigError(ValueError):
    """An output folder holds results of the same study run with another configuration, or a bad setting."""


class OutputFolderError(StudyConfigError):
    """The output folder is a file, or cannot be created or written."""


class OutputBusyError(RuntimeError):
    """Another runner holds the output folder's lock."""


def output_folder(out: Path) -> Path:
    """``out``, created if need be; a file, a path under a file or an unwritable place is refused."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"{out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFolderError(f"cannot create the folder {out}: {exc.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputFolderError(f"cannot write in the folder {out}")
    return out


@contextmanager
def output_lock(out: Path):
    """Hold ``out``'s lock while a runner writes there; a second runner is refused, naming the first's pid.

    The lock is an ``flock`` on ``out/.bayes-loco.lock``: the kernel releases it when its
    holder ends, however it ends, so the lock file of a killed runner blocks nothing.
    The file holds the holder's pid for the message, and is emptied on release.

    Parameters
    ----------
    out : Path
        The output folder, which must exist.

    Returns
    -------
    context manager

    Raises
    ------
    OutputBusyError
        Another process holds the lock.

    Examples
    --------
    >>> import pathlib
    >>> from bayes_loco import experiments as ex
    >>> pathlib.Path("results").mkdir(exist_ok=True)
    >>> with ex.output_lock(pathlib.Path("results")):
    ...     print("this process alone writes to results/")
    this process alone writes to results/
    """
    try:
        fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OutputFolderError(f"cannot write in the folder {out}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise OutputBusyError(f"{out} is in use by another bayes-loco run (pid {holder}): wait for it to "
                                  "finish, or write to another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step: a reader, or a kill, sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _records(path: Path) -> tuple[list[str], list[list[str]], int]:
    """The header, the whole records and the count of torn ones of a results CSV.

    Blocks are appended whole (:func:`append_task`), so only the end of the file can be torn: a
    last line without its newline, or a quoted field left open.
    """
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    torn = int(cut < len(data))
    try:
        text = data[:cut].decode()
    except UnicodeDecodeError as exc:
        raise StudyConfigError(f"{path} is not a results CSV: not UTF-8 text ({exc.reason})") from None
    reader = csv.reader(io.StringIO(text), strict=True)
    rows = []
    try:
        rows.extend(row for row in reader if row)
    except csv.Error:
        torn += 1
    if not rows:
        return [], [], torn
    header, body = rows[0], rows[1:]
    whole = [row for row in body if len(row) == len(header)]
    return header, whole, torn + len(body) - len(whole)


def _csv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *rows])
    return text.getvalue().encode()


def read_results(path: str | Path) -> pd.DataFrame:
    """A results CSV of :func:`run_study` as a frame, without a torn last line (with a warning).

    Parameters
    ----------
    path : str or Path
        ``<out>/<study>.csv``.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    StudyConfigError
        The file holds no header.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3},), methods=("PRS",), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> _ = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> ex.read_results("tiny_study/tiny.csv")[["cell", "rep", "method"]].drop_duplicates().shape
    (2, 3)
    """
    path = Path(path)
    header, rows, torn = _records(path)
    if not header:
        raise StudyConfigError(f"{path} holds no CSV header")
    if torn:
        warnings.warn(f"{path}: ignored {torn} torn line(s) at its end (a run killed while writing; "
                      "`bayes-loco run` repairs the file when it resumes)", RuntimeWarning, stacklevel=2)
    return pd.read_csv(io.BytesIO(_csv_bytes(header, rows)))


def resume(csv_path: Path) -> set[tuple[int, int]]:
    """Repair ``csv_path`` for a resumed run and return its finished (cell, rep) tasks.

    A torn last line is cut and the rows of a task that has fewer rows than its
    ``task_rows`` are dropped (both with a warning), so the task runs again and
    every row ends up once. Rows written before ``task_rows`` existed count as finished.
    """
    if not csv_path.exists():
        return set()
    header, rows, torn = _records(csv_path)
    if not header:  # killed before the header was whole: start afresh
        csv_path.unlink()
        return set()
    if not {"cell", "rep"} <= set(header):
        raise StudyConfigError(f"{csv_path} is not a results CSV of bayes-loco run (no cell and rep columns)")
    cell, rep = header.index("cell"), header.index("rep")
    size = header.index("task_rows") if "task_rows" in header else None
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        counts[row[cell], row[rep]] = counts.get((row[cell], row[rep]), 0) + 1
    incomplete = {task for task, rows_of_task in _expected(rows, cell, rep, size).items()
                  if rows_of_task != counts[task]}
    if torn or incomplete:
        kept = [row for row in rows if (row[cell], row[rep]) not in incomplete]
        warnings.warn(f"{csv_path}: repaired for the resumed run: cut {torn} torn line(s) at its end and "
                      f"dropped the {len(rows) - len(kept)} rows of {len(incomplete)} incomplete task(s) "
                      f"{sorted(incomplete)}, which run again", RuntimeWarning, stacklevel=3)
        write_atomic(csv_path, _csv_bytes(header, kept))
    return {(int(c), int(r)) for c, r in counts if (c, r) not in incomplete}


def _expected(rows, cell: int, rep: int, size: int | None) -> dict[tuple[str, str], int]:
    """Each task's row count as its rows record it in column ``size`` (tasks without one left out)."""
    if size is None:
        return {}
    return {(row[cell], row[rep]): int(float(row[size])) for row in rows if row[size]}


def append_task(csv_path: Path, rows: list[dict]) -> None:
    """Append one task's rows, all or none: one write of the whole block, then fsync.

    Each row carries ``task_rows``, the task's row count, so a resumed run knows a task is whole.
    A write that fails (a full disk) is undone before the error goes on.
    """
    frame = pd.DataFrame(rows).assign(task_rows=len(rows))
    if not csv_path.exists():
        write_atomic(csv_path, frame.to_csv(index=False).encode())
        return
    with open(csv_path, newline="") as handle:
        header = next(csv.reader(handle))
    new = [c for c in frame.columns if c not in header]
    if new:  # a column the file lacks (a newer version's): rewrite the file with it, not drop it
        _, old, _ = _records(csv_path)
        header = [*header, *new]
        block = frame.reindex(columns=header).to_csv(index=False, header=False)
        write_atomic(csv_path, _csv_bytes(header, [row + [""] * len(new) for row in old]) + block.encode())
        return
    block = memoryview(frame.reindex(columns=header).to_csv(index=False, header=False).encode())
    fd = os.open(csv_path, os.O_WRONLY | os.O_APPEND)
    start = os.fstat(fd).st_size
    try:
        while block:
            block = block[os.write(fd, block):]
        os.fsync(fd)
    except BaseException:
        os.ftruncate(fd, start)
        raise
    finally:
        os.close(fd)
