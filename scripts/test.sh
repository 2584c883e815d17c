#!/usr/bin/env bash
# Set up .venv with the test extras (TensorFlow CPU, DALI, its TF plugin, PyTorch) and run the tests,
# after ruff and mypy, then build the sample dataset and verify it as a user's CI would.
# Usage: scripts/test.sh [pytest args...]
source "$(dirname "$0")/_venv.sh"
ensure_venv test
ensure_dali_tf_plugin
cd "$ROOT"
echo "== ruff check imagenet_build tests benchmarks"
"$PY" -m ruff check imagenet_build tests benchmarks
echo "== mypy imagenet_build"
"$PY" -m mypy imagenet_build
echo "== lint-imports (the import contracts of pyproject.toml) and the size rule"
"$VENV/bin/lint-imports" --no-cache
"$PY" scripts/check_sizes.py
"$PY" -m pytest "$@"

echo "== sample -> convert -> verify"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
IB="$VENV/bin/imagenet-build"
"$IB" sample "$WORK/sample" >/dev/null
"$IB" convert --train-dir "$WORK/sample/train" --validation-dir "$WORK/sample/validation" \
  --labels-file "$WORK/sample/labels.txt" --validation-labels-file "$WORK/sample/validation_labels.txt" \
  --bounding-box-file "$WORK/sample/bboxes.csv" \
  --train-shards 4 --validation-shards 2 --layout-threads 2 --output-dir "$WORK/shards" >/dev/null
"$IB" verify "$WORK/shards" --deep
