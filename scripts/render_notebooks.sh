#!/usr/bin/env bash
# Execute the example notebooks at full size and render each to HTML in notebooks/html/ (gitignored).
#
#   bash scripts/render_notebooks.sh                      # all of notebooks/*.ipynb
#   bash scripts/render_notebooks.sh notebooks/02_bayesian_road.ipynb
#
# The notebooks run at full size: BAYES_LOCO_QUICK is unset here. These pass through to them:
#   BAYES_LOCO_FULL_GRID=1      03, 04 and 05 run the command line's whole studies (hours)
#   BAYES_LOCO_RESULTS=<dir>    03 and 04 read <dir>/<study>.csv from `bayes-loco run ... --out <dir>`
#   PERSONALLLM_TRAIN, PERSONALLLM_TEST   05 uses your copy of the benchmark instead of the stand-in
#   CELL_TIMEOUT                seconds any one cell may run (default 14400)
#   JUPYTER                     the jupyter to use (default .venv/bin/jupyter)
# The committed .ipynb files are not modified: nbconvert writes only the HTML.
set -euo pipefail
cd "$(dirname "$0")/.."

JUPYTER=${JUPYTER:-.venv/bin/jupyter}
CELL_TIMEOUT=${CELL_TIMEOUT:-14400}
OUT=notebooks/html

unset BAYES_LOCO_QUICK MPLBACKEND
# One BLAS thread per process unless told otherwise: the problems are small, and on a shared machine
# OpenBLAS's spinning threads slowed the fits tenfold. The studies' process pools use every core.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
       MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}

if [ "$#" -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/*.ipynb); fi
mkdir -p "$OUT"
total_start=$(date +%s)
for nb in "${notebooks[@]}"; do
    start=$(date +%s)
    "$JUPYTER" nbconvert --to html --execute --output-dir "$OUT" \
        --ExecutePreprocessor.timeout="$CELL_TIMEOUT" --ExecutePreprocessor.kernel_name=python3 "$nb"
    echo "rendered $nb -> $OUT/$(basename "${nb%.ipynb}").html in $(( $(date +%s) - start )) s"
done
echo "all rendered in $(( $(date +%s) - total_start )) s"
