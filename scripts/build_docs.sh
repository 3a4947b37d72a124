#!/usr/bin/env bash
# Build the documentation site into docs/_build/html with Sphinx (myst-nb, numpydoc), warnings as errors.
#
#   bash scripts/build_docs.sh                              # tutorials executed at the QUICK sizes
#   BAYES_LOCO_QUICK=0 bash scripts/build_docs.sh           # tutorials executed at full size (an hour)
#   BAYES_LOCO_DOCS_EXECUTE=0 bash scripts/build_docs.sh    # nothing executed (what the test suite builds)
#
# myst-nb executes the tutorials (notebooks/*.ipynb, copied to docs/tutorials/ by docs/conf.py) and the
# pages with code cells, and caches their outputs in docs/_build/.jupyter_cache/, keyed on the code: a
# second build re-executes only what changed. On two shared cores the site took 11 minutes with an
# empty cache and under 2 minutes with a warm one. The committed notebooks are never modified.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
# Pages of documents that no longer exist would stay in the output; the doctrees and the cache stay.
rm -rf docs/_build/html docs/reference/generated
"$PYTHON" -m sphinx -W --keep-going -q -b html -d docs/_build/doctrees docs docs/_build/html "$@"
echo "site: docs/_build/html/index.html"
