"""Save any result to a netCDF-4 file and load it back: :func:`save` and :func:`load`.

A statistician who waited for a posterior can close the notebook and come back
to it::

    bl.save(post, "posterior.nc")
    post = bl.load("posterior.nc")      # in another session: the same object, bit for bit

Every result type is supported: :class:`~bayes_loco.PreferenceData`,
:class:`~bayes_loco.Population`, the coordinates, every uncertainty set, a
:class:`~bayes_loco.Policy`, every fit (MLE, low rank, PRS, posterior) and a
:class:`~bayes_loco.RankSelection`. Plain :mod:`pickle` works too; a file of
this module is the durable form (it does not depend on the classes' memory
layout, refuses files of another format version, and a posterior file is an
ArviZ DataTree that ``xr.open_datatree`` and ArviZ read directly).

File layout
-----------
The file is netCDF-4 (HDF5), written and read by xarray through h5netcdf. Its
root carries three attributes:

``bayes_loco_format``
    :data:`FORMAT_VERSION`; a file of another format version is refused.
``bayes_loco_type``
    ``"module:QualName"`` of the saved object's class.
``bayes_loco_version``
    The version of bayes_loco that wrote the file.

A result (a frozen dataclass) is one group. Each field becomes

- an array: a variable named after the field, dims ``<field>_dim_0, …``, dtype
  kept (a NumPy scalar is a 0-d variable marked ``bayes_loco_scalar``);
- int, float, str, bool, None, an Enum, a tuple, list or dict of those: an entry
  of the group's JSON attribute ``fields`` (JSON keeps int, float, bool and None
  apart; NaN is allowed; tuples, dicts, Enums and NumPy scalars are tagged);
- another result: a subgroup named after the field, with its own
  ``bayes_loco_type``; the same object met twice is stored once, the second
  time as a reference (``bayes_loco_ref``) to the first group's path;
- a tuple or list of results (``RankSelection.fits``): a subgroup with
  subgroups ``0``, ``1``, …;
- an ``xarray.DataTree``: a subgroup holding the tree.

A :class:`~bayes_loco.bayes.Posterior` is stored as its ArviZ DataTree: the
groups of ``post.tree`` (``posterior``, ``sample_stats``, ``observed_data``, …)
sit at the root of the file, exactly as in memory, and the posterior's other
fields are the group ``bayes_loco``. The posterior is rebuilt from the file
alone.

Attributes of a stored DataTree keep their Python types: strings and numbers
are written as netCDF attributes (numbers with a note of their type, so a
Python ``int`` comes back an ``int`` and not a ``numpy.int64``); what netCDF
cannot hold (bool, None, lists, dicts) goes into the JSON attribute
``bayes_loco_attrs`` of the same group or variable.

Loading imports the class named by ``bayes_loco_type`` only from the
``bayes_loco`` package (a file never makes :func:`load` import other code) and
builds it with the class's own constructor, so its validation runs.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import os
from pathlib import Path

import numpy as np
import xarray as xr

FORMAT_VERSION = 1
"""The version of the file layout this module writes and reads."""

ENGINE = "h5netcdf"
POSTERIOR_GROUP = "bayes_loco"

_PACKAGE = "bayes_loco"
_FORMAT = "bayes_loco_format"
_TYPE = "bayes_loco_type"
_VERSION = "bayes_loco_version"
_KIND = "bayes_loco_kind"
_REF = "bayes_loco_ref"
_SEQUENCE = "bayes_loco_sequence"
_LENGTH = "bayes_loco_length"
_SCALAR = "bayes_loco_scalar"
_DTYPE = "bayes_loco_dtype"
_ATTRS = "bayes_loco_attrs"
_FIELDS = "fields"
_RESERVED_PREFIX = "bayes_loco_"
_POSTERIOR = ("bayes_loco.bayes.fit", "Posterior")
_INT64 = (-(2**63), 2**63)

SUPPORTED = ("PreferenceData, Population, coordinates (VecCoordinates, RTVBasis), uncertainty sets "
             "(EllipsoidSet, DrawsSet, QuantileSet), Policy, fits (MLEResult, LowRankResult, PRSResult, "
             "Posterior), RankSelection, or any other frozen dataclass of bayes_loco whose fields are "
             "arrays, numbers, strings, enums, DataTrees or such results")


# --------------------------------------------------------------------------------------------- API


def save(result, path) -> Path:
    """Write ``result`` to the netCDF-4 file ``path`` (the suffix ``.nc`` is customary, not required).

    Parameters
    ----------
    result : object
        A result of the package: PreferenceData, Population, VecCoordinates,
        RTVBasis, EllipsoidSet, DrawsSet, QuantileSet, Policy, MLEResult,
        LowRankResult, PRSResult, RankSelection or Posterior (see the module
        docstring for the layout).
    path : str or os.PathLike
        The file to write; an existing file is replaced, and only once the new
        one is complete (a failed save leaves it as it was).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``result`` is not a result of bayes_loco, or one of its fields holds a
        value this format cannot store (the message names the field).
    """
    from . import __version__

    path = Path(path)
    if _is_posterior(result):
        tree = _encode_posterior(result)
    elif _is_result(result):
        tree = _encode_object(result, "/", {}, {})
    else:
        raise TypeError(f"bayes_loco.save cannot store a {_describe(result)}: it saves the package's "
                        f"results: {SUPPORTED}")
    tree.attrs = {**tree.attrs, _FORMAT: FORMAT_VERSION, _TYPE: _type_name(type(result)),
                  _VERSION: __version__}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tree.to_netcdf(tmp, engine=ENGINE)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load(path):
    """Read a result written by :func:`save`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    object
        An object of the class that was saved, equal field by field (arrays bit
        for bit, dtypes included) to the one saved. A posterior is rebuilt from
        the file alone. The arrays are in memory; the file is closed.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        The file is not a netCDF-4 file written by :func:`save`, was written in
        another format version (the message names the bayes_loco version to
        read it with), or names a class outside bayes_loco.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"bayes_loco.load: no such file: {str(path)!r}")
    try:
        tree = xr.open_datatree(path, engine=ENGINE)
    except (OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r} is not a netCDF-4 file, so it was not written by bayes_loco.save "
                         f"({type(err).__name__}: {err})") from err
    with tree:
        type_name = _check_header(tree.attrs, path)
        tree.load()
    cls = _resolve(type_name, path)
    if (cls.__module__, cls.__qualname__) == _POSTERIOR:
        return _decode_posterior(tree, cls, path)
    return _Decoder(tree, path).object("/")


# ------------------------------------------------------------------------------------- the header


def _check_header(attrs, path: Path) -> str:
    from . import __version__

    fmt, type_name = attrs.get(_FORMAT), attrs.get(_TYPE)
    if fmt is None or not isinstance(type_name, str):
        raise ValueError(f"{str(path)!r} was not written by bayes_loco.save: its root has no "
                         f"{_FORMAT!r} and {_TYPE!r} attributes")
    written = attrs.get(_VERSION, "unknown")
    if isinstance(fmt, bool) or not (isinstance(fmt, int | np.integer) and int(fmt) == FORMAT_VERSION):
        raise ValueError(f"{str(path)!r} has bayes_loco file format version {fmt}, but this bayes_loco "
                         f"({__version__}) reads format version {FORMAT_VERSION} only. The file was "
                         f"written by bayes_loco {written}: load it with that version "
                         f"(pip install bayes_loco=={written}).")
    return type_name


def _type_name(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _in_package(cls) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return ((module == _PACKAGE or module.startswith(_PACKAGE + "."))
            and "<locals>" not in getattr(cls, "__qualname__", "<locals>"))


def _describe(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _is_result(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and _in_package(type(value))


def _is_posterior(value) -> bool:
    # By name: saving other results must not import PyMC.
    return (type(value).__module__, type(value).__qualname__) == _POSTERIOR


def _resolve(type_name: str, path: Path, base=None):
    """The class named ``"module:QualName"``, imported only from bayes_loco."""
    module_name, _, qualname = str(type_name).partition(":")
    if not (module_name == _PACKAGE or module_name.startswith(_PACKAGE + ".")) or not qualname:
        raise ValueError(f"{str(path)!r} names the type {type_name!r}, which is not a class of bayes_loco; "
                         "refusing to import it (a file must not make bayes_loco.load run other code)")
    try:
        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{str(path)!r} holds a {type_name!r}, which this bayes_loco does not have "
                         f"({err}); load it with the version that wrote it") from err
    if not isinstance(obj, type) or (base is not None and not issubclass(obj, base)):
        raise ValueError(f"{str(path)!r} names {type_name!r}, which is not a "
                         f"{'class' if base is None else base.__name__}")
    return obj


# ----------------------------------------------------------------------------------------- JSON


def _to_json(value, where: str):
    """``value`` as JSON-able data, tagging what JSON would lose (tuples, dicts, Enums, NumPy scalars)."""
    if value is None or isinstance(value, bool) or type(value) is str:
        return value
    if isinstance(value, enum.Enum):
        if not _in_package(type(value)):
            raise TypeError(f"{where} is the enum member {value!r} of {_describe(value)}; bayes_loco.save "
                            "stores only the package's own enums")
        return {"$enum": _type_name(type(value)), "value": _to_json(value.value, where)}
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"$numpy": value.dtype.str, "value": value.item()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufU":
        return {"$ndarray": value.dtype.str, "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, tuple):
        return {"$tuple": [_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{where} is a dict with the key {bad[0]!r}; bayes_loco.save stores dicts "
                            "with string keys only")
        return {"$dict": {k: _to_json(v, f"{where}[{k!r}]") for k, v in value.items()}}
    raise TypeError(f"{where} is of type {_describe(value)}, which bayes_loco.save cannot store (it stores "
                    "arrays, numbers, strings, bools, None, enums, tuples, lists and dicts of those, "
                    "DataTrees and the package's results)")


def _from_json(value, path: Path):
    if isinstance(value, list):
        return [_from_json(v, path) for v in value]
    if not isinstance(value, dict):
        return value
    if "$dict" in value:
        return {k: _from_json(v, path) for k, v in value["$dict"].items()}
    if "$tuple" in value:
        return tuple(_from_json(v, path) for v in value["$tuple"])
    if "$enum" in value:
        return _resolve(value["$enum"], path, enum.Enum)(_from_json(value["value"], path))
    if "$numpy" in value:
        return np.dtype(value["$numpy"]).type(value["value"])
    if "$ndarray" in value:
        return np.array(value["data"], dtype=np.dtype(value["$ndarray"])).reshape(value["shape"])
    raise ValueError(f"{str(path)!r} holds a JSON object this bayes_loco cannot read: {sorted(value)}")


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


# ------------------------------------------------------------------------------ DataTree attributes


def _encode_attrs(attrs, where: str) -> dict:
    """netCDF-safe attributes and, in ``bayes_loco_attrs``, what restores their Python types and order."""
    native, extra, types = {}, {}, {}
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} has the attribute key {key!r}; netCDF attribute names are strings")
        if key.startswith(_RESERVED_PREFIX) or key == _FIELDS:
            extra[key] = _to_json(value, f"{where}.attrs[{key!r}]")  # never confused with our own
        elif type(value) is str:
            native[key] = value
        elif (type(value) is int and _INT64[0] <= value < _INT64[1]) or type(value) is float:
            native[key], types[key] = value, type(value).__name__
        elif isinstance(value, np.generic) and value.dtype.kind in "iuf":
            native[key], types[key] = value, value.dtype.str
        elif (isinstance(value, np.ndarray) and value.ndim == 1 and value.size >= 2
              and value.dtype.kind in "iuf"):
            native[key], types[key] = value, "ndarray:" + value.dtype.str
        else:
            extra[key] = _to_json(value, f"{where}.attrs[{key!r}]")
    if extra or types:
        native[_ATTRS] = _dumps({"json": extra, "types": types, "order": list(attrs)})
    return native


def _decode_attrs(attrs, path: Path, drop=()) -> dict:
    attrs = dict(attrs)
    note = json.loads(attrs.pop(_ATTRS)) if _ATTRS in attrs else {"json": {}, "types": {}, "order": []}
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
            value = np.asarray(value, dtype=np.dtype(kind.removeprefix("ndarray:")))
        elif kind is not None:
            value = np.dtype(kind).type(value)
        out[key] = value
    out |= {key: _from_json(value, path) for key, value in note["json"].items()}
    order = {key: i for i, key in enumerate(note["order"])}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def _encode_tree(tree: xr.DataTree, where: str) -> xr.DataTree:
    """A copy of ``tree`` whose attributes (of every group and variable) netCDF can hold."""
    ds = tree.to_dataset(inherit=False).copy(deep=False)
    for name, variable in ds.variables.items():
        variable.attrs = _encode_attrs(variable.attrs, f"{where}/{name}")
        variable.encoding = {"_FillValue": None} if variable.dtype.kind in "fc" else {}
    ds.attrs = _encode_attrs(ds.attrs, where or "/")
    children = {name: _encode_tree(child, f"{where}/{name}") for name, child in tree.children.items()}
    return xr.DataTree(ds, children=children)


def _decode_tree(node: xr.DataTree, path: Path, drop=(), skip=()) -> xr.DataTree:
    ds = node.to_dataset(inherit=False).copy(deep=False)
    for variable in ds.variables.values():
        variable.attrs = _decode_attrs(variable.attrs, path)
        variable.encoding = {}
    ds.attrs = _decode_attrs(ds.attrs, path, drop)
    children = {name: _decode_tree(child, path) for name, child in node.children.items() if name not in skip}
    return xr.DataTree(ds, children=children)


# ---------------------------------------------------------------------------------- the results


def _variable(value: np.ndarray, name: str, where: str, taken: dict) -> xr.Variable:
    if value.dtype.kind not in "biufcU":
        raise TypeError(f"{where} is an array of dtype {value.dtype}, which bayes_loco.save cannot store "
                        "(it stores bool, integer, float, complex and string arrays)")
    dims = []
    for i, size in enumerate(value.shape):
        dim = f"{name}_dim_{i}"
        while taken.get(dim, size) != size:  # a group must agree with its ancestors on shared dims
            dim += "_"
        dims.append(dim)
    return xr.Variable(dims, value, attrs={_DTYPE: value.dtype.str},
                       encoding={"_FillValue": None} if value.dtype.kind in "fc" else {})


def _encode_fields(obj, path: str, memo: dict, taken: dict, skip=()) -> tuple[dict, dict, dict]:
    """The fields of the dataclass ``obj`` but ``skip``: variables, subgroups and the JSON of the rest."""
    cls_name = type(obj).__qualname__
    # Fields with init=False are computed by the class itself.
    names = [f.name for f in dataclasses.fields(obj) if f.init and f.name not in skip]
    variables, children, scalars = {}, {}, {}
    for name in names:
        value, where = getattr(obj, name), f"{cls_name}.{name}"
        if isinstance(value, np.ndarray):
            variables[name] = _variable(value, name, where, taken)
        elif isinstance(value, np.generic) and value.dtype.kind in "biufc":
            variables[name] = xr.Variable((), np.asarray(value), attrs={_SCALAR: 1, _DTYPE: value.dtype.str})
    mine = dict(taken)
    for variable in variables.values():
        mine.update(zip(variable.dims, variable.shape, strict=True))
    for name in names:
        if name in variables:
            continue
        value, where = getattr(obj, name), f"{cls_name}.{name}"
        child = f"{path.rstrip('/')}/{name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            children[name] = _encode_object(value, child, memo, mine, where)
        elif (isinstance(value, (tuple, list)) and value
              and all(dataclasses.is_dataclass(v) and not isinstance(v, type) for v in value)):
            items = {str(i): _encode_object(v, f"{child}/{i}", memo, mine, f"{where}[{i}]")
                     for i, v in enumerate(value)}
            children[name] = xr.DataTree(
                xr.Dataset(attrs={_KIND: "sequence", _SEQUENCE: type(value).__name__, _LENGTH: len(value)}),
                children=items)
        elif isinstance(value, xr.DataTree):
            node = _encode_tree(value, where)
            node.attrs = {**node.attrs, _KIND: "datatree"}
            children[name] = node
        else:
            scalars[name] = _to_json(value, where)
    return variables, children, scalars


def _encode_object(obj, path: str, memo: dict, taken: dict, where: str | None = None) -> xr.DataTree:
    """One group for the dataclass ``obj`` (a reference to an earlier group if it was stored already)."""
    if id(obj) in memo:
        return xr.DataTree(xr.Dataset(attrs={_KIND: "ref", _REF: memo[id(obj)]}))
    if not _in_package(type(obj)):
        raise TypeError(f"{where} is of type {_describe(obj)}; bayes_loco.save stores only the package's own "
                        "classes (bayes_loco.load refuses to import others)")
    memo[id(obj)] = path
    variables, children, scalars = _encode_fields(obj, path, memo, taken)
    ds = xr.Dataset(variables, attrs={_KIND: "dataclass", _TYPE: _type_name(type(obj)),
                                      _FIELDS: _dumps(scalars)})
    return xr.DataTree(ds, children=children)


class _Decoder:
    """Rebuilds the results of a loaded file, each group once (references resolve to the same object)."""

    def __init__(self, root: xr.DataTree, path: Path):
        self.root, self.path, self.done = root, path, {}

    def object(self, node_path: str):
        if node_path not in self.done:
            node = self.root[node_path] if node_path != "/" else self.root
            kind = node.attrs.get(_KIND)
            if kind == "ref":
                self.done[node_path] = self.object(str(node.attrs[_REF]))
            elif kind == "dataclass":
                cls = _resolve(node.attrs[_TYPE], self.path)
                if not dataclasses.is_dataclass(cls):
                    raise ValueError(f"{str(self.path)!r} names {node.attrs[_TYPE]!r}, which is not a result")
                self.done[node_path] = cls(**self.fields(node))
            else:
                raise ValueError(f"{str(self.path)!r}: group {node_path!r} is not a stored result "
                                 f"(kind {kind!r}); the file is damaged or not written by bayes_loco.save")
        return self.done[node_path]

    def fields(self, node: xr.DataTree) -> dict:
        kwargs = {name: _from_json(value, self.path)
                  for name, value in json.loads(node.attrs.get(_FIELDS, "{}")).items()}
        for name, variable in node.to_dataset(inherit=False).data_vars.items():
            value = np.asarray(variable.values)
            dtype = variable.attrs.get(_DTYPE)
            if dtype is not None and value.dtype != np.dtype(dtype):
                value = value.astype(np.dtype(dtype))
            kwargs[name] = value[()] if variable.attrs.get(_SCALAR) else value
        for name, child in node.children.items():
            kind = child.attrs.get(_KIND)
            if kind == "sequence":
                items = [self.object(child[str(i)].path) for i in range(int(child.attrs[_LENGTH]))]
                kwargs[name] = items if child.attrs.get(_SEQUENCE) == "list" else tuple(items)
            elif kind == "datatree":
                kwargs[name] = _decode_tree(child, self.path, drop=(_KIND,))
            else:
                kwargs[name] = self.object(child.path)
        return kwargs


# ---------------------------------------------------------------------------------- the posterior


def _encode_posterior(post) -> xr.DataTree:
    """``post.tree`` at the root and the posterior's other fields in the group ``bayes_loco``."""
    tree = post.tree
    if POSTERIOR_GROUP in tree.children:
        raise TypeError(f"Posterior.tree has a group named {POSTERIOR_GROUP!r}, which bayes_loco.save "
                        "needs for the posterior's other fields; rename it")
    root = _encode_tree(tree, "Posterior.tree")
    memo = {id(post): "/"}
    taken = dict(tree.to_dataset().sizes)
    variables, children, scalars = _encode_fields(post, "/" + POSTERIOR_GROUP, memo, taken, skip=("tree",))
    fields = xr.DataTree(xr.Dataset(variables, attrs={_KIND: "fields", _FIELDS: _dumps(scalars)}),
                         children=children)
    root[POSTERIOR_GROUP] = fields
    return root


def _decode_posterior(tree: xr.DataTree, cls, path: Path):
    if POSTERIOR_GROUP not in tree.children:
        raise ValueError(f"{str(path)!r} claims to hold a Posterior but has no {POSTERIOR_GROUP!r} group; "
                         "the file is damaged")
    decoder = _Decoder(tree, path)
    kwargs = decoder.fields(tree[POSTERIOR_GROUP])
    kwargs["tree"] = _decode_tree(tree, path, drop=(_FORMAT, _TYPE, _VERSION), skip=(POSTERIOR_GROUP,))
    post = cls(**kwargs)
    decoder.done["/"] = post
    return post
