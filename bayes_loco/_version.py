"""The installed version of bayes_loco, in a module of its own.

Core modules (``io``, ``_ioformat``, ``trees``, ``bayes.fit``) stamp it on what
they write; importing it from here rather than from the package face keeps them
below ``bayes_loco/__init__`` in the import graph.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bayes_loco")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
