"""Sphinx configuration of the bayes_loco documentation site (``bash scripts/build_docs.sh``).

The tutorials are the notebooks of ``notebooks/``: each is copied into ``docs/tutorials/`` (gitignored)
with a note saying how it was run, and myst-nb executes it with a cache (jupyter-cache, keyed on the
code cells), so a second build re-executes only the notebooks whose code changed.

Environment:

- ``BAYES_LOCO_QUICK``: ``1`` (the default here) runs the notebooks at their shrunk sizes, as the test
  suite does (about 7 minutes on two cores, uncached); ``0`` runs them at full size (about an hour).
  Each mode has its own cache.
- ``BAYES_LOCO_DOCS_EXECUTE``: ``0`` renders the notebooks and the landing page without executing them
  (the test suite builds the site this way: ``tests/test_notebooks.py`` executes the notebooks).
"""

import json
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
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

# ------------------------------------------------------------------------------------------ notebooks

QUICK = os.environ.get("BAYES_LOCO_QUICK", "1") != "0"
EXECUTE = os.environ.get("BAYES_LOCO_DOCS_EXECUTE", "1") != "0"


def _mode_note(name: str) -> str:
    """The note under a tutorial's title: how its outputs were made, and how to run it."""
    if not EXECUTE:
        first = ("This page shows the notebook as committed, without its outputs (the site was built with "
                 "`BAYES_LOCO_DOCS_EXECUTE=0`).")
    elif QUICK:
        first = ("The outputs on this page were computed when the site was built, in QUICK mode "
                 "(`BAYES_LOCO_QUICK=1`): the small sizes the notebook's first cells name, as in the "
                 "test suite.")
    else:
        first = ("The outputs on this page were computed when the site was built, at full size "
                 "(`BAYES_LOCO_QUICK=0`).")
    return (f"```{{note}}\n{first} Run it yourself with `jupyter lab notebooks/{name}`, or at full size with "
            f"`bash scripts/render_notebooks.sh notebooks/{name}`.\n```")


def _copy_notebooks() -> None:
    """notebooks/*.ipynb → docs/tutorials/, a note on the mode after the title; rewritten only if changed.

    Links from a notebook to the documentation (``../docs/results/coverage.md``, right in Jupyter) are
    made relative to the copy (``../results/coverage.md``).
    """
    target = DOCS / "tutorials"
    for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(source.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                cell["source"] = text.replace("](../docs/", "](../")
        note = {"cell_type": "markdown", "id": "bayes-loco-mode-note", "metadata": {},
                "source": _mode_note(source.name)}
        nb["cells"].insert(1, note)
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        copy = target / source.name
        if not copy.exists() or copy.read_text(encoding="utf-8") != text:
            copy.write_text(text, encoding="utf-8")
    for stale in target.glob("*.ipynb"):
        if not (ROOT / "notebooks" / stale.name).exists():
            stale.unlink()


_copy_notebooks()

# The kernels import this checkout's bayes_loco, run at the chosen size with one BLAS thread (on a shared
# two-core machine OpenBLAS's spinning threads made the notebooks ten times slower), and use the bundled
# stand-ins, not a user's files.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
os.environ["BAYES_LOCO_QUICK"] = "1" if QUICK else "0"
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"
for _name in ("PERSONALLLM_TRAIN", "PERSONALLLM_TEST", "BAYES_LOCO_RESULTS", "BAYES_LOCO_FULL_GRID",
              "PRISM_FOLDER"):
    os.environ.pop(_name, None)
# Figures: the inline backend's PNGs at twice the pixels (sharp on any screen), shown at their size.
os.environ["IPYTHONDIR"] = str(DOCS / "_ipython")

nb_execution_mode = "cache" if EXECUTE else "off"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache" / ("quick" if QUICK else "full"))
nb_execution_timeout = 1800 if QUICK else 14400
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_merge_streams = True
# Warnings a cell prints go to stderr with the path of the file that raised them: not on the site.
nb_output_stderr = "remove"
nb_render_image_options = {"align": "center"}

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3
myst_dmath_double_inline = True
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_ipython", "data", "figures/*.pdf", "README.md", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

# ------------------------------------------------------------------------------------------ reference

# The pages whose autosummary tables get a generated page per name (listed, not True: on an incremental
# build Sphinx's list of documents is the previous build's, and a new page's names would get none).
autosummary_generate = sorted(str(p.relative_to(DOCS)) for p in (DOCS / "reference").glob("*.md"))
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()
templates_path = ["_templates"]

# ------------------------------------------------------------------------------------------ HTML

html_theme = "pydata_sphinx_theme"
html_title = f"bayes_loco {release}"
_TOC = ["page-toc"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    # The tutorials and the landing page use the whole width for their figures; a page matching no
    # pattern has no right-hand sidebar.
    "secondary_sidebar_items": {"howto/*": _TOC, "explanation/*": _TOC, "results/*": _TOC,
                                "reference/*": _TOC, "reference/generated/*": _TOC, "design": _TOC,
                                "changelog": _TOC, "reference/cli": []},
}
# The landing page and the tutorials use the whole width (the tutorials' own index links them all).
# Only the reference keeps a left-hand navigation (its list of names); the other sections have
# a few pages each, reached from the top bar, and their tables, code and figures need the width.
html_sidebars = {"index": [], "tutorials/0*": [], "howto/*": [], "results/*": [],
                 "explanation/*": [], "design": [], "changelog": []}
html_static_path = ["_static"]
html_css_files = ["bayes_loco.css"]
html_last_updated_fmt = None
nitpicky = False


# ------------------------------------------------------------------------------------------ docstrings

# Docstrings cite the documentation by path ("docs/design.md, convention 6"), which reads well in a
# terminal or Jupyter; on the site the path becomes a link named by the page's title.
_DOC_PATH = re.compile(r"(?<!`)docs/((?:results|howto|reference|explanation|tutorials)/[\w-]+|design)\.md")


def _link_doc_paths(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        lines[i] = _DOC_PATH.sub(lambda m: f":doc:`/{m.group(1)}`", line)  # the page's title


def setup(app):
    app.connect("autodoc-process-docstring", _link_doc_paths)
