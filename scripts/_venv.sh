# Shared by demo.sh and test.sh: make .venv (once) and install the package into it.
# Usage: source scripts/_venv.sh; ensure_venv [EXTRAS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

ensure_venv() {
  local extras="${1:-}"
  if [ ! -x "$PY" ]; then
    echo "setting up $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip
  fi
  local target="$ROOT"
  [ -n "$extras" ] && target="$ROOT[$extras]"
  "$PY" -m pip install --quiet -e "$target"
}

# DALI's TensorFlow plugin compiles against the installed TensorFlow, so it comes after both,
# without build isolation (about 30 s, needs g++).
ensure_dali_tf_plugin() {
  if ! "$PY" -m pip show --quiet nvidia-dali-tf-plugin-cuda120 >/dev/null 2>&1; then
    echo "building the DALI TensorFlow plugin (about 30 s)" >&2
    "$PY" -m pip install --quiet --no-build-isolation nvidia-dali-tf-plugin-cuda120
  fi
}
