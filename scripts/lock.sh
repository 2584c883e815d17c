#!/usr/bin/env bash
# Write constraints.txt: resolve every extra together in a fresh virtual environment, the way
# scripts/test.sh installs them but without the old constraints, and pin what came out.
# Run it after changing a dependency in pyproject.toml, then scripts/test.sh; commit both files.
# The pins hold for this Python version only (each line says so): on another, pip resolves freely.
# --keep: resolve within the pins already there (only what is new is resolved, nothing pinned moves).
# Usage: scripts/lock.sh [--keep]
source "$(dirname "$0")/_venv.sh"
VENV="$(mktemp -d)/venv"
PY="$VENV/bin/python"
if [ "${1:-}" = "--keep" ]; then
  KEPT="$(dirname "$VENV")/kept.txt"
  grep -v "^#" "$ROOT/constraints.txt" > "$KEPT"
  PINS=(-c "$KEPT")
else
  PINS=()
fi
trap 'rm -rf "$(dirname "$VENV")"' EXIT
ensure_venv test,gcs,mutation,dataflow
ensure_dali_tf_plugin

version="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
{
  echo "# Exact versions of one environment holding every extra (test, gcs, mutation, dataflow) and DALI's TF plugin,"
  echo "# resolved together on Python $version. scripts/_venv.sh installs within them; so do the Docker images."
  echo "# Regenerate with scripts/lock.sh (never edit by hand), then run scripts/test.sh."
  "$PY" -m pip freeze --all --exclude-editable | grep -v "^#" | LC_ALL=C sort -f | sed "s/\$/ ; python_version == \"$version\"/"
} > "$ROOT/constraints.txt"
echo "wrote $ROOT/constraints.txt ($(grep -vc '^#' "$ROOT/constraints.txt") pins, Python $version)"

# What remote workers install besides Beam (Dataflow: --requirements_file ./worker-requirements.txt): every package
# imagenet-build and its storage extras need, at the versions just pinned. Beam stages each with --no-deps, so the
# list is the whole closure, resolved from constraints.txt.
"$PY" -m pip install --quiet --dry-run --ignore-installed --report "$(dirname "$VENV")/workers.json" \
  -c "$ROOT/constraints.txt" "$ROOT[s3,gcs]"
{
  echo "# What a remote worker of --runner beam installs besides Beam (Dataflow: --requirements_file"
  echo "# ./worker-requirements.txt, with --setup_file ./pyproject.toml for imagenet-build itself): the packages"
  echo "# imagenet-build and its s3/gcs extras need, pinned as constraints.txt pins them (written by scripts/lock.sh)."
  "$PY" -c 'import json, sys
report = json.load(open(sys.argv[1]))
for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
    if item["metadata"]["name"] != "imagenet-build":
        print("%s==%s" % (item["metadata"]["name"], item["metadata"]["version"]))' "$(dirname "$VENV")/workers.json"
} > "$ROOT/worker-requirements.txt"
echo "wrote $ROOT/worker-requirements.txt ($(grep -vc '^#' "$ROOT/worker-requirements.txt") packages)"
