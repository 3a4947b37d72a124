"""A posterior file no larger than it needs to be: compression, and the predictive groups left out.

Oracles: the plain (uncompressed) file of the same posterior, bit-identical
round trips (``test_io.assert_same``), HDF5's own record of each dataset's
filters, and :func:`bayes_loco.load`'s memory bound (``_h5safety``).
"""

from __future__ import annotations

import dataclasses
import warnings

import h5py
import numpy as np
import pytest
from test_io import assert_same

import bayes_loco as bl
from bayes_loco import _h5safety, simulate
from bayes_loco.io import PREDICTIVE_GROUPS


def setting(name: str):
    """The current value of a tuning setting (bayes_loco.config)."""
    return bl.get_config()[name]



@pytest.fixture(scope="module")
def post():
    """A MAP posterior (200 Laplace draws) with its predictive groups, on N = 800 comparisons."""
    from bayes_loco import bayes

    data = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0).sample(800, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        return bayes.fit_posterior(data, 2, method="map", map={"draws": 200}, progressbar=False)


def filters(path) -> dict[str, list[int]]:
    """The HDF5 filters of each dataset of the file, by path."""
    found = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            plist = obj.id.get_create_plist()
            found[name] = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    return found


def test_compressed_file_is_smaller_and_round_trips_bit_for_bit(post, tmp_path):
    assert set(PREDICTIVE_GROUPS) <= set(post.tree.children)
    plain = bl.save(post, tmp_path / "plain.nc", compress=False)
    packed = post.save(tmp_path / "packed.nc")
    assert packed == tmp_path / "packed.nc"
    assert packed.stat().st_size < 0.8 * plain.stat().st_size
    assert_same(post, bl.load(packed))
    assert_same(post, bl.load(plain))
    # the large arrays are deflated after a shuffle, the plain file's are not
    chosen = filters(packed)
    large = "posterior_predictive/y"
    assert chosen[large] == [h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE]
    assert not any(filters(plain).values())
    with h5py.File(packed, "r") as file:
        least = setting("compress_min_bytes")
        small = [name for name, codes in chosen.items()
                 if file[name].ndim and file[name].size * file[name].dtype.itemsize < least]
    assert small and all(not chosen[name] for name in small)


def test_leaving_the_predictive_groups_out(post, tmp_path):
    full = post.save(tmp_path / "full.nc")
    lean = post.save(tmp_path / "lean.nc", predictive=False)
    assert lean.stat().st_size < 0.7 * full.stat().st_size
    back = bl.load(lean)
    assert not set(PREDICTIVE_GROUPS) & set(back.tree.children)
    assert "left out by bayes_loco.save" in back.tree.attrs["predictive_groups"]
    # everything else is the posterior that was saved
    tree = post.tree.copy(deep=False)
    for name in PREDICTIVE_GROUPS:
        del tree[name]
    tree.attrs = {**tree.attrs, "predictive_groups": back.tree.attrs["predictive_groups"]}
    assert_same(dataclasses.replace(post, tree=tree), back)
    assert "predictive_groups" not in post.tree.attrs and set(PREDICTIVE_GROUPS) <= set(post.tree.children)
    np.testing.assert_array_equal(back.summary().to_frame(), post.summary().to_frame())


def declared_bytes(path) -> int:
    """The bytes load's scan adds up for the file (its declared data, attributes and strings)."""
    walker = _h5safety._Walker(2**62)
    with h5py.File(path, "r") as file:
        walker.attributes(file, "/")
        walker.group(file, "/")
    return walker.total


def test_a_file_load_would_refuse_compressed_is_written_plain(post, tmp_path, monkeypatch):
    plain = bl.save(post, tmp_path / "plain.nc", compress=False)
    packed = bl.save(post, tmp_path / "packed.nc")
    data = declared_bytes(plain)
    assert data == declared_bytes(packed)
    # a bound that the plain file meets and the compressed one would not
    expansion = 0.5 * (data / packed.stat().st_size + data / plain.stat().st_size)
    assert data / plain.stat().st_size < expansion < data / packed.stat().st_size
    bl.set_config(slack=0)
    bl.set_config(expansion=expansion)
    with pytest.raises(ValueError, match="would take"):
        bl.load(packed)
    written = post.save(tmp_path / "fallback.nc")
    assert written.stat().st_size == plain.stat().st_size and not any(filters(written).values())
    assert_same(post, bl.load(written))


def test_save_options_are_checked(post, tmp_path):
    with pytest.raises(ValueError, match="predictive=False leaves a posterior's predictive groups out"):
        bl.save(post.data, tmp_path / "data.nc", predictive=False)
    with pytest.raises(TypeError, match="compress must be True or False"):
        bl.save(post, tmp_path / "x.nc", compress="yes")
    assert not (tmp_path / "x.nc").exists()
