"""Sphinx configuration of the bayes_loco documentation site (``bash scripts/build_docs.sh``)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bayes_loco  # noqa: E402

project = "bayes_loco"
author = "The bayes_loco maintainers"
copyright = "2026, The bayes_loco maintainers"
release = version = bayes_loco.__version__

extensions = [
    "myst_nb",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
]
# The notebooks come from notebooks/ through _notebooks/ (build_docs.sh copies them there, executed
# or not); a site built by the test suite renders them as committed, without outputs.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "data", "figures/*.pdf", "README.md"]
suppress_warnings = ["mystnb.unknown_mime_type"]

autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

html_theme = "pydata_sphinx_theme"
html_title = f"bayes_loco {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = []
html_last_updated_fmt = None
nitpicky = False
os.environ.setdefault("BAYES_LOCO_QUICK", "1")
