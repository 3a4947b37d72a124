"""Chatbot Arena battles (lmsys / lmarena releases) as contextual Bradley–Terry comparisons."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ._common import (
    Dataset,
    encode_actions,
    id_series,
    indexed_data,
    one_hot,
    parse_nested,
    read_table,
    schema_error,
)

# winner strings of the lmsys conversation releases and arena-human-preference-100k/140k
WINNERS = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5, "both_bad": 0.5}
WINNER_SCHEMA = ("model_a", "model_b", "winner")
ONE_HOT_SCHEMA = ("model_a", "model_b", "winner_model_a", "winner_model_b", "winner_tie")
# arena's style control (FastChat elo_analysis.STYLE_CONTROL_ELEMENTS_V1): feature → conv_metadata keys
STYLE_ELEMENTS = {"style_length": "sum_assistant_{}_tokens", "style_headers": "header_count_{}",
                  "style_lists": "list_count_{}", "style_bold": "bold_count_{}"}
USER_COLUMNS = ("judge", "evaluation_session_id")


def _labels(frame: pd.DataFrame, schema: str, path) -> np.ndarray:
    if schema == "winner":
        winner = frame["winner"]
        codes, uniques = pd.factorize(winner, use_na_sentinel=False)  # a few distinct strings
        known = np.array([v in WINNERS for v in uniques], dtype=bool)
        if not known.all():
            i = int(np.flatnonzero(~known[codes])[0])
            raise ValueError(f"{path}: winner in row {i} is {winner.iloc[i]!r}; expected one of "
                             f"{', '.join(map(repr, WINNERS))}")
        return np.array([WINNERS[v] for v in uniques], dtype=float)[codes]
    flags = frame[list(ONE_HOT_SCHEMA[2:])]
    numeric = flags.apply(pd.to_numeric, errors="coerce")
    bad = ~(numeric.isin([0, 1]).all(axis=1) & (numeric.sum(axis=1) == 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{path}: row {i} has winner_model_a, winner_model_b, winner_tie = "
                         f"{tuple(flags.iloc[i])}; exactly one of them must be 1")
    return numeric["winner_model_a"].to_numpy(float) + 0.5 * numeric["winner_tie"].to_numpy(float)


def _style_counts(frame: pd.DataFrame, path) -> dict[str, np.ndarray]:
    """Per element, the counts of model_a's and model_b's answers (a dict of counts such as h1..h6 summed)."""
    keys = [key.format(side) for key in STYLE_ELEMENTS.values() for side in "ab"]
    if "conv_metadata" in frame:
        rows = [parse_nested(v, f"{path}: conv_metadata of row {i}")
                for i, v in enumerate(frame["conv_metadata"])]
        bad = [i for i, r in enumerate(rows) if not isinstance(r, dict) or any(k not in r for k in keys)]
        if bad:
            have = sorted(rows[bad[0]]) if isinstance(rows[bad[0]], dict) else type(rows[bad[0]]).__name__
            raise ValueError(f"{path}: conv_metadata of row {bad[0]} lacks the style counts {keys} "
                             f"(it holds {have})")
        table = pd.DataFrame({k: [r[k] for r in rows] for k in keys})
    elif all(k in frame for k in keys):
        table = frame[keys]
    else:
        raise schema_error(path, "an Arena file with style counts", ["conv_metadata"],
                           "style=True reads token, header, list and bold counts from conv_metadata, as in "
                           "arena-human-preference-100k/140k; this release has none: use style=False")
    counts = {}
    for key in keys:
        values = table[key]
        if values.dtype == object:  # counts per heading level (h1..h6) come as a dict: summed
            values = values.map(lambda v: sum(v.values()) if isinstance(v, dict) else v)
        numeric = pd.to_numeric(values, errors="coerce").to_numpy(float)
        if not (np.isfinite(numeric) & (numeric >= 0)).all():
            i = int(np.flatnonzero(~(np.isfinite(numeric) & (numeric >= 0)))[0])
            raise ValueError(f"{path}: style count {key} of row {i} is {table[key].iloc[i]!r}, not a count")
        counts[key] = numeric
    return counts


def style_differences(counts: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Arena's style-control columns: per element, standardised (a − b)/(a + b + 1).

    a and b are model_a's and model_b's counts; the ratio is centred by its mean and
    divided by its standard deviation over the file's battles (ddof 0; a column with
    no spread is only centred), as FastChat's ``construct_style_matrices``.
    """
    columns = []
    for key in STYLE_ELEMENTS.values():
        a, b = counts[key.format("a")], counts[key.format("b")]
        ratio = (a - b) / (a + b + 1.0)
        sd = ratio.std()
        columns.append((ratio - ratio.mean()) / (sd if sd > 0 else 1.0))
    return np.column_stack(columns), list(STYLE_ELEMENTS)


def read_arena(path, *, contexts: Sequence[str] = (), style: bool = False, reference_model: str | None = None,
               min_count: int = 1) -> Dataset:
    """Read Chatbot Arena battles into a :class:`Dataset`.

    Two public schemas are recognised by their columns:

    * ``winner``: lmsys/chatbot_arena_conversations and the
      arena-human-preference-100k/140k releases (``model_a``, ``model_b``, ``winner``;
      ``judge``, ``language``, ``conv_metadata``, … when present);
    * one-hot winners: lmarena-ai/arena-human-preference-55k (``model_a``,
      ``model_b``, ``winner_model_a``, ``winner_model_b``, ``winner_tie``).

    Mapping (one comparison per row, in file order):

    ===========================  ==============================================================
    file                         PreferenceData
    ===========================  ==============================================================
    ``model_a``                  a_t1 (``action_1``): y_t = 1 is a win of model_a
    ``model_b``                  a_t0 (``action_0``)
    winner ``model_a``           y_t = 1 (55k: ``winner_model_a = 1``)
    winner ``model_b``           y_t = 0 (55k: ``winner_model_b = 1``)
    ``tie``, ``tie (bothbad)``,  y_t = ½ (55k: ``winner_tie = 1``)
    ``both_bad``
    models                       φ(a) = one-hot of the model without the reference model
                                 (action 0), so d_φ = A − 1 and Δφ_t = e(model_a) − e(model_b)
    ``style=True``               4 more Δφ columns from ``conv_metadata``: per element e
                                 (tokens ``sum_assistant_*_tokens``, ``header_count_*``,
                                 ``list_count_*``, ``bold_count_*``; dict counts summed),
                                 r_t = (e_a − e_b)/(e_a + e_b + 1), standardised over the file:
                                 (r_t − mean r)/sd r (arena's style control)
    ``contexts=()``              x_t = 1 (d_x = 1): plain Bradley–Terry
    ``contexts=("language",)``   x_t = [1, one-hot of the language without its reference level]
                                 (any categorical column, e.g. ``"judge"``; several allowed)
    users                        ``judge``, else ``evaluation_session_id`` (140k), else each
                                 battle is its own user (55k)
    ===========================  ==============================================================

    Parameters
    ----------
    path : str, Path or pandas.DataFrame
        A .parquet, .json, .jsonl or .csv file of either schema, or such a table
        already loaded (e.g. filtered to anonymous battles).
    contexts : sequence of str
        Categorical columns whose one-hots (after an intercept) make x.
    style : bool
        Append the style-control difference columns.
    reference_model : str, optional
        The model whose one-hot column is dropped (action 0); default the model in
        most battles.
    min_count : int
        Context levels seen in fewer battles are pooled into ``"(other)"``.

    Raises
    ------
    ValueError
        A file of another schema (one error naming the missing columns), an empty
        file, an unknown winner, a missing model name or context column.

    Examples
    --------
    >>> truth = bl.datasets.write_arena("arena.parquet", 400, seed=0, n_models=5)   # a stand-in file
    >>> battles = bl.read_arena("arena.parquet")
    >>> battles.data
    PreferenceData(N=400, d_x=1, d_phi=4, mean(y)=0.477, ties=72, items=5)
    """
    frame, where, schema = _battles(path, contexts, style)
    names = {}
    for column in ("model_a", "model_b"):
        names[column] = id_series(frame[column])
        absent = names[column].isna().to_numpy()
        if absent.any():
            raise ValueError(f"{where}: {column} of row {int(np.flatnonzero(absent)[0])} is missing")
    same = (names["model_a"] == names["model_b"]).to_numpy(dtype=bool)
    if same.any():
        i = int(np.flatnonzero(same)[0])
        raise ValueError(f"{where}: row {i} is a battle of {names['model_a'].iloc[i]!r} against itself "
                         f"({int(same.sum())} such rows): a model cannot be compared with itself; drop them")
    y = _labels(frame, schema, where)
    name_1, name_0 = names["model_a"], names["model_b"]
    actions, a0, a1 = encode_actions(name_0, name_1, reference_model, "reference_model")
    feature_names = [f"model={v}" for v in actions["name"].iloc[1:]]
    extra = None
    if style:
        extra, style_names = style_differences(_style_counts(frame, where))
        feature_names += style_names
    x, context_names = one_hot(frame, list(contexts), min_count=min_count)
    users, notes = _users(frame, where)
    codes, uniques = pd.factorize(users)
    # one Python string per user, shared by its battles (not one per battle: 3·10⁶ strings are 170 MB)
    groups = np.asarray(uniques.astype(object), dtype=object)[codes]
    id_column = next((c for c in ("question_id", "id") if c in frame), None)
    comparisons = pd.DataFrame({"row": np.arange(len(frame)), "user_id": users.array,
                                "action_0": name_0.array, "action_1": name_1.array, "y": y})
    if id_column:
        comparisons.insert(1, id_column, frame[id_column].to_numpy())
    for column in contexts:
        comparisons[column] = frame[column].to_numpy()
    counts = np.bincount(codes, minlength=len(uniques))
    user_table = pd.DataFrame({"user_id": uniques, "n_comparisons": counts})
    data = indexed_data(x, y, a0, a1, actions, extra, context_names, feature_names)
    release = "conversations / 100k / 140k" if schema == "winner" else "55k"
    return Dataset(data, comparisons, user_table, actions, tuple(context_names), tuple(feature_names),
                   groups, f"Arena ({release} schema) {where}", notes)


def _battles(path, contexts: Sequence[str], style: bool) -> tuple[pd.DataFrame, str, str]:
    """The battles of ``path`` (a file, read for the columns it maps only, or a frame), where they came
    from, and their schema (``"winner"`` or ``"55k"``); one error naming what is missing."""
    if isinstance(path, pd.DataFrame):
        frame, where = path.reset_index(drop=True), "the frame"
        if frame.empty:
            raise ValueError("read_arena: the frame has no rows")
    if isinstance(contexts, str) or not all(isinstance(c, str) for c in contexts):
        raise TypeError(f"contexts must be a sequence of column names, got {contexts!r}")
    if not isinstance(style, bool):
        raise TypeError(f"style must be a bool, got {style!r}")
    if not isinstance(path, pd.DataFrame):
        wanted = {*WINNER_SCHEMA, *ONE_HOT_SCHEMA, *USER_COLUMNS, "question_id", "id", *contexts}
        if style:
            wanted |= {"conv_metadata", *(k.format(side) for k in STYLE_ELEMENTS.values() for side in "ab")}
        frame, where = read_table(path, "Arena", columns=wanted), str(path)
    if all(c in frame for c in WINNER_SCHEMA):
        schema = "winner"
    elif all(c in frame for c in ONE_HOT_SCHEMA):
        schema = "55k"
    else:
        missing = [c for c in WINNER_SCHEMA if c not in frame]
        found = sorted(map(str, frame.attrs.get("columns", frame.columns)))[:12]
        raise schema_error(where, "a Chatbot Arena file", missing,
                           f"found columns {found}; the conversation and 100k/140k releases have model_a, "
                           "model_b, winner; the 55k release model_a, model_b, winner_model_a, "
                           "winner_model_b, winner_tie")
    missing = [c for c in contexts if c not in frame]
    if missing:
        raise schema_error(where, "an Arena file with these contexts", missing,
                           f"contexts names columns that {where} lacks")
    return frame, where, schema


def _users(frame: pd.DataFrame, where: str) -> tuple[pd.Series, tuple[str, ...]]:
    """The user of each battle (``judge``, else ``evaluation_session_id``, else the battle itself), as
    strings, and the notes: a battle without a user id is its own user, said in a note."""
    user_column = next((c for c in USER_COLUMNS if c in frame), None)
    rows = pd.RangeIndex(len(frame))
    if user_column is None:
        return pd.Series("battle" + rows.astype(str), dtype="string"), (
            "no judge column: each battle is its own user",)
    ids = id_series(frame[user_column]).reset_index(drop=True)
    missing = ids.isna().to_numpy()
    if not missing.any():
        return ids, ()
    ids[missing] = "battle" + rows[missing].astype(str)
    return ids, (f"{int(missing.sum())} battles without a {user_column} (first: row "
                              f"{int(np.flatnonzero(missing)[0])}): each is its own user 'battle<row>'",)
