#!/usr/bin/env bash
# Set up .venv with the test extras (TensorFlow CPU, DALI, its TF plugin) and run the tests.
# Usage: scripts/test.sh [pytest args...]
source "$(dirname "$0")/_venv.sh"
ensure_venv test
# The TF plugin compiles against the installed TensorFlow, so it comes after it, without build isolation.
if ! "$PY" -m pip show --quiet nvidia-dali-tf-plugin-cuda120 >/dev/null 2>&1; then
  echo "building the DALI TensorFlow plugin (about 30 s)" >&2
  "$PY" -m pip install --quiet --no-build-isolation nvidia-dali-tf-plugin-cuda120
fi
cd "$ROOT"
exec "$PY" -m pytest "$@"
