"""Files that are slightly off, read as a new user would: never silently corrupted, one error naming the file.

Each case starts from a committed fixture (tests/fixtures/arena, tests/fixtures/prism) and
changes one thing, as a downloaded or hand-edited file does.
"""

from __future__ import annotations

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_loco as bl
from bayes_loco.datasets import read_arena, read_prism

FIXTURES = Path(__file__).parent / "fixtures"
ARENA = FIXTURES / "arena" / "conversations.jsonl"
PRISM = FIXTURES / "prism"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_battle_without_a_judge_keeps_every_user_id_whole(tmp_path):
    records = _records(ARENA)
    records[3]["judge"] = None
    dataset = read_arena(_write(tmp_path / "battles.jsonl", records))
    judges = [r["judge"] for r in records]
    expected = [j if j is not None else "battle3" for j in judges]
    assert list(dataset.groups) == expected
    assert len(dataset.users) == len(set(expected))
    assert any("1 battles without a judge" in note for note in dataset.notes)
    population = dataset.population()  # every user keeps the intercept: none is read as x = 0
    assert population.n == len(set(expected)) and (population.contexts[:, 0] == 1).all()
    folds = bl.fold_indices(dataset.data.n, 3, dataset.groups, seed=0)
    assert len({(g, f) for g, f in zip(dataset.groups, folds, strict=True)}) == len(set(expected))


def test_a_judge_column_of_numbers_and_gaps_keeps_its_ids(tmp_path):
    frame = pd.DataFrame(_records(ARENA))
    frame["judge"] = [1234567, None] + [7654321] * (len(frame) - 2)
    dataset = read_arena(frame)
    assert (dataset.groups[0], dataset.groups[1], dataset.groups[2]) == ("1234567", "battle1", "7654321")


def _prism_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "prism"
    shutil.copytree(PRISM, folder)
    return folder


@pytest.mark.parametrize("field", ["model_name", "user_id"])
def test_a_prism_response_without_a_model_or_user_is_refused(tmp_path, field):
    folder = _prism_copy(tmp_path)
    records = _records(folder / "utterances.jsonl")
    records[1][field] = None
    _write(folder / "utterances.jsonl", records)
    with pytest.raises(ValueError, match=rf"utterances.jsonl: {field} of rated response 1 is missing"):
        read_prism(folder)


def test_a_survey_row_without_a_user_is_refused(tmp_path):
    folder = _prism_copy(tmp_path)
    records = _records(folder / "survey.jsonl")
    records[0]["user_id"] = None
    _write(folder / "survey.jsonl", records)
    with pytest.raises(ValueError, match=r"survey.jsonl: user_id of survey row 0 is missing"):
        read_prism(folder)


def test_files_read_apart_align_their_models_by_name(tmp_path):
    records = _records(ARENA)
    first = read_arena(_write(tmp_path / "a.jsonl", records))
    models = list(first.actions["name"])
    # The same battles, read with another reference model: another item table.
    second = read_arena(_write(tmp_path / "b.jsonl", records), reference_model=models[-1])
    assert first.data.item_names != second.data.item_names
    fit = bl.fit_bradley_terry(first.data)
    np.testing.assert_allclose(fit.predict_proba(second.data), fit.predict_proba(first.data), atol=1e-12)
    mle = bl.fit_mle(first.data)
    np.testing.assert_allclose(mle.predict_proba(second.data), mle.predict_proba(first.data), atol=1e-12)
    interval = fit.predict_interval(second.data, 0.9)
    np.testing.assert_allclose(interval.lower, fit.predict_interval(first.data, 0.9).lower, atol=1e-12)


def test_a_model_the_fit_never_saw_is_refused_by_name(tmp_path):
    records = _records(ARENA)
    fit = bl.fit_bradley_terry(read_arena(_write(tmp_path / "a.jsonl", records)).data)
    records[0]["model_a"] = "brand-new-model"
    other = read_arena(_write(tmp_path / "b.jsonl", records))
    with pytest.raises(ValueError, match=r"items \['brand-new-model'\] that the fit never saw"):
        fit.predict_proba(other.data)


def test_a_model_against_itself_is_refused(tmp_path):
    records = _records(ARENA)
    records[2]["model_b"] = records[2]["model_a"]
    with pytest.raises(ValueError, match=r"b.jsonl: row 2 is a battle of .* against itself \(1 such rows\)"):
        read_arena(_write(tmp_path / "b.jsonl", records))


def _latin1_csv(path: Path) -> Path:
    frame = pd.DataFrame(_records(ARENA))[["model_a", "model_b", "winner", "judge"]]
    frame.loc[0, "judge"] = "José"
    frame.to_csv(path, index=False, encoding="latin-1")
    return path


def _gzip_named_jsonl(path: Path) -> Path:
    path.write_bytes(gzip.compress(ARENA.read_bytes()))
    return path


def _csv_named_parquet(path: Path) -> Path:
    pd.DataFrame(_records(ARENA))[["model_a", "model_b", "winner"]].to_csv(path, index=False)
    return path


def _parquet_named_csv(path: Path) -> Path:
    shutil.copy(FIXTURES / "arena" / "hp100k.parquet", path)
    return path


def _zip_named_csv(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("battles.csv", "model_a,model_b,winner\na,b,model_a\n")
    return path


def _truncated_parquet(path: Path) -> Path:
    path.write_bytes((FIXTURES / "arena" / "hp100k.parquet").read_bytes()[:300])
    return path


def _blank_csv(path: Path) -> Path:
    path.write_text("\n\n")
    return path


def _ragged_csv(path: Path) -> Path:
    path.write_text('model_a,model_b,winner\na,b,model_a\n"a,b\n')
    return path


@pytest.mark.parametrize("name, make, match", [
    ("latin.csv", _latin1_csv, r"is not UTF-8 text: byte 0xe9 at offset \d+ \(latin-1"),
    ("battles.jsonl", _gzip_named_jsonl, r"is gzip-compressed"),
    ("battles.parquet", _csv_named_parquet, r"is named .parquet but is not a Parquet file"),
    ("battles.csv", _parquet_named_csv, r"is a Parquet file: name it .parquet"),
    ("battles.csv", _zip_named_csv, r"is a zip archive"),
    ("cut.parquet", _truncated_parquet, r"cannot be read as Parquet"),
    ("blank.csv", _blank_csv, r"has no rows"),
    ("ragged.csv", _ragged_csv, r"is not a well-formed CSV"),
])
def test_an_unreadable_file_gets_one_error_naming_it(tmp_path, name, make, match):
    path = make(tmp_path / name)
    with pytest.raises(ValueError, match=match) as info:
        read_arena(path)
    assert str(path) in str(info.value) and info.value.__cause__ is None


def test_a_latin1_prism_file_is_named(tmp_path):
    folder = _prism_copy(tmp_path)
    raw = (folder / "survey.jsonl").read_text().replace("user0", "usér0")
    (folder / "survey.jsonl").write_bytes(raw.encode("latin-1"))
    with pytest.raises(ValueError, match=r"survey.jsonl is not UTF-8 text"):
        read_prism(folder)


def test_a_utf8_file_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "bom.csv"
    frame = pd.DataFrame(_records(ARENA))[["model_a", "model_b", "winner"]]
    path.write_bytes(b"\xef\xbb\xbf" + frame.to_csv(index=False).encode())
    assert read_arena(path).data.n == len(frame)
