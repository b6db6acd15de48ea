#!/usr/bin/env bash
# The weekly-style check that an unpinned install still passes: a new virtual environment, torch
# 2.13.0 (CPU) first, then everything the tests need at the newest versions the ranges of
# pyproject.toml and constraints/ranges.txt allow (no lock), then the test suite.
#   bash scripts/check_unpinned.sh [VENV_DIR] [pytest args]
# VENV_DIR defaults to a new temporary folder, removed afterwards. Not run by CI: run it before
# refreshing the lock (scripts/lock.sh), or on a schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$venv" ]; then
  venv=$(mktemp -d)/venv
  trap 'rm -rf "$(dirname "$venv")"' EXIT
fi
python3 -m venv "$venv"
export PYTHON="$venv/bin/python"
"$PYTHON" -m pip install -q --upgrade pip
SIRERAG_UNPINNED=1 bash scripts/test.sh "$@"
