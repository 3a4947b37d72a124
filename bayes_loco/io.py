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
arrays of at least ``config["compress_min_bytes"]`` are compressed (HDF5's built-in
deflate, i.e. zlib, level ``config["compression_level"]``, after its byte shuffle),
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

import os

from ._h5safety import Refusal
from ._ioformat import read
from ._iotypes import ENGINE, FORMAT_VERSION, POSTERIOR_GROUP, READ_ERRORS, SUPPORTED, TYPES
from ._iowrite import PREDICTIVE_GROUPS, save, user_path

__all__ = ["ENGINE", "FORMAT_VERSION", "POSTERIOR_GROUP",
           "PREDICTIVE_GROUPS", "SUPPORTED", "TYPES", "load", "save"]


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
    path = user_path(path, "load")
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
