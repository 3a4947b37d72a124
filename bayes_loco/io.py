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
layout or modules, refuses files of a format version it does not know, is safe
to load from someone else, and a posterior file is an ArviZ DataTree that
``xr.open_datatree`` and ArviZ read directly).

Loading a file from someone else
--------------------------------
A file a colleague sent is untrusted input, and :func:`load` treats it so. It
guarantees that loading a file

- reads that one file only: external storage, external links, virtual datasets
  and soft links are refused before any data is read, and so are HDF5 filters
  that would load a plugin;
- runs no code the file chooses: classes and enums are named by type tags
  (``"Policy"``, ``"EllipsoidSet"``, ``"PolicyStatus"``, …), looked up in a
  fixed registry of the package's result types, never imported by a name from
  the file; every object is built with its class's own constructor, so the
  constructor's validation runs on what the file holds;
- allocates at most about 64 times the file's size (plus 16 MiB) for its data:
  the declared sizes of every dataset and attribute (then the lengths of its
  variable-length strings) are added up before anything is allocated, and
  dtypes named in the file are limited to bool, integers, floats, complex and
  unicode strings of at most 1024 characters;
- either returns the saved object or raises one :class:`ValueError` that names
  the file and says what is wrong with it (damaged HDF5, an unknown type tag, a
  bad enum value, a field the class does not have, a value the class refuses, a
  posterior whose draws do not match its settings, …), never an error from
  h5py, xarray or NumPy.

A file can still hold wrong numbers that pass every check (a posterior of other
data, a policy that is valid but not optimal): loading proves the file is
well-formed, not that its sender computed it honestly.

File layout
-----------
The file is netCDF-4 (HDF5), written and read by xarray through h5netcdf. Its
arrays of at least :data:`COMPRESS_MIN_BYTES` are compressed (HDF5's built-in
deflate, i.e. zlib, level :data:`COMPRESSION_LEVEL`, after its byte shuffle),
which is lossless: a loaded array is the saved one bit for bit. ``compress=False``
writes them plain; a compressed file that :func:`load`'s memory bound would
refuse (data that compress more than 64-fold, such as a large one-hot design) is
written plain instead. ``predictive=False`` leaves a posterior's predictive groups
(``posterior_predictive`` and ``preference_probability``, N × draws numbers each)
out of the file; the loaded posterior lacks them and its tree's attribute
``predictive_groups`` says so. Its root carries three attributes:

``bayes_loco_format``
    :data:`FORMAT_VERSION` (2). Files of format 1 (bayes_loco before the type
    tags) load too; a file of another format version is refused.
``bayes_loco_type``
    The type tag of the saved object's class (format 1: ``"module:QualName"``,
    read only for the classes of the registry).
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
alone, after checking that the chains and draws of its ``posterior`` group (and
``sample_stats``) match those its attributes and settings record, and that its
sizes match its data and basis.

Attributes of a stored DataTree keep their Python types: strings and numbers
are written as netCDF attributes (numbers with a note of their type, so a
Python ``int`` comes back an ``int`` and not a ``numpy.int64``); what netCDF
cannot hold (bool, None, lists, dicts) goes into the JSON attribute
``bayes_loco_attrs`` of the same group or variable.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from pathlib import Path

import numpy as np
import xarray as xr

from ._h5safety import Refusal, safe_dtype, scan
from ._ioformat import (
    _ATTRS,
    _DTYPE,
    _FIELDS,
    _FORMAT,
    _KIND,
    _LENGTH,
    _REF,
    _RESERVED_PREFIX,
    _SCALAR,
    _SEQUENCE,
    _TYPE,
    _VERSION,
    ENGINE,
    FORMAT_VERSION,
    LOCATIONS,
    POSTERIOR,
    POSTERIOR_GROUP,
    READ_ERRORS,
    SUPPORTED,
    TYPES,
    read,
    tag_of,
)
from ._version import __version__

__all__ = ["COMPRESSION_LEVEL", "COMPRESS_MIN_BYTES", "ENGINE", "FORMAT_VERSION", "POSTERIOR_GROUP",
           "PREDICTIVE_GROUPS", "SUPPORTED", "TYPES", "load", "save"]

_INT64 = (-(2**63), 2**63)

COMPRESSION_LEVEL = 4
"""zlib level of :func:`save`: above it files shrink by under 1% more (a MAP posterior, N = 3,000), slower."""

COMPRESS_MIN_BYTES = 4096
"""Arrays smaller than this are written plain: a chunked, compressed array costs more than it saves."""

PREDICTIVE_GROUPS = ("posterior_predictive", "preference_probability")
"""The groups of a posterior's tree that ``save(..., predictive=False)`` leaves out."""


# --------------------------------------------------------------------------------------------- API


def save(result, path: str | os.PathLike, *, compress: bool = True, predictive: bool = True) -> Path:
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
        one is complete (a failed save leaves it as it was). If ``path`` is a
        symbolic link, the file it points to is written (and the link kept).
    compress : bool
        Compress the arrays (zlib; lossless, see the module docstring). False
        writes them plain: a larger file, written and read a little faster.
    predictive : bool
        For a :class:`~bayes_loco.bayes.Posterior`: keep its predictive groups
        (:data:`PREDICTIVE_GROUPS`, default). False leaves them out, the
        largest part of a posterior of many comparisons (N × draws numbers
        each): the loaded posterior has everything else, its tree's attribute
        ``predictive_groups`` says they were left out, and
        ``az.plot_ppc_*`` then needs a refit.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        ``result`` is not a result of bayes_loco, or one of its fields holds a
        value this format cannot store (the message names the field); or
        ``path`` is not a str or path.
    ValueError
        ``path`` is empty, netCDF cannot hold the result (the message names
        ``path``), or ``predictive=False`` for a result that is not a posterior.
    OSError
        The file cannot be written: its directory does not exist
        (FileNotFoundError), ``path`` is a directory (IsADirectoryError), no
        permission (PermissionError), a full disk, … The message names ``path``.

    Examples
    --------
    >>> bl.save(fit, "fit.nc")
    PosixPath('fit.nc')
    >>> bl.load("fit.nc")
    PRSResult(rank=2, k=16, n=300, no split, converged=True)
    """
    target = _user_path(path, "save")
    cannot = f"bayes_loco.save cannot write {str(target)!r}"
    if not (_is_posterior(result) or _is_result(result)):
        raise TypeError(f"bayes_loco.save cannot store a {_describe(result)} in {str(target)!r}: it saves "
                        f"the package's results: {SUPPORTED}")
    for name, flag in (("compress", compress), ("predictive", predictive)):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"bayes_loco.save: {name} must be True or False, got {flag!r}")
    if not predictive and not _is_posterior(result):
        raise ValueError(f"bayes_loco.save: predictive=False leaves a posterior's predictive groups out; a "
                         f"{_describe(result)} has none")
    try:
        tree = (_encode_posterior(result, bool(predictive)) if _is_posterior(result)
                else _encode_object(result, "/", {}, {}))
    except TypeError as err:
        raise TypeError(f"{cannot}: {err}") from None
    tree.attrs = {**tree.attrs, _FORMAT: FORMAT_VERSION, _TYPE: tag_of(type(result), "the result"),
                  _VERSION: __version__}
    # Through a link to its target: os.replace on the link itself would replace the link by a file.
    destination = target.resolve() if target.is_symlink() else target
    if destination.is_dir():
        raise IsADirectoryError(f"{cannot}: it is a directory")
    if not destination.parent.is_dir():
        raise FileNotFoundError(f"{cannot}: the directory {str(destination.parent)!r} does not exist")
    if not os.access(destination.parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{cannot}: no permission to write in {str(destination.parent)!r}")
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    try:
        _write(tree, tmp, compress)
        os.replace(tmp, destination)
    except OSError as err:
        # The error names the hidden temporary file; the user knows only their path.
        reason = err.strerror or str(err).replace(str(tmp), str(destination))
        raise type(err)(f"{cannot}: {reason}") from err
    except ValueError as err:
        raise ValueError(f"{cannot}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)
    return target


def load(path: str | os.PathLike):
    """Read a result written by :func:`save`; safe for a file from someone else.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    object
        An object of the class that was saved, equal field by field (arrays bit
        for bit, dtypes included) to the one saved, built by its class's
        constructor. A posterior is rebuilt from the file alone. The arrays are
        in memory; the file is closed.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    PermissionError
        No permission to read it.
    TypeError
        ``path`` is not a str or path.
    ValueError
        ``path`` is empty; or the file is not one :func:`save` wrote, was
        written in a format version this bayes_loco does not read (the message
        names the bayes_loco version to read it with), is damaged, or holds
        what the module docstring's "Loading a file from someone else" refuses.
        One ValueError that names the file and what is wrong.

    Examples
    --------
    >>> path = bl.save(fit, "fit.nc")
    >>> back = bl.load(path)
    >>> type(back).__name__, np.array_equal(back.theta_rtv, fit.theta_rtv)
    ('PRSResult', True)
    """
    path = _user_path(path, "load")
    if not path.exists():
        raise FileNotFoundError(f"bayes_loco.load: no such file: {str(path)!r}")
    if path.is_file() and not os.access(path, os.R_OK):
        raise PermissionError(f"bayes_loco.load: no permission to read {str(path)!r}")
    cannot = f"bayes_loco.load cannot read {str(path)!r}"
    try:
        return read(path)
    except Refusal as err:
        raise ValueError(f"{cannot}: {err}") from err.__cause__
    except MemoryError:
        raise
    except READ_ERRORS as err:
        raise ValueError(f"{cannot}: the file is damaged or was not written by bayes_loco.save "
                         f"({type(err).__name__}: {err})") from err


def _write(tree: xr.DataTree, path: Path, compress: bool) -> None:
    """Write ``tree`` to ``path``, its large arrays compressed if ``compress`` and :func:`load` reads it so.

    :func:`load` allocates at most 64 times a file's size (:mod:`bayes_loco._h5safety`):
    data that compress more than that (a large one-hot design) would be refused, so
    such a file is written again plain.
    """
    if compress:
        tree.to_netcdf(path, engine=ENGINE, encoding=_compression(tree))
        try:
            scan(path)
        except Refusal:
            pass
        else:
            return
    tree.to_netcdf(path, engine=ENGINE)


def _compression(tree: xr.DataTree) -> dict:
    """``to_netcdf``'s encoding: each group's variables of COMPRESS_MIN_BYTES or more, shuffled and deflated.

    Every variable's own encoding (no ``_FillValue``) is kept: the argument replaces it.
    """
    encoding = {}
    for node in tree.subtree:
        variables = {}
        for name, variable in node.to_dataset(inherit=False).variables.items():
            if variable.ndim and variable.dtype.kind in "biufc" and variable.nbytes >= COMPRESS_MIN_BYTES:
                variables[name] = {**variable.encoding, "compression": "gzip",
                                   "compression_opts": COMPRESSION_LEVEL, "shuffle": True}
        if variables:
            encoding[node.path] = variables
    return encoding


def _user_path(path, caller: str) -> Path:
    """``path`` as a Path, refusing what pathlib would take for another file (``""`` is the directory)."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"bayes_loco.{caller}: path must be a str or os.PathLike, got {_describe(path)}")
    text = os.fsdecode(os.fspath(path))
    if not text.strip():
        raise ValueError(f"bayes_loco.{caller}: path is empty ({text!r}); give the file's name")
    if "\0" in text:
        raise ValueError(f"bayes_loco.{caller}: path {text!r} contains a NUL character")
    return Path(text)


def _describe(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _is_result(value) -> bool:
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)
            and f"{type(value).__module__}:{type(value).__qualname__}" in LOCATIONS)


def _is_posterior(value) -> bool:
    # By name: saving other results must not import PyMC.
    return f"{type(value).__module__}:{type(value).__qualname__}" == TYPES[POSTERIOR]


# ----------------------------------------------------------------------------------------- JSON


def _to_json(value, where: str):
    """``value`` as JSON-able data, tagging what JSON would lose (tuples, dicts, Enums, NumPy scalars)."""
    if value is None or isinstance(value, bool) or type(value) is str:
        return value
    if isinstance(value, enum.Enum):
        return {"$enum": tag_of(type(value), where), "value": _to_json(value.value, where)}
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"$numpy": _storable(value.dtype, where).str, "value": value.item()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufU":
        return {"$ndarray": _storable(value.dtype, where).str, "shape": list(value.shape),
                "data": value.ravel().tolist()}
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


def _encode_tree(tree: xr.DataTree, where: str) -> xr.DataTree:
    """A copy of ``tree`` whose attributes (of every group and variable) netCDF can hold."""
    ds = tree.to_dataset(inherit=False).copy(deep=False)
    for name, variable in ds.variables.items():
        variable.attrs = _encode_attrs(variable.attrs, f"{where}/{name}")
        variable.encoding = {"_FillValue": None} if variable.dtype.kind in "fc" else {}
    ds.attrs = _encode_attrs(ds.attrs, where or "/")
    children = {name: _encode_tree(child, f"{where}/{name}") for name, child in tree.children.items()}
    return xr.DataTree(ds, children=children)


# ---------------------------------------------------------------------------------- the results


def _storable(dtype: np.dtype, where: str) -> np.dtype:
    """``dtype``, if :func:`load` reads it back (no float128, strings of at most 1024 characters)."""
    try:
        return safe_dtype(dtype.str, "the array")
    except Refusal as err:
        raise TypeError(f"{where} cannot be stored: {err}") from None


def _variable(value: np.ndarray, name: str, where: str, taken: dict) -> xr.Variable:
    if value.dtype.kind not in "biufcU":
        raise TypeError(f"{where} is an array of dtype {value.dtype}, which bayes_loco.save cannot store "
                        "(it stores bool, integer, float, complex and string arrays)")
    _storable(value.dtype, where)
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
            variables[name] = xr.Variable((), np.asarray(value),
                                          attrs={_SCALAR: 1, _DTYPE: _storable(value.dtype, where).str})
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
    tag = tag_of(type(obj), where)
    memo[id(obj)] = path
    variables, children, scalars = _encode_fields(obj, path, memo, taken)
    ds = xr.Dataset(variables, attrs={_KIND: "dataclass", _TYPE: tag, _FIELDS: _dumps(scalars)})
    return xr.DataTree(ds, children=children)


# ---------------------------------------------------------------------------------- the posterior


def _encode_posterior(post, predictive: bool = True) -> xr.DataTree:
    """``post.tree`` at the root and the posterior's other fields in the group ``bayes_loco``.

    ``predictive`` False leaves :data:`PREDICTIVE_GROUPS` out and says so in the root's attributes.
    """
    tree = post.tree
    if POSTERIOR_GROUP in tree.children:
        raise TypeError(f"Posterior.tree has a group named {POSTERIOR_GROUP!r}, which bayes_loco.save "
                        "needs for the posterior's other fields; rename it")
    left_out = [] if predictive else [name for name in PREDICTIVE_GROUPS if name in tree.children]
    if left_out:
        tree = tree.copy(deep=False)
        for name in left_out:
            del tree[name]
        tree.attrs = {**tree.attrs, "predictive_groups": f"{' and '.join(left_out)} left out by "
                      "bayes_loco.save(..., predictive=False)"}
    root = _encode_tree(tree, "Posterior.tree")
    memo = {id(post): "/"}
    taken = dict(tree.to_dataset().sizes)
    variables, children, scalars = _encode_fields(post, "/" + POSTERIOR_GROUP, memo, taken, skip=("tree",))
    fields = xr.DataTree(xr.Dataset(variables, attrs={_KIND: "fields", _FIELDS: _dumps(scalars)}),
                         children=children)
    root[POSTERIOR_GROUP] = fields
    return root


