#!/usr/bin/env bash
# A Phoenix server for the tests (tests/phoenix_server.py): arize-phoenix from PyPI in a virtual environment of its
# own, beside relmon's (its dependencies are not relmon's). Kept when present; scripts/test.sh calls this.
# Usage: scripts/phoenix_venv.sh [DIR] (default .venv-phoenix in the repository); PYTHON: the interpreter to use.
# uv installs it: pip took 2 min 51 s on a clean machine, uv 26 s (plus 35 s to install uv; 2026-12-03, 2 cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TARGET=${1:-.venv-phoenix}
# 13.9: the spans endpoint's trace_id filter, which the root-span look-up uses (workers/phoenix_annotations.py).
PHOENIX_REQUIREMENT="arize-phoenix>=13.9"
PYTHON=${PYTHON:-python}
if [ -x "$TARGET/bin/phoenix" ]; then
  exit 0
fi
if ! "$PYTHON" -m uv --version >/dev/null 2>&1; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check uv
fi
# --clear: what a run cut short left behind.
"$PYTHON" -m uv venv --quiet --clear --python "$PYTHON" "$TARGET"
# No --compile-bytecode (pip's way): compiling all of it took 36 s of CPU; the first `phoenix serve` compiles only
# what it imports (tests/phoenix_server.py waits for that).
"$PYTHON" -m uv pip install --quiet --python "$TARGET/bin/python" "$PHOENIX_REQUIREMENT"
