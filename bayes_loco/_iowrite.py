"""Writing a result to a file: :func:`save` (presented by :mod:`bayes_loco.io`, which documents the format).

Below the reader (:mod:`bayes_loco._ioformat`), which imports a registered class by its name: a
result's own ``save`` method reaches this module without reaching that import.
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
from ._iotypes import (
    ATTRS_KEY,
    DTYPE_KEY,
    ENGINE,
    FIELDS_KEY,
    FORMAT_KEY,
    FORMAT_VERSION,
    KIND_KEY,
    LENGTH_KEY,
    LOCATIONS,
    POSTERIOR,
    POSTERIOR_GROUP,
    REF_KEY,
    RESERVED_PREFIX,
    SCALAR_KEY,
    SEQUENCE_KEY,
    SUPPORTED,
    TYPE_KEY,
    TYPES,
    VERSION_KEY,
    tag_of,
)
from ._version import __version__
from .config import get_config

_INT64 = (-(2**63), 2**63)


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
    target = user_path(path, "save")
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
    tree.attrs = {**tree.attrs, FORMAT_KEY: FORMAT_VERSION, TYPE_KEY: tag_of(type(result), "the result"),
                  VERSION_KEY: __version__}
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
    """``to_netcdf``'s encoding: each group's variables of ``config["compress_min_bytes"]`` bytes or more,
    shuffled and deflated.

    Every variable's own encoding (no ``_FillValue``) is kept: the argument replaces it.
    """
    encoding = {}
    for node in tree.subtree:
        variables = {}
        for name, variable in node.to_dataset(inherit=False).variables.items():
            if (variable.ndim and variable.dtype.kind in "biufc"
                    and variable.nbytes >= get_config()["compress_min_bytes"]):
                variables[name] = {**variable.encoding, "compression": "gzip",
                                   "compression_opts": get_config()["compression_level"], "shuffle": True}
        if variables:
            encoding[node.path] = variables
    return encoding


def user_path(path, caller: str) -> Path:
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
        if key.startswith(RESERVED_PREFIX) or key == FIELDS_KEY:
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
        native[ATTRS_KEY] = _dumps({"json": extra, "types": types, "order": list(attrs)})
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
    return xr.Variable(dims, value, attrs={DTYPE_KEY: value.dtype.str},
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
                                          attrs={SCALAR_KEY: 1, DTYPE_KEY: _storable(value.dtype, where).str})
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
                xr.Dataset(attrs={KIND_KEY: "sequence", SEQUENCE_KEY: type(value).__name__,
                                  LENGTH_KEY: len(value)}),
                children=items)
        elif isinstance(value, xr.DataTree):
            node = _encode_tree(value, where)
            node.attrs = {**node.attrs, KIND_KEY: "datatree"}
            children[name] = node
        else:
            scalars[name] = _to_json(value, where)
    return variables, children, scalars


def _encode_object(obj, path: str, memo: dict, taken: dict, where: str | None = None) -> xr.DataTree:
    """One group for the dataclass ``obj`` (a reference to an earlier group if it was stored already)."""
    if id(obj) in memo:
        return xr.DataTree(xr.Dataset(attrs={KIND_KEY: "ref", REF_KEY: memo[id(obj)]}))
    tag = tag_of(type(obj), where)
    memo[id(obj)] = path
    variables, children, scalars = _encode_fields(obj, path, memo, taken)
    ds = xr.Dataset(variables, attrs={KIND_KEY: "dataclass", TYPE_KEY: tag, FIELDS_KEY: _dumps(scalars)})
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
    fields = xr.DataTree(xr.Dataset(variables, attrs={KIND_KEY: "fields", FIELDS_KEY: _dumps(scalars)}),
                         children=children)
    root[POSTERIOR_GROUP] = fields
    return root


