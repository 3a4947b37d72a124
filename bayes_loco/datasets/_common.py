"""What the readers share: the :class:`Dataset` they return, reading a table, and the one-hot encodings."""

from __future__ import annotations

import ast
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_int
from ..data import PreferenceData
from ..population import Population

TABLE_SUFFIXES = (".parquet", ".pq", ".json", ".jsonl", ".csv")
INTERCEPT = "intercept"
MISSING = "(missing)"
OTHER = "(other)"


@dataclass(frozen=True, eq=False)
class Dataset:
    """Comparisons read from a downloaded file, and the tables they were built from.

    Attributes
    ----------
    data : PreferenceData
        x_t (``contexts``), Δφ_t = φ(a_t1) − φ(a_t0) (``differences``), y_t ∈ {0, ½, 1}
        (1: ``action_1`` preferred, ½: a tie) and the action indices (a_t0, a_t1).
    comparisons : pandas.DataFrame
        One row per comparison, in the order of ``data``: ``user_id``, ``action_0``,
        ``action_1`` (names), ``y`` and the ids of the rows of the file it came from.
    users : pandas.DataFrame
        One row per user (``user_id``, ``n_comparisons`` and the answers that became x).
    actions : pandas.DataFrame
        One row per action, indexed by its action index: ``name``, ``n_comparisons`` and
        ``reference`` (True for the one action, index 0, whose one-hot column is dropped:
        rewards are relative to it, as the policies' ``reference_action=0`` expects).
    context_names, feature_names : tuple of str
        Names of the columns of x (d_x) and of Δφ (d_φ).
    groups : ndarray of str, shape (N,)
        The user of each comparison: pass it as ``groups=`` to a user-grouped
        cross-validation (unseen-user performance).
    source : str
        The file or folder read and its schema.
    notes : tuple of str
        What the reader left out or assumed (shown by ``repr``).
    """

    data: PreferenceData
    comparisons: pd.DataFrame
    users: pd.DataFrame
    actions: pd.DataFrame
    context_names: tuple[str, ...]
    feature_names: tuple[str, ...]
    groups: np.ndarray
    source: str
    notes: tuple[str, ...] = ()

    @property
    def n_actions(self) -> int:
        return len(self.actions)

    @property
    def action_features(self) -> np.ndarray:
        """φ(a) of every action, shape (A, d_φ): its one-hot row (the reference's is 0).

        Difference columns that are not a property of the action alone (style
        differences, response length) are 0: actions compared at equal style.
        """
        out = np.zeros((self.n_actions, self.data.d_phi))
        out[np.arange(1, self.n_actions), np.arange(self.n_actions - 1)] = 1.0
        return out

    def population(self) -> Population:
        """One row per user (in the order of ``users``) with every action as a candidate.

        x is the user's context, φ is :attr:`action_features`, and all users share one
        state, so a ``"global"`` policy picks one action for everyone and a
        ``"personalised"`` one an action per user. Needs contexts that are constant per
        user (PRISM's survey answers; Arena without ``language`` contexts).

        Returns
        -------
        Population
            n = the number of users, one state, A = the number of actions.

        Raises
        ------
        ValueError
            When some user's contexts vary between their comparisons.

        Examples
        --------
        >>> users = bl.datasets.write_prism("prism", 40, seed=0).read()
        >>> users.population()
        Population(n=40, states=1, actions=10, d_x=28, d_phi=9)
        """
        codes = pd.Index(self.users["user_id"]).get_indexer(self.groups)
        contexts = np.zeros((len(self.users), self.data.d_x))
        contexts[codes] = self.data.contexts
        varying = np.any(self.data.contexts != contexts[codes], axis=1)
        if varying.any():
            users = sorted(set(self.groups[varying]))
            raise ValueError(f"population: the contexts of users {users[:5]}"
                             f"{' and more' if len(users) > 5 else ''} vary between their comparisons "
                             "(per-battle contexts such as language), so a user has no single x; build a "
                             "Population from the contexts you want to score")
        features = np.broadcast_to(self.action_features, (len(self.users), *self.action_features.shape))
        return Population(contexts, features.copy(), np.zeros(len(self.users), dtype=np.intp))

    def __repr__(self) -> str:
        ties = float(self.data.ties.mean())
        lines = [f"Dataset({self.source}: N={self.data.n_comparisons}, users={len(self.users)}, "
                 f"actions={self.n_actions}, ties={ties:.1%}, d_x={self.data.d_x}, d_phi={self.data.d_phi}, "
                 f"reference={self.actions['name'].iloc[0]!r})"]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def schema_error(path, what: str, missing: Sequence[str], needs: str) -> ValueError:
    """One ValueError naming the file, the columns it lacks and what the schema needs."""
    return ValueError(f"{path} is not {what}: it lacks {', '.join(map(repr, missing))} ({needs})")


def _json_lines(path: Path, text: str) -> list:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number} is a JSON {type(record).__name__}, not an object (a row)")
        records.append(record)
    return records


def read_records(path: Path) -> list[dict]:
    """The rows of a JSON-lines file as dicts (nested fields kept), one error naming a bad line."""
    return _json_lines(path, read_text(path))


# The first bytes of files that are not what their name says, and what each is.
MAGIC = ((b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip), or give the .gz file to pandas and "
                       "pass the frame"),
         (b"PK\x03\x04", "a zip archive (or an Excel workbook): extract it, or save the sheet as CSV"),
         (b"PAR1", "a Parquet file: name it .parquet"))


def _sniff(path: Path, what: str, text_expected: bool) -> None:
    """One error when the file's first bytes say it is another format than its name."""
    with path.open("rb") as handle:
        head = handle.read(4)
    for magic, meaning in MAGIC:
        if head.startswith(magic) and (text_expected or magic != b"PAR1"):
            raise ValueError(f"{what} file {path} is {meaning}")
    if not text_expected and head != b"PAR1":
        raise ValueError(f"{what} file {path} is named {path.suffix} but is not a Parquet file (it does not "
                         f"start with PAR1; it starts {head!r}): rename it to what it is (.csv, .jsonl)")


def read_text(path: Path, what: str = "the") -> str:
    """The file as UTF-8 text (a BOM dropped), or one error naming the file and the first bad byte."""
    _sniff(path, what, True)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} file {path} is not UTF-8 text: byte {raw[exc.start]:#04x} at offset "
                         f"{exc.start} "
                         "(latin-1 or Windows-1252?); re-save it as UTF-8, e.g. "
                         "pd.read_csv(path, encoding='latin-1').to_csv(new_path, index=False)") from None


def check_file(path, what: str) -> Path:
    """``path`` as a Path to an existing, non-empty regular file, or one error naming it."""
    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a str or Path to the {what} file, got {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} file {path} is not a regular file")
    if path.stat().st_size == 0:
        raise ValueError(f"{what} file {path} is empty")
    return path


def read_table(path, what: str, columns=None) -> pd.DataFrame:
    """A .parquet, .json (records, columns or JSON lines), .jsonl or .csv file as a DataFrame with rows.

    ``columns``: a Parquet file is read for those of them it has only (a release's conversations are
    most of its bytes); other formats are read whole.
    """
    path = check_file(path, what)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{what} file {path}: cannot read {suffix or 'files without a suffix'}; "
                         f"give one of {', '.join(TABLE_SUFFIXES)}")
    if suffix in (".parquet", ".pq"):
        _sniff(path, what, False)
        try:
            if columns is not None:
                import pyarrow.parquet as pq

                names = pq.read_schema(path).names
                columns = [c for c in names if c in set(columns)] or None
            frame = pd.read_parquet(path, columns=columns)
            if columns is not None:
                frame.attrs["columns"] = names  # every column of the file, for a schema error
        except (OSError, ValueError) as exc:  # a truncated or damaged file: Arrow's own message, once
            first = str(exc).splitlines()[0]
            raise ValueError(f"{what} file {path} cannot be read as Parquet: {first}") from None
    elif suffix == ".csv":
        text = read_text(path, what)
        try:
            frame = pd.read_csv(io.StringIO(text))
        except pd.errors.EmptyDataError:
            raise ValueError(f"{what} file {path} has no rows (nor a header)") from None
        except pd.errors.ParserError as exc:
            raise ValueError(f"{what} file {path} is not a well-formed CSV: {str(exc).strip()}") from None
    else:
        text = read_text(path, what)
        try:
            obj = json.loads(text) if suffix == ".json" else None
        except json.JSONDecodeError as exc:
            if "Extra data" not in exc.msg:  # a JSON-lines file under .json reads as one value and more
                raise ValueError(f"{path} is not JSON: {exc.msg} (line {exc.lineno})") from None
            obj = None
        if obj is None:
            frame = pd.DataFrame.from_records(_json_lines(path, text))
        elif isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
            frame = pd.DataFrame.from_records(obj)
        elif isinstance(obj, dict) and all(isinstance(c, dict | list) for c in obj.values()):
            frame = pd.DataFrame(obj)
        else:
            raise ValueError(f"{path} holds a JSON {type(obj).__name__} that is not a table: expected a list "
                             "of rows (objects), an object of columns, or JSON lines")
    if frame.empty:
        raise ValueError(f"{what} file {path} has no rows")
    return frame


def parse_nested(value, where: str):
    """A nested field as Python objects: itself, or parsed from the JSON (or Python) text a CSV holds."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(value)  # a CSV written by pandas holds a dict's repr
        except (ValueError, SyntaxError):
            raise ValueError(f"{where} is text that is neither JSON nor a Python literal: "
                             f"{value[:60]!r}") from None


def id_series(values: pd.Series) -> pd.Series:
    """Ids as pandas strings, missing and blank ones as <NA> (vectorised: millions of battles).

    Never a fixed-width ``<U`` array, which NumPy sizes from its first element under pandas'
    string dtype; whole-number floats (the integer ids of a column with a gap) lose their ``.0``.
    """
    if values.dtype.kind == "f":
        finite = values.dropna()
        if (finite == np.round(finite)).all():
            values = values.astype("Int64")
    text = values.astype("string")
    return text.mask(text.str.strip() == "")


def id_strings(values: pd.Series) -> np.ndarray:
    """:func:`id_series` as an object array of Python strings, None where missing."""
    return id_series(values).to_numpy(dtype=object, na_value=None)


def as_levels(values: pd.Series) -> pd.Series:
    """Categorical answers as strings, missing ones as ``"(missing)"``."""
    return values.map(lambda v: MISSING if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))


def one_hot(frame: pd.DataFrame, columns: Sequence[str], *, reference_levels: Mapping[str, str] | None = None,
            min_count: int = 1, argument: str = "contexts") -> tuple[np.ndarray, list[str]]:
    """x = [1, one-hot of each column with its reference level dropped] and its column names.

    A column's levels are its distinct values (missing → ``"(missing)"``); levels
    seen in fewer than ``min_count`` rows are pooled into ``"(other)"``. The
    reference level of a column is ``reference_levels[column]`` or else its most
    frequent level (ties: alphabetically first). Column names are ``"column=level"``.
    """
    min_count = check_int(min_count, "min_count", 1)
    reference_levels = dict(reference_levels or {})
    unknown = sorted(set(reference_levels) - set(columns))
    if unknown:
        raise ValueError(f"reference_levels names {unknown}, which are not among the {argument} "
                         f"{list(columns)}")
    blocks, names = [np.ones((len(frame), 1))], [INTERCEPT]
    for column in columns:
        values = as_levels(frame[column])
        counts = values.value_counts()
        rare = set(counts.index[counts < min_count])
        values = values.map(lambda v, rare=rare: OTHER if v in rare else v)
        counts = values.value_counts()
        levels = sorted(counts.index, key=lambda v: (-counts[v], v))
        reference = reference_levels.get(column, levels[0])
        if reference not in counts.index:
            raise ValueError(f"reference_levels[{column!r}] = {reference!r} is not an answer in the data; "
                             f"the answers are {sorted(counts.index)}")
        kept = sorted(v for v in levels if v != reference)
        codes = pd.Index(kept).get_indexer(values)
        block = np.zeros((len(frame), len(kept)))
        rows = np.flatnonzero(codes >= 0)
        block[rows, codes[rows]] = 1.0
        blocks.append(block)
        names += [f"{column}={v}" for v in kept]
    return np.hstack(blocks), names


def encode_actions(name_0: pd.Series, name_1: pd.Series, reference: str | None, argument: str
                   ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The action table (reference first, then by name) and the indices (a_t0, a_t1) of each comparison.

    The reference is ``reference`` or else the action in most comparisons
    (ties: alphabetically first).
    """
    # one factorisation of the 2N names (hashing, O(N)); the A names are then ordered by a permutation
    codes, uniques = pd.factorize(pd.concat([name_0, name_1], ignore_index=True))
    uniques = [str(v) for v in uniques]
    found = np.bincount(codes, minlength=len(uniques))
    counts = dict(zip(uniques, found.tolist(), strict=True))
    if reference is None:
        reference = sorted(uniques, key=lambda v: (-counts[v], v))[0]
    elif reference not in counts:
        raise ValueError(f"{argument} = {reference!r} is not an action in the data; the actions are "
                         f"{sorted(uniques)}")
    names = [reference, *sorted(v for v in uniques if v != reference)]
    actions = pd.DataFrame({"name": names, "n_comparisons": [counts[v] for v in names],
                            "reference": [True] + [False] * (len(names) - 1)})
    actions.index.name = "action"
    position = pd.Index(names).get_indexer(uniques)[codes]  # A lookups, then a gather
    n = len(name_0)
    return actions, position[:n], position[n:]


def reference_one_hot(n_actions: int) -> np.ndarray:
    """φ(a) of each action, A × (A − 1): its one-hot row without the reference's column (action 0's is 0)."""
    out = np.zeros((n_actions, n_actions - 1))
    out[np.arange(1, n_actions), np.arange(n_actions - 1)] = 1.0
    return out


def indexed_data(x: np.ndarray, y: np.ndarray, a0: np.ndarray, a1: np.ndarray, actions: pd.DataFrame,
                 extra: np.ndarray | None, context_names, feature_names) -> PreferenceData:
    """A reader's comparisons as indices into the actions' one-hot table (reference dropped) with names:
    Δφ_t = e(a_t1) − e(a_t0) (and the per-comparison columns ``extra``), never formed N × d_φ."""
    return PreferenceData(x, None, y, np.column_stack([a0, a1]),
                          item_features=reference_one_hot(len(actions)),
                          comparison_features=extra, item_names=tuple(actions["name"]),
                          context_names=tuple(context_names), feature_names=tuple(feature_names))
