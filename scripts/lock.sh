#!/usr/bin/env bash
# Write constraints.txt: resolve every extra together in a fresh virtual environment, the way
# scripts/test.sh installs them but without the old constraints, and pin what came out.
# Run it after changing a dependency in pyproject.toml, then scripts/test.sh; commit both files.
# The pins hold for this Python version only (each line says so): on another, pip resolves freely.
# Usage: scripts/lock.sh
source "$(dirname "$0")/_venv.sh"
VENV="$(mktemp -d)/venv"
PY="$VENV/bin/python"
PINS=()
trap 'rm -rf "$(dirname "$VENV")"' EXIT
ensure_venv test,gcs,mutation
ensure_dali_tf_plugin

version="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
{
  echo "# Exact versions of one environment holding every extra (test, gcs, mutation) and DALI's TF plugin,"
  echo "# resolved together on Python $version. scripts/_venv.sh installs within them; so do the Docker images."
  echo "# Regenerate with scripts/lock.sh (never edit by hand), then run scripts/test.sh."
  "$PY" -m pip freeze --all --exclude-editable | grep -v "^#" | LC_ALL=C sort -f | sed "s/\$/ ; python_version == \"$version\"/"
} > "$ROOT/constraints.txt"
echo "wrote $ROOT/constraints.txt ($(grep -vc '^#' "$ROOT/constraints.txt") pins, Python $version)"
