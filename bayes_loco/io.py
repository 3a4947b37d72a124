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
  the declared sizes of every dataset and attribute are added up before
  anything is read, and dtypes named in the file are limited to bool, integers,
  floats, complex and unicode strings of at most 1024 characters;
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
root carries three attributes:

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
import functools
import importlib
import json
import os
from pathlib import Path

import h5py
import numpy as np
import xarray as xr

from ._h5safety import Refusal, budget, check_bytes, safe_dtype, scan

FORMAT_VERSION = 2
"""The version of the file layout this module writes; it reads this one and format 1."""

ENGINE = "h5netcdf"
POSTERIOR_GROUP = "bayes_loco"

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
_POSTERIOR = "Posterior"
_INT64 = (-(2**63), 2**63)

TYPES: dict[str, str] = {
    "PreferenceData": "bayes_loco.data:PreferenceData",
    "Population": "bayes_loco.data:Population",
    "Units": "bayes_loco.data:Units",
    "VecCoordinates": "bayes_loco.coordinates:VecCoordinates",
    "RTVBasis": "bayes_loco.coordinates:RTVBasis",
    "EllipsoidSet": "bayes_loco.sets.ellipsoid:EllipsoidSet",
    "DrawsSet": "bayes_loco.sets.hull:DrawsSet",
    "QuantileSet": "bayes_loco.sets.quantile:QuantileSet",
    "ValueRadius": "bayes_loco.sets.value:ValueRadius",
    "Certificate": "bayes_loco.sets.base:Certificate",
    "ExactSolution": "bayes_loco.sets.base:ExactSolution",
    "PolicyStatus": "bayes_loco.sets.base:PolicyStatus",
    "Policy": "bayes_loco.policy:Policy",
    "Diagnostics": "bayes_loco.results:Diagnostics",
    "Summary": "bayes_loco.results:Summary",
    "FitStatus": "bayes_loco.results:FitStatus",
    "MLEResult": "bayes_loco.frequentist.mle:MLEResult",
    "LowRankResult": "bayes_loco.frequentist.fgd:LowRankResult",
    "PRSResult": "bayes_loco.frequentist.prs:PRSResult",
    "RankSelection": "bayes_loco.frequentist.rank:RankSelection",
    "Posterior": "bayes_loco.bayes.fit:Posterior",
    "PaperProblem": "bayes_loco.simulate:PaperProblem",
    "PersonalLLMProblem": "bayes_loco.personalllm:PersonalLLMProblem",
}
"""The registry of the classes a file may hold: type tag → ``"module:QualName"`` of the class.

Files name classes by tag, so a class may move to another module: change its
entry here, and teach :func:`_format_1_tag` its old name. The module is imported
only when a file names the tag (loading a frequentist fit does not import PyMC).
"""

_LOCATIONS: dict[str, str] = {location: tag for tag, location in TYPES.items()}

SUPPORTED = ("PreferenceData, Population, coordinates (VecCoordinates, RTVBasis), uncertainty sets "
             "(EllipsoidSet, DrawsSet, QuantileSet), Policy, fits (MLEResult, LowRankResult, PRSResult, "
             "Posterior), RankSelection and the problems (PaperProblem, PersonalLLMProblem)")

# What a damaged or crafted file can make h5py, xarray, NumPy or json raise while it is read and
# decoded; load turns each into one ValueError naming the file. Not Exception: a bug of this module
# (NameError, …) must not pass for a damaged file.
_READ_ERRORS = (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError,
                OverflowError, ArithmeticError)


# --------------------------------------------------------------------------------------------- API


def save(result, path: str | os.PathLike) -> Path:
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
        ``path`` is empty.
    OSError
        The file cannot be written: its directory does not exist
        (FileNotFoundError), ``path`` is a directory (IsADirectoryError), no
        permission (PermissionError), a full disk, … The message names ``path``.
    """
    from . import __version__

    target = _user_path(path, "save")
    if _is_posterior(result):
        tree = _encode_posterior(result)
    elif _is_result(result):
        tree = _encode_object(result, "/", {}, {})
    else:
        raise TypeError(f"bayes_loco.save cannot store a {_describe(result)}: it saves the package's "
                        f"results: {SUPPORTED}")
    tree.attrs = {**tree.attrs, _FORMAT: FORMAT_VERSION, _TYPE: _tag(type(result), "the result"),
                  _VERSION: __version__}
    # Through a link to its target: os.replace on the link itself would replace the link by a file.
    destination = target.resolve() if target.is_symlink() else target
    cannot = f"bayes_loco.save cannot write {str(target)!r}"
    if destination.is_dir():
        raise IsADirectoryError(f"{cannot}: it is a directory")
    if not destination.parent.is_dir():
        raise FileNotFoundError(f"{cannot}: the directory {str(destination.parent)!r} does not exist")
    if not os.access(destination.parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{cannot}: no permission to write in {str(destination.parent)!r}")
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    try:
        tree.to_netcdf(tmp, engine=ENGINE)
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
    TypeError
        ``path`` is not a str or path.
    ValueError
        ``path`` is empty; or the file is not one :func:`save` wrote, was
        written in a format version this bayes_loco does not read (the message
        names the bayes_loco version to read it with), is damaged, or holds
        what the module docstring's "Loading a file from someone else" refuses.
        One ValueError that names the file and what is wrong.
    """
    path = _user_path(path, "load")
    if not path.exists():
        raise FileNotFoundError(f"bayes_loco.load: no such file: {str(path)!r}")
    cannot = f"bayes_loco.load cannot read {str(path)!r}"
    try:
        return _read(path)
    except Refusal as err:
        raise ValueError(f"{cannot}: {err}") from err.__cause__
    except MemoryError:
        raise
    except _READ_ERRORS as err:
        raise ValueError(f"{cannot}: the file is damaged or was not written by bayes_loco.save "
                         f"({type(err).__name__}: {err})") from err


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


def _read(path: Path):
    """The object in ``path``; :class:`Refusal` (or an error of h5py, xarray, …) if it cannot be."""
    if path.is_dir():
        raise Refusal("it is a directory, not a file")
    if not path.is_file():
        raise Refusal("it is not a regular file (a device, pipe or socket)")
    if path.stat().st_size == 0:
        raise Refusal("the file is empty, so it was not written by bayes_loco.save")
    if not h5py.is_hdf5(path):
        raise Refusal("it is not a netCDF-4 (HDF5) file, so it was not written by bayes_loco.save")
    scan(path)  # before xarray reads anything
    with xr.open_datatree(path, engine=ENGINE) as tree:
        fmt, type_name = _check_header(tree.attrs)
        tree.load()
    decoder = _Decoder(tree, fmt, budget(path))
    cls = decoder.cls(type_name, "the file's root")
    if _tag(cls, "the file's root") == _POSTERIOR:
        return _decode_posterior(tree, cls, decoder)
    return decoder.object("/")


# ------------------------------------------------------------------------------------- the header


def _check_header(attrs) -> tuple[int, str]:
    """The format version and the root's type name of a file :func:`save` wrote in a known format."""
    from . import __version__

    fmt, type_name = attrs.get(_FORMAT), attrs.get(_TYPE)
    if fmt is None or not isinstance(type_name, str):
        raise Refusal(f"it was not written by bayes_loco.save: its root has no {_FORMAT!r} and {_TYPE!r} "
                      "attributes")
    written = attrs.get(_VERSION, "unknown")
    if isinstance(fmt, bool) or not (isinstance(fmt, int | np.integer) and int(fmt) in (1, FORMAT_VERSION)):
        raise Refusal(f"it has bayes_loco file format version {fmt}, but this bayes_loco ({__version__}) "
                      f"reads format version {FORMAT_VERSION} (and 1) only. The file was written by "
                      f"bayes_loco {written}: load it with that version (pip install bayes_loco=={written}).")
    return int(fmt), type_name


def _tag(cls, where: str) -> str:
    """The type tag of ``cls`` (a class of the registry); TypeError for any other class."""
    tag = _LOCATIONS.get(f"{cls.__module__}:{cls.__qualname__}")
    if tag is None:
        raise TypeError(f"{where} is of type {cls.__module__}.{cls.__qualname__}, which bayes_loco.save "
                        f"cannot store: it stores the package's results ({SUPPORTED}), their enums and "
                        "the values described in bayes_loco.io")
    return tag


def _format_1_tag(name: str) -> str | None:
    """The tag of the class a format-1 file names by ``"module:QualName"``, if it is registered.

    Every registered class is still where format 1 found it; a class that moves
    must keep its old name here so that format-1 files still load.
    """
    return _LOCATIONS.get(name)


@functools.cache
def _registered(tag: str) -> type:
    """The class of the registry's ``tag``, imported on first use."""
    module, _, qualname = TYPES[tag].partition(":")
    return getattr(importlib.import_module(module), qualname)


def _describe(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _is_result(value) -> bool:
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)
            and f"{type(value).__module__}:{type(value).__qualname__}" in _LOCATIONS)


def _is_posterior(value) -> bool:
    # By name: saving other results must not import PyMC.
    return f"{type(value).__module__}:{type(value).__qualname__}" == TYPES[_POSTERIOR]


# ----------------------------------------------------------------------------------------- JSON


def _to_json(value, where: str):
    """``value`` as JSON-able data, tagging what JSON would lose (tuples, dicts, Enums, NumPy scalars)."""
    if value is None or isinstance(value, bool) or type(value) is str:
        return value
    if isinstance(value, enum.Enum):
        return {"$enum": _tag(type(value), where), "value": _to_json(value.value, where)}
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
    tag = _tag(type(obj), where)
    memo[id(obj)] = path
    variables, children, scalars = _encode_fields(obj, path, memo, taken)
    ds = xr.Dataset(variables, attrs={_KIND: "dataclass", _TYPE: tag, _FIELDS: _dumps(scalars)})
    return xr.DataTree(ds, children=children)


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

    def cls(self, name, where: str, base: type | None = None) -> type:
        """The registered class a file names (by tag, or in format 1 by ``"module:QualName"``)."""
        tag = name if self.fmt >= 2 else _format_1_tag(name) if isinstance(name, str) else None
        if not isinstance(tag, str) or tag not in TYPES:
            raise Refusal(f"{where} names the type {name!r}, which is not a class of bayes_loco that a file "
                          f"may hold (format {self.fmt} names them by "
                          f"{'type tag' if self.fmt >= 2 else 'module:QualName'}: {', '.join(TYPES)})")
        cls = _registered(tag)
        if base is not None and not issubclass(cls, base):
            raise Refusal(f"{where} names the type {name!r}, which is not an enum")
        if base is None and not dataclasses.is_dataclass(cls):
            raise Refusal(f"{where} names the type {name!r}, which is not a result")
        return cls

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
        kind = node.attrs.get(_KIND)
        here = f"the group {node_path!r}"
        if kind == "ref":
            value = self.object(node.attrs.get(_REF), here)
        elif kind == "dataclass":
            cls = self.cls(node.attrs.get(_TYPE), here)
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
            raise Refusal(f"{where} holds a {cls.__name__} that {cls.__name__} refuses: {err}") from err

    def fields(self, node: xr.DataTree, where: str) -> dict:
        text = node.attrs.get(_FIELDS, "{}")
        try:
            stored = json.loads(text) if isinstance(text, str) else None
        except ValueError as err:
            raise Refusal(f"the attribute {_FIELDS!r} of {where} is not JSON ({err})") from None
        if not isinstance(stored, dict):
            raise Refusal(f"the attribute {_FIELDS!r} of {where} is not a JSON object")
        kwargs = {name: self.json(value, f"{where}, field {name!r}") for name, value in stored.items()}
        for name, variable in node.to_dataset(inherit=False).data_vars.items():
            at = f"the variable {name!r} of {where}"
            if name in kwargs:
                raise Refusal(f"{at} is also stored in {_FIELDS!r}")
            value = np.asarray(variable.values)
            dtype = variable.attrs.get(_DTYPE)
            if dtype is not None:
                dtype = safe_dtype(dtype, at)
                if value.dtype != dtype:
                    self.allocate(value.size, dtype.itemsize, at)
                    value = value.astype(dtype)
            if variable.attrs.get(_SCALAR):
                if value.ndim:
                    raise Refusal(f"{at} is marked a scalar but has shape {value.shape}")
                value = value[()]
            kwargs[name] = value
        for name, child in node.children.items():
            at = f"the group {child.path!r}"
            if name in kwargs:
                raise Refusal(f"{at} is a field stored twice")
            kind = child.attrs.get(_KIND)
            if kind == "sequence":
                kwargs[name] = self.sequence(child, at)
            elif kind == "datatree":
                kwargs[name] = self.tree(child, drop=(_KIND,))
            else:
                kwargs[name] = self.object(child.path, where)
        return kwargs

    def sequence(self, node: xr.DataTree, where: str) -> list | tuple:
        length, kind = node.attrs.get(_LENGTH), node.attrs.get(_SEQUENCE)
        names = [str(i) for i in range(len(node.children))]
        if isinstance(length, bool) or not isinstance(length, int | np.integer) or length != len(names):
            raise Refusal(f"{where} records {length!r} items but holds {len(names)}")
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
            cls = self.cls(value["$enum"], where, enum.Enum)
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


def _decode_posterior(tree: xr.DataTree, cls, decoder: _Decoder):
    if POSTERIOR_GROUP not in tree.children:
        raise Refusal(f"it claims to hold a Posterior but has no {POSTERIOR_GROUP!r} group; it is damaged")
    kwargs = decoder.fields(tree[POSTERIOR_GROUP], f"the group '/{POSTERIOR_GROUP}'")
    kwargs["tree"] = decoder.tree(tree, drop=(_FORMAT, _TYPE, _VERSION), skip=(POSTERIOR_GROUP,))
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
