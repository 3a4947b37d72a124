"""The file format of :mod:`bayes_loco.io`: its names, the registry of type tags, and reading a file back.

:func:`bayes_loco.io.load` calls :func:`read`, which checks a file from
someone else before and while it decodes it (see the docstring of
:mod:`bayes_loco.io`, "Loading a file from someone else"): the HDF5 structure
(:mod:`bayes_loco._h5safety`), then the header and every group's type tag with
h5py, and only then the data through xarray. Each fault is a
:class:`~bayes_loco._h5safety.Refusal` saying what is wrong; ``load`` puts the
file's name in front.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import json
from pathlib import Path

import h5py
import numpy as np
import xarray as xr

from ._domains import is_integer
from ._h5safety import Refusal, budget, check_bytes, safe_dtype, scan
from ._iotypes import (
    ATTRS_KEY,
    DTYPE_KEY,
    ENGINE,
    FIELDS_KEY,
    FORMAT_KEY,
    FORMAT_VERSION,
    KIND_KEY,
    LENGTH_KEY,
    POSTERIOR,
    POSTERIOR_GROUP,
    REF_KEY,
    SCALAR_KEY,
    SEQUENCE_KEY,
    TYPE_KEY,
    TYPES,
    VERSION_KEY,
    format_1_tag,
    tag_of,
)
from ._version import __version__

# ---------------------------------------------------------------------------------- reading


def read(path: Path):
    """The object in ``path``; :class:`Refusal` (or an error of h5py, xarray, …) if it cannot be."""
    if path.is_dir():
        raise Refusal("it is a directory, not a file")
    if not path.is_file():
        raise Refusal("it is not a regular file (a device, pipe or socket)")
    if path.stat().st_size == 0:
        raise Refusal("the file is empty, so it was not written by bayes_loco.save")
    if not h5py.is_hdf5(path):
        raise Refusal("it is not a netCDF-4 (HDF5) file, so it was not written by bayes_loco.save")
    scan(path)
    fmt, cls = check_types(path)
    # save writes no fill values or scale factors; decoding a forged one would turn int8 into float64.
    with xr.open_datatree(path, engine=ENGINE, mask_and_scale=False) as tree:
        tree.load()
    decoder = _Decoder(tree, fmt, budget(path))
    if tag_of(cls, "the file's root") == POSTERIOR:  # not registered(POSTERIOR): that imports PyMC
        return _decode_posterior(tree, cls, decoder)
    return decoder.object("/")


def check_types(path: Path) -> tuple[int, type]:
    """The format version and the class of the file's root; every group's type tag checked, no data read.

    Reads the attributes that name types (small strings, bounded by the scan)
    with h5py, so that a file naming a class outside the registry is refused
    before xarray opens it.
    """
    with h5py.File(path, "r") as root:
        attrs = {key: _attribute(root.attrs[key]) for key in (FORMAT_KEY, TYPE_KEY, VERSION_KEY)
                 if key in root.attrs}
        fmt, type_name = attrs.get(FORMAT_KEY), attrs.get(TYPE_KEY)
        if fmt is None or not isinstance(type_name, str):
            raise Refusal(f"it was not written by bayes_loco.save: its root has no {FORMAT_KEY!r} and "
                          f"{TYPE_KEY!r} attributes")
        written = attrs.get(VERSION_KEY, "unknown")
        if isinstance(fmt, bool) or not (isinstance(fmt, int) and fmt in (1, FORMAT_VERSION)):
            raise Refusal(f"it has bayes_loco file format version {fmt}, but this bayes_loco ({__version__}) "
                          f"reads format version {FORMAT_VERSION} (and 1) only. The file was written by "
                          f"bayes_loco {written}: load it with that version "
                          f"(pip install bayes_loco=={written}).")
        groups = []

        def named(name: str, obj) -> None:
            if isinstance(obj, h5py.Group) and TYPE_KEY in obj.attrs:
                groups.append((f"/{name}", _attribute(obj.attrs[TYPE_KEY])))

        root.visititems(named)
    for where, name in groups:
        class_of(name, fmt, f"the group {where!r}")
    return fmt, class_of(type_name, fmt, "the file's root")


def _attribute(value):
    """An attribute read by h5py as xarray gives it: a one-element array as its element, text as str."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(())[()]
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        value = value.item()
    return value.decode() if isinstance(value, bytes) else value


def class_of(name, fmt: int, where: str, base: type | None = None) -> type:
    """The registered class a file names (by tag, or in format 1 by ``"module:QualName"``).

    ``base`` None: a result (a dataclass); else a subclass of ``base`` (an enum).
    """
    tag = name if fmt >= 2 else format_1_tag(name) if isinstance(name, str) else None
    if not isinstance(tag, str) or tag not in TYPES:
        raise Refusal(f"{where} names the type {name!r}, which is not a class of bayes_loco that a file "
                      f"may hold (format {fmt} names them by "
                      f"{'type tag' if fmt >= 2 else 'module:QualName'}: {', '.join(TYPES)})")
    cls = registered(tag)
    if base is not None and not issubclass(cls, base):
        raise Refusal(f"{where} names the type {name!r}, which is not an enum")
    if base is None and not dataclasses.is_dataclass(cls):
        raise Refusal(f"{where} names the type {name!r}, which is not a result")
    return cls


@functools.cache
def registered(tag: str) -> type:
    """The class of the registry's ``tag``, imported on first use."""
    module, _, qualname = TYPES[tag].partition(":")
    return getattr(importlib.import_module(module), qualname)


# ---------------------------------------------------------------------------------- the results


class _Decoder:
    """Rebuilds the results of a loaded file, each group once (references resolve to the same object).

    Every fault of the file is a :class:`Refusal` that says where it is; what it
    makes the decoder allocate (arrays of JSON, dtype conversions) is counted
    against ``limit`` bytes.
    """

    def __init__(self, root: xr.DataTree, fmt: int, limit: int):
        self.root, self.fmt, self.limit = root, fmt, limit
        self.done, self.pending, self.spent = {}, set(), 0

    # -- classes and objects

    def node(self, node_path, where: str) -> xr.DataTree:
        if not isinstance(node_path, str) or not node_path.startswith("/"):
            raise Refusal(f"{where} refers to {node_path!r}, which is not the path of a group")
        try:
            node = self.root[node_path] if node_path != "/" else self.root
        except KeyError:
            raise Refusal(f"{where} refers to the group {node_path!r}, which the file lacks") from None
        if not isinstance(node, xr.DataTree):
            raise Refusal(f"{where} refers to {node_path!r}, which is a variable, not a group")
        return node

    def object(self, node_path: str, where: str = "the file's root"):
        if node_path in self.done:
            return self.done[node_path]
        if node_path in self.pending:
            raise Refusal(f"{where} refers back to the group {node_path!r}, which contains it (a reference "
                          "cycle); a file of bayes_loco.save has none")
        node = self.node(node_path, where)
        self.pending.add(node_path)
        kind = node.attrs.get(KIND_KEY)
        here = f"the group {node_path!r}"
        if kind == "ref":
            value = self.object(node.attrs.get(REF_KEY), here)
        elif kind == "dataclass":
            cls = class_of(node.attrs.get(TYPE_KEY), self.fmt, here)
            value = self.build(cls, self.fields(node, here), here)
        else:
            raise Refusal(f"{here} is not a stored result (kind {kind!r}); the file is damaged or not "
                          "written by bayes_loco.save")
        self.pending.discard(node_path)
        self.done[node_path] = value
        return value

    def build(self, cls: type, kwargs: dict, where: str):
        """``cls(**kwargs)``; refuses fields ``cls`` lacks or needs, and what its validation refuses."""
        params = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            raise Refusal(f"{where} holds the field(s) {', '.join(unknown)}, which {cls.__name__} does not "
                          f"have (its fields: {', '.join(params)})")
        missing = [name for name, f in params.items() if name not in kwargs
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise Refusal(f"{where} lacks the field(s) {', '.join(missing)} of {cls.__name__}")
        try:
            return cls(**kwargs)
        except (ValueError, TypeError) as err:
            raise Refusal(f"{where} holds an invalid {cls.__name__}: {err}") from err

    def fields(self, node: xr.DataTree, where: str) -> dict:
        text = node.attrs.get(FIELDS_KEY, "{}")
        try:
            stored = json.loads(text) if isinstance(text, str) else None
        except ValueError as err:
            raise Refusal(f"the attribute {FIELDS_KEY!r} of {where} is not JSON ({err})") from None
        if not isinstance(stored, dict):
            raise Refusal(f"the attribute {FIELDS_KEY!r} of {where} is not a JSON object")
        kwargs = {name: self.json(value, f"{where}, field {name!r}") for name, value in stored.items()}
        for name, variable in node.to_dataset(inherit=False).data_vars.items():
            at = f"the variable {name!r} of {where}"
            if name in kwargs:
                raise Refusal(f"{at} is also stored in {FIELDS_KEY!r}")
            value = np.asarray(variable.values)
            dtype = variable.attrs.get(DTYPE_KEY)
            if dtype is not None:
                dtype = safe_dtype(dtype, at)
                if value.dtype != dtype:
                    # Strings come back from netCDF as objects; anything else would be a forged
                    # encoding (time units on int8 labels make datetimes, which astype would zero).
                    if not (dtype.kind == "U" and value.dtype.kind in "OSU"):
                        raise Refusal(f"{at} holds {value.dtype} values but records the dtype {dtype}; "
                                      "bayes_loco.save writes them alike")
                    self.allocate(value.size, dtype.itemsize, at)
                    value = value.astype(dtype)
            if variable.attrs.get(SCALAR_KEY):
                if value.ndim:
                    raise Refusal(f"{at} is marked a scalar but has shape {value.shape}")
                value = value[()]
            kwargs[name] = value
        for name, child in node.children.items():
            at = f"the group {child.path!r}"
            if name in kwargs:
                raise Refusal(f"{at} is a field stored twice")
            kind = child.attrs.get(KIND_KEY)
            if kind == "sequence":
                kwargs[name] = self.sequence(child, at)
            elif kind == "datatree":
                kwargs[name] = self.tree(child, drop=(KIND_KEY,))
            else:
                kwargs[name] = self.object(child.path, where)
        return kwargs

    def sequence(self, node: xr.DataTree, where: str) -> list | tuple:
        length, kind = node.attrs.get(LENGTH_KEY), node.attrs.get(SEQUENCE_KEY)
        names = [str(i) for i in range(len(node.children))]
        if not is_integer(length) or length != len(names):
            raise Refusal(f"{where} records {length} items but holds {len(names)}")
        if sorted(node.children) != sorted(names) or kind not in ("list", "tuple"):
            raise Refusal(f"{where} is not a stored list or tuple of results (items {sorted(node.children)}, "
                          f"kind {kind!r})")
        items = [self.object(node[name].path, where) for name in names]
        return items if kind == "list" else tuple(items)

    def allocate(self, count: int, itemsize: int, where: str) -> None:
        check_bytes(count, itemsize, self.limit - self.spent, where)
        self.spent += count * itemsize

    # -- JSON

    def json(self, value, where: str):
        """A value of the JSON ``_to_json`` wrote, with its tags (tuple, dict, enum, NumPy) undone."""
        if isinstance(value, list):
            return [self.json(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        keys = set(value)
        if keys == {"$dict"} and isinstance(value["$dict"], dict):
            return {k: self.json(v, f"{where}[{k!r}]") for k, v in value["$dict"].items()}
        if keys == {"$tuple"} and isinstance(value["$tuple"], list):
            return tuple(self.json(v, f"{where}[{i}]") for i, v in enumerate(value["$tuple"]))
        if keys == {"$enum", "value"}:
            cls = class_of(value["$enum"], self.fmt, where, enum.Enum)
            try:
                return cls(self.json(value["value"], where))
            except ValueError:
                raise Refusal(f"{where} is {value['value']!r}, which is not a {cls.__name__} (one of "
                              f"{', '.join(repr(m.value) for m in cls)})") from None
        if keys == {"$numpy", "value"}:
            dtype = safe_dtype(value["$numpy"], where)
            number = value["value"]
            if dtype.kind not in "biuf" or isinstance(number, str | list | dict) or number is None:
                raise Refusal(f"{where} is a NumPy scalar {number!r} of dtype {dtype}; save writes none")
            return dtype.type(number)
        if keys == {"$ndarray", "shape", "data"}:
            return self.ndarray(value, where)
        raise Refusal(f"{where} holds a JSON object this bayes_loco cannot read (keys {sorted(keys)})")

    def ndarray(self, value: dict, where: str) -> np.ndarray:
        dtype, shape, data = safe_dtype(value["$ndarray"], where), value["shape"], value["data"]
        if (not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape)
                or not isinstance(data, list)):
            raise Refusal(f"{where} is an array with the shape {shape!r}; a shape is a list of sizes >= 0")
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if count != len(data):
            raise Refusal(f"{where} is an array of shape {tuple(shape)} ({count} values) stored with "
                          f"{len(data)} values")
        if any(isinstance(v, list | dict) or v is None for v in data):
            raise Refusal(f"{where} is an array whose values are not all numbers or strings")
        self.allocate(count, dtype.itemsize, where)
        return np.array(data, dtype=dtype).reshape(shape)

    # -- DataTrees

    def attrs(self, attrs, drop=()) -> dict:
        attrs = dict(attrs)
        note = (json.loads(attrs.pop(ATTRS_KEY)) if ATTRS_KEY in attrs
                else {"json": {}, "types": {}, "order": []})
        types = note["types"]
        out = {}
        for key, value in attrs.items():
            if key in drop:
                continue
            kind = types.get(key)
            if kind == "int":
                value = int(value)
            elif kind == "float":
                value = float(value)
            elif kind is not None and kind.startswith("ndarray:"):
                dtype = safe_dtype(kind.removeprefix("ndarray:"), f"attribute {key!r}")
                value = np.asarray(value, dtype=dtype)
            elif kind is not None:
                value = safe_dtype(kind, f"attribute {key!r}").type(value)
            out[key] = value
        out |= {key: self.json(value, f"attribute {key!r}") for key, value in note["json"].items()}
        order = {key: i for i, key in enumerate(note["order"])}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def tree(self, node: xr.DataTree, drop=(), skip=()) -> xr.DataTree:
        ds = node.to_dataset(inherit=False).copy(deep=False)
        for variable in ds.variables.values():
            variable.attrs = self.attrs(variable.attrs)
            variable.encoding = {}
        ds.attrs = self.attrs(ds.attrs, drop)
        children = {name: self.tree(child) for name, child in node.children.items() if name not in skip}
        return xr.DataTree(ds, children=children)


# ---------------------------------------------------------------------------------- the posterior


def _decode_posterior(tree: xr.DataTree, cls, decoder: _Decoder):
    if POSTERIOR_GROUP not in tree.children:
        raise Refusal(f"it claims to hold a Posterior but has no {POSTERIOR_GROUP!r} group; it is damaged")
    kwargs = decoder.fields(tree[POSTERIOR_GROUP], f"the group '/{POSTERIOR_GROUP}'")
    kwargs["tree"] = decoder.tree(tree, drop=(FORMAT_KEY, TYPE_KEY, VERSION_KEY), skip=(POSTERIOR_GROUP,))
    _check_posterior(kwargs)
    post = decoder.build(cls, kwargs, "the posterior")
    decoder.done["/"] = post
    return post


def _check_posterior(fields: dict) -> None:
    """Refuse a posterior whose draws, chains and sizes disagree with what the file records of them.

    A MAP or VI fit legitimately has one chain and few draws; what is checked is
    that the ``posterior`` group (and ``sample_stats``, and the predictive
    groups) has the chains and draws that the tree's attributes and the fit's
    settings record, and the sizes of its data and basis.
    """
    tree, settings, method = fields.get("tree"), fields.get("settings"), fields.get("method")
    if "posterior" not in tree.children:
        raise Refusal("its posterior has no 'posterior' group of draws")
    sizes = tree["posterior"].to_dataset(inherit=False).sizes
    if "chain" not in sizes or "draw" not in sizes:
        raise Refusal(f"its 'posterior' group has the dims {sorted(sizes)}, not chain and draw")
    chains, draws = sizes["chain"], sizes["draw"]
    shape = f"its 'posterior' group has {chains} chain(s) of {draws} draw(s)"
    group = settings.get(method) if isinstance(settings, dict) else None
    if not isinstance(group, dict):
        raise Refusal(f"its settings have no group {method!r} for its method {method!r}")
    records = {"the tree's attribute 'chains'": (tree.attrs.get("chains"), chains),
               "the tree's attribute 'draws'": (tree.attrs.get("draws"), draws),
               f"its settings' {method}.draws": (group.get("draws"), draws)}
    if method == "nuts":
        records["its settings' nuts.chains"] = (group.get("chains"), chains)
    else:
        records[f"a {method} fit, which has one chain,"] = (1, chains)
    for source, (value, actual) in records.items():
        if value != actual:
            raise Refusal(f"{shape}, but {source} records {value!r}; the file was cut or altered")
    for name in ("sample_stats", "posterior_predictive", "preference_probability"):
        if name in tree.children:
            other = tree[name].to_dataset(inherit=False).sizes
            if other.get("chain") != chains or (other.get("draw") != draws if name == "sample_stats"
                                                 else not 0 < other.get("draw", 0) <= draws):
                raise Refusal(f"{shape}, but its {name!r} group has {other.get('chain')} chain(s) of "
                              f"{other.get('draw')} draw(s); the file was cut or altered")
    data, basis, directions = fields.get("data"), fields.get("basis"), fields.get("directions")
    expected = {"context": getattr(data, "d_x", None), "feature": getattr(data, "d_phi", None),
                "rtv_coord": getattr(basis, "dim", None)}
    for dim, size in expected.items():
        if sizes.get(dim) != size:
            raise Refusal(f"its 'posterior' group has {sizes.get(dim)} {dim!r} entries, but its data and "
                          f"basis have {size}; the file was cut or altered")
    for name in ("observed_data", "constant_data"):
        if name in tree.children:
            n = tree[name].to_dataset(inherit=False).sizes.get("comparison")
            if n != getattr(data, "n", None):
                raise Refusal(f"its {name!r} group has {n} comparisons, but its data have "
                              f"{getattr(data, 'n', None)}; the file was cut or altered")
    k_eff = getattr(directions, "shape", (None, None))[-1]
    for key, value in (("k", expected["rtv_coord"]), ("k_eff", k_eff)):
        if key in tree.attrs and tree.attrs[key] != value:
            raise Refusal(f"the tree's attribute {key!r} records {tree.attrs[key]!r}, but its basis and "
                          f"directions give {value}; the file was cut or altered")
