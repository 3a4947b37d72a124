"""What :func:`bayes_loco.load` checks of a file before it reads any of its data.

A file from someone else is untrusted input. HDF5 can make a reader fetch bytes
from elsewhere (external storage, external links, virtual datasets), run filter
plugins, or allocate far more memory than the file holds (a declared shape with
no data behind it, a compressed run of zeros, a huge fixed-width string type).
:func:`scan` walks the file's structure with h5py, which reads metadata only,
and refuses all of that before xarray opens the file; :func:`safe_dtype` and
:func:`check_bytes` bound what the loader itself allocates from the dtypes and
shapes a file names in its attributes.

The bound is :func:`budget`: ``config["expansion"]`` times the file's size plus
``config["slack"]``. :func:`bayes_loco.save` compresses its larger arrays (zlib), and
writes a file plain where its compressed arrays would expand past this bound, so
every file it writes loads; uncompressed, data take at most about five times the
file's size in memory (a netCDF dimension without coordinates is a placeholder
of 4 bytes per entry), and the factor leaves room for compression such as
``nccopy -d`` gives. The lengths of variable-length strings,
whose bytes sit in the file's heap and may be shared by many entries, count
too: the scan reads them a few at a time and adds them up.
"""

from __future__ import annotations

import mmap
import re
import struct
from pathlib import Path

import h5py
import numpy as np

from .config import get_config

# The dtypes the package stores: bool, integers, floats, complex and short unicode strings.
_DTYPE = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248]|c8|c16|U[1-9][0-9]{0,5})")

# Filters HDF5 and h5py implement themselves: any other would make HDF5 load a plugin library.
_FILTERS = frozenset({h5py.h5z.FILTER_DEFLATE, h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_FLETCHER32,
                      h5py.h5z.FILTER_SZIP, h5py.h5z.FILTER_NBIT, h5py.h5z.FILTER_SCALEOFFSET,
                      h5py.h5z.FILTER_LZF})

# The signature and version 1 of a global heap collection.
_GCOL = b"GCOL\x01\x00\x00\x00"


# netCDF-4's dimension-scale bookkeeping: the only attributes that may hold object references.
_REFERENCE_ATTRS = frozenset({"REFERENCE_LIST", "DIMENSION_LIST"})


class Refusal(ValueError):
    """A file :func:`bayes_loco.load` will not read; the message says why, after the file's name."""


def budget(path: Path) -> int:
    """The most bytes loading ``path`` may allocate for its data."""
    return int(get_config()["expansion"] * path.stat().st_size) + get_config()["slack"]


def safe_dtype(text, where: str) -> np.dtype:
    """The dtype ``text`` names, if it is one the package stores; else :class:`Refusal`.

    Checked as text before NumPy parses it, so a file cannot name a structured,
    object or giant string dtype.
    """
    if not isinstance(text, str) or not _DTYPE.fullmatch(text):
        shown = repr(text) if isinstance(text, str) else str(text)
        raise Refusal(f"{where} names the dtype {shown}; bayes_loco stores bool, integer, float, complex "
                      f"and unicode (at most {get_config()["max_string"]} characters) arrays only")
    dtype = np.dtype(text)
    if dtype.kind == "U" and dtype.itemsize > 4 * get_config()["max_string"]:
        raise Refusal(f"{where} names the dtype {text!r}: strings of {dtype.itemsize // 4} characters, "
                      f"longer than the {get_config()["max_string"]} bayes_loco reads")
    return dtype


def check_bytes(count: int, itemsize: int, limit: int, where: str) -> None:
    """Refuse an array of ``count`` items of ``itemsize`` bytes if it would take more than ``limit`` bytes."""
    if count * itemsize > limit:
        raise Refusal(f"{where} would take {count * itemsize:,} bytes, more than the {limit:,} a file of "
                      f"this size may make bayes_loco.load allocate ({get_config()["expansion"]:g} times "
                      f"its size plus "
                      f"{get_config()["slack"] // 2**20} MiB)")


def scan(path: Path) -> None:
    """Check the structure of the HDF5 file ``path`` without reading its data.

    Raises
    ------
    Refusal
        A link other than a hard link (soft or external link), an object
        reached twice, a named datatype, a dataset stored outside the file
        (external storage) or virtual, a filter HDF5 would load as a plugin, a
        type or dtype outside what the package stores, or sizes beyond
        :func:`budget` (the declared ones, then the lengths of the
        variable-length strings, read once the structure passed).
    OSError
        h5py cannot open the file (not HDF5, damaged).
    """
    walker = _Walker(budget(path))
    with h5py.File(path, "r") as root:
        walker.seen.add(_address(root))  # a hard link back to the root is a cycle too
        walker.attributes(root, "/")
        walker.group(root, "/")
        # Only once the whole structure passed: these reads are of the file's own heap.
        if walker.strings:
            _check_global_heaps(path, root.id.get_create_plist().get_sizes()[1])
        for count_strings in walker.strings:
            count_strings()


def _check_global_heaps(path: Path, length_size: int) -> None:
    """Refuse a damaged global heap, where HDF5 keeps variable-length strings, before HDF5 reads it.

    HDF5 itself loops forever on some damaged collections (two flipped bits in
    an object's size were enough), so each collection (``GCOL``, version 1) is
    walked here: its objects must tile it, ending in a free-space object (index
    0) that fills the rest, or less than an object's header short of its end.
    """
    header = struct.Struct("<4sB3x" + {4: "I", 8: "Q"}[length_size])
    item = struct.Struct("<HH4x" + {4: "I", 8: "Q"}[length_size])
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.find(_GCOL)
        while start >= 0:
            if not _collection_is_whole(data, start, header, item):
                raise Refusal(f"the global heap at byte {start} (where HDF5 keeps the variable-length "
                              "strings) is damaged; HDF5 could hang reading it")
            start = data.find(_GCOL, start + 1)


def _collection_is_whole(data, start: int, header: struct.Struct, item: struct.Struct) -> bool:
    """Whether the objects of the global heap collection at ``start`` tile it exactly."""
    if start + header.size > len(data):
        return False
    size = header.unpack_from(data, start)[-1]
    end, at = start + size, start + header.size
    if size < 4096 or end > len(data):  # HDF5 makes no smaller collection
        return False
    while at < end:
        if at + item.size > end:  # too little left for a free-space object: HDF5 leaves it as slack
            return True
        index, _, length = item.unpack_from(data, at)
        if index == 0:  # free space: the rest of the collection
            return length == end - at
        at += item.size + -(-length // 8) * 8
    return at == end


class _Walker:
    """Visits every group, dataset and attribute once, adding up the bytes their data would take."""

    def __init__(self, limit: int):
        self.limit, self.total, self.seen = limit, 0, set()
        self.strings = []  # what adds up the lengths of each variable-length string, after the walk

    def add(self, count: int, itemsize: int, where: str) -> None:
        self.total += count * itemsize
        check_bytes(self.total, 1, self.limit, f"the data up to {where}")

    def group(self, group: h5py.Group, where: str) -> None:
        for name in group:
            child = f"{where.rstrip('/')}/{name}"
            kind = group.id.links.get_info(name.encode()).type
            if kind == h5py.h5l.TYPE_SOFT:
                raise Refusal(f"{child!r} is a soft link; a file of bayes_loco.save holds none")
            if kind == h5py.h5l.TYPE_EXTERNAL:
                raise Refusal(f"{child!r} is an external link to another file; bayes_loco.load reads one "
                              "file only")
            if kind != h5py.h5l.TYPE_HARD:
                raise Refusal(f"{child!r} is a link of HDF5 link type {kind}, which bayes_loco.load does "
                              "not follow")
            obj = group[name]
            if _address(obj) in self.seen:
                raise Refusal(f"{child!r} is an object the file already holds under another name (a hard "
                              "link); a file of bayes_loco.save stores each object once")
            self.seen.add(_address(obj))
            self.attributes(obj, child)
            if isinstance(obj, h5py.Group):
                self.group(obj, child)
            elif isinstance(obj, h5py.Dataset):
                self.dataset(obj, child)
            else:
                raise Refusal(f"{child!r} is a {type(obj).__name__} (a named datatype); a file of "
                              "bayes_loco.save holds groups and datasets only")

    def dataset(self, dset: h5py.Dataset, where: str) -> None:
        plist = dset.id.get_create_plist()
        if plist.get_external_count():
            name = plist.get_external(0)[0].decode(errors="replace")
            raise Refusal(f"the data of {where!r} are stored outside the file, in {name!r} (HDF5 external "
                          "storage); bayes_loco.load reads one file only")
        if plist.get_layout() == h5py.h5d.VIRTUAL:
            raise Refusal(f"{where!r} is a virtual dataset, mapped from other datasets or files; "
                          "bayes_loco.load reads plain datasets only")
        for i in range(plist.get_nfilters()):
            code = plist.get_filter(i)[0]
            if code not in _FILTERS:
                raise Refusal(f"{where!r} is stored with the HDF5 filter {code}, which HDF5 would load as a "
                              "plugin; bayes_loco.load reads the built-in filters only (deflate, shuffle, "
                              "fletcher32, szip, nbit, scaleoffset, lzf)")
        count = _count(dset.id.get_space())
        tid = dset.id.get_type()
        self.check_type(tid, where, dataset=True)
        if (isinstance(tid, h5py.h5t.TypeStringID) and tid.is_variable_str()
                and count > get_config()["max_vlen_strings"]):
            raise Refusal(f"{where!r} holds {count:,} variable-length strings, more than the "
                          f"{get_config()["max_vlen_strings"]:,} bayes_loco.load reads")
        self.add(count, tid.get_size(), where)
        if isinstance(tid, h5py.h5t.TypeStringID) and tid.is_variable_str() and count:
            self.strings.append(lambda: self.vlen_dataset(dset, where))

    def vlen_dataset(self, dset: h5py.Dataset, where: str) -> None:
        """Add up the lengths of a dataset's variable-length strings, a few at a time.

        Their bytes live in the file's heap, which the declared sizes do not
        show, and many entries may point to the same long string: read in
        blocks of at most ``config["h5_scan_block"]`` entries, each read stays within
        ``config["h5_scan_block"]`` times the file's size.
        """
        if dset.ndim == 0:
            self.add(len(dset[()]), 1, where)
            return
        rows = max(1, get_config()["h5_scan_block"] // max(1, int(np.prod(dset.shape[1:]))))
        for start in range(0, dset.shape[0], rows):
            block = np.asarray(dset[start:start + rows], dtype=object).ravel()
            self.add(sum(len(v) for v in block), 1, where)

    def attributes(self, obj, where: str) -> None:
        for name in obj.attrs:
            attr = obj.attrs.get_id(name)
            at = f"{where.rstrip('/')}/@{name}" if where != "/" else f"/@{name}"
            tid = attr.get_type()
            self.check_type(tid, at, references=name in _REFERENCE_ATTRS)
            count = _count(attr.get_space())
            if isinstance(tid, h5py.h5t.TypeStringID) and tid.is_variable_str() and count > 1:
                raise Refusal(f"the attribute {at!r} holds {count:,} variable-length strings; "
                              "bayes_loco.save writes one string per attribute")
            self.add(count, tid.get_size(), at)
            if isinstance(tid, h5py.h5t.TypeStringID) and tid.is_variable_str() and count:
                self.strings.append(lambda obj=obj, name=name, at=at: self.add(len(obj.attrs[name]), 1, at))

    def check_type(self, tid, where: str, *, dataset: bool = False, references: bool = False) -> None:
        """Refuse HDF5 types the package never writes (``references``: the dimension-scale attributes)."""
        size = tid.get_size()
        if isinstance(tid, h5py.h5t.TypeIntegerID) and size in (1, 2, 4, 8):
            return
        if isinstance(tid, h5py.h5t.TypeFloatID) and size in (2, 4, 8):
            return
        if isinstance(tid, h5py.h5t.TypeStringID):
            if tid.is_variable_str() or size <= 4 * get_config()["max_string"]:
                return
            raise Refusal(f"{where!r} has strings of {size:,} bytes each, longer than the "
                          f"{4 * get_config()["max_string"]} "
                          "bayes_loco.load reads")
        if isinstance(tid, h5py.h5t.TypeEnumID):  # h5py's bool
            self.check_type(tid.get_super(), where)
            return
        if isinstance(tid, h5py.h5t.TypeCompoundID):
            members = [tid.get_member_type(i) for i in range(tid.get_nmembers())]
            if dataset and len(members) == 2 and all(isinstance(m, h5py.h5t.TypeFloatID) for m in members):
                return  # complex
            if references:
                for member in members:
                    self.check_type(member, where, references=True)
                return
        if isinstance(tid, h5py.h5t.TypeVlenID) and references:
            self.check_type(tid.get_super(), where, references=True)
            return
        if isinstance(tid, h5py.h5t.TypeReferenceID) and references:
            return
        kind = _CLASS_NAMES.get(tid.get_class(), tid.get_class())
        raise Refusal(f"{where!r} has an HDF5 type of class {kind} ({size} bytes), which bayes_loco.save "
                      "never writes")


_CLASS_NAMES = {h5py.h5t.INTEGER: "integer", h5py.h5t.FLOAT: "float", h5py.h5t.STRING: "string",
                h5py.h5t.BITFIELD: "bitfield", h5py.h5t.OPAQUE: "opaque", h5py.h5t.COMPOUND: "compound",
                h5py.h5t.REFERENCE: "reference", h5py.h5t.ENUM: "enum", h5py.h5t.VLEN: "variable-length",
                h5py.h5t.ARRAY: "array", h5py.h5t.TIME: "time"}


def _address(obj) -> tuple[int, int]:
    """Where the object ``obj`` lives in its file, the same under every name linked to it."""
    info = h5py.h5o.get_info(obj.id)
    return info.fileno, info.addr


def _count(space) -> int:
    """The number of elements of an HDF5 dataspace (0 for a null one)."""
    kind = space.get_simple_extent_type()
    if kind == h5py.h5s.NULL:
        return 0
    if kind == h5py.h5s.SCALAR:
        return 1
    count = 1
    for n in space.shape:
        count *= int(n)
    return count
