#!/usr/bin/env bash
# Create .venv with a Python >= 3.12 and install bayes_loco with its dev extras.
# PyMC >= 6 and ArviZ >= 1 need Python 3.12+; on 3.11 pip would silently install PyMC 5 / ArviZ 0.x.
set -euo pipefail
cd "$(dirname "$0")/.."

ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }

find_python() {
  local c
  for c in "${PYTHON:-}" python3.13 python3.12 python3 python; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && ok "$c" && { command -v "$c"; return 0; }
  done
  # pyenv keeps other versions out of PATH; look there too.
  local root
  root=$( (pyenv root 2>/dev/null) || echo "$HOME/.pyenv")
  for c in $(ls -d "$root"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
    ok "$c" && { echo "$c"; return 0; }
  done
  return 1
}

if [ -x .venv/bin/python ] && ok .venv/bin/python; then
  py=.venv/bin/python
else
  if ! base=$(find_python); then
    echo "bootstrap: no Python >= 3.12 found (tried \$PYTHON, python3.13, python3.12, python3, python and pyenv)." >&2
    echo "bootstrap: install Python 3.12 or newer, or set PYTHON=/path/to/python3.12, then rerun." >&2
    exit 1
  fi
  echo "bootstrap: creating .venv with $base ($("$base" --version 2>&1))"
  rm -rf .venv
  "$base" -m venv .venv
  py=.venv/bin/python
fi
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet -e ".[dev]"
echo "bootstrap: ready ($("$py" --version), bayes_loco $("$py" -c 'import bayes_loco; print(bayes_loco.__version__)'))"
