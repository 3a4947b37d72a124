#!/usr/bin/env bash
# Build the documentation site into docs/_build/html with Sphinx (myst-nb, numpydoc), warnings as errors.
#
#   bash scripts/build_docs.sh                              # notebooks as committed (no outputs)
#   BAYES_LOCO_DOCS_EXECUTE=1 bash scripts/build_docs.sh    # notebooks executed in QUICK mode first
#
# The notebooks are copied to docs/_notebooks (gitignored); the committed ones are never modified.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
rm -rf docs/_notebooks docs/api/generated
mkdir -p docs/_notebooks
if [ "${BAYES_LOCO_DOCS_EXECUTE:-0}" = "1" ]; then
    export BAYES_LOCO_QUICK=1 MPLBACKEND=Agg OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
    for nb in notebooks/*.ipynb; do
        "$PYTHON" -m jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1800 \
            --ExecutePreprocessor.kernel_name=python3 --output-dir docs/_notebooks "$nb"
    done
else
    cp notebooks/*.ipynb docs/_notebooks/
fi
"$PYTHON" -m sphinx -W --keep-going -q -b html docs docs/_build/html "$@"
echo "site: docs/_build/html/index.html"
