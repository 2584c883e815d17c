#!/usr/bin/env bash
# The tour: a small ImageNet-shaped sample -> shards + DALI indexes -> verify -> DALI into training steps.
# Usage: scripts/demo.sh [WORK_DIR]   (default: ./demo-output; it is replaced)
source "$(dirname "$0")/_venv.sh"
ensure_venv tf,dali
ensure_dali_tf_plugin
WORK="${1:-$ROOT/demo-output}"
rm -rf "$WORK"
mkdir -p "$WORK"
IB="$VENV/bin/imagenet-build"

echo "== sample: a small ImageNet-shaped tree"
"$IB" sample "$WORK/sample" --classes 8 --per-class 40 --validation-per-class 5

echo "== convert: slim-format shards, DALI indexes, manifest"
"$IB" convert \
  --from "$WORK/sample" \
  --train-shards 8 --validation-shards 4 --layout-threads 4 \
  --output-dir "$WORK/shards"

echo "== convert again: resumes, nothing to redo"
"$IB" convert \
  --from "$WORK/sample" \
  --train-shards 8 --validation-shards 4 --layout-threads 4 \
  --output-dir "$WORK/shards" | grep "shards written"

echo "== verify: framing, CRCs, indexes, manifest, every record"
"$IB" verify "$WORK/shards"

echo "== trainer-check: read back through DALI (CPU) into a few training steps"
"$IB" trainer-check "$WORK/shards" --device cpu --num-shards 2
echo "demo done: $WORK"
