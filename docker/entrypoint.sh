#!/bin/sh
# The image's entrypoint: `build ARCHIVE_DIR OUTPUT_DIR [convert option...]` runs the one-shot
# build script; anything else is an imagenet-build command (`verify /out/tfrecord`, `--help`, ...).
set -e
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = build ]; then
  shift
  # beside this file in the image; in scripts/ of a repository checkout
  for script in "$HERE/build_imagenet.sh" "$HERE/../scripts/build_imagenet.sh"; do
    [ -x "$script" ] && exec "$script" "$@"
  done
  echo "error: build_imagenet.sh not found beside $0" >&2
  exit 1
fi
exec imagenet-build "$@"
