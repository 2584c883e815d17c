# Shared by demo.sh and test.sh: make .venv (once) and install the package into it.
# Every pip call installs within constraints.txt, the exact versions of one resolved environment
# (scripts/lock.sh writes it), so that extras installed one after another still fit together.
# Usage: source scripts/_venv.sh; ensure_venv [EXTRAS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
PINS=(-c "$ROOT/constraints.txt")

ensure_venv() {
  local extras="${1:-}"
  if [ ! -x "$PY" ]; then
    echo "setting up $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade "${PINS[@]}" pip
  fi
  local target="$ROOT"
  [ -n "$extras" ] && target="$ROOT[$extras]"
  "$PY" -m pip install --quiet "${PINS[@]}" -e "$target"
}

# DALI's TensorFlow plugin compiles against the installed TensorFlow, so it comes after both,
# without build isolation (about 30 s, needs g++).
ensure_dali_tf_plugin() {
  if ! "$PY" -m pip show --quiet nvidia-dali-tf-plugin-cuda120 >/dev/null 2>&1; then
    echo "building the DALI TensorFlow plugin (about 30 s)" >&2
    "$PY" -m pip install --quiet --no-build-isolation "${PINS[@]}" 'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5'
  fi
}
