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
