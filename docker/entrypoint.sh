#!/bin/sh
# The image's entrypoint: `build SOURCE OUTPUT_DIR [convert option...]` runs the one-shot
# build script; anything else is an imagenet-build command (`verify /out/tfrecord`, `--help`, ...).
set -e
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = build ]; then
  shift
  out="${2:-}"
  if [ -n "$out" ] && [ -d "$out" ] && ! [ -w "$out" ]; then
    echo "error: $out is not writable by uid $(id -u) (it belongs to uid $(stat -c %u "$out")):" \
         "run the container as the folder's owner, e.g. docker run --user \"\$(id -u):\$(id -g)\" ..." >&2
    exit 1
  fi
  # beside this file in the image; in scripts/ of a repository checkout
  for script in "$HERE/build_imagenet.sh" "$HERE/../scripts/build_imagenet.sh"; do
    [ -x "$script" ] && exec "$script" "$@"
  done
  echo "error: build_imagenet.sh not found beside $0" >&2
  exit 1
fi
exec imagenet-build "$@"
