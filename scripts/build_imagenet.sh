#!/usr/bin/env bash
# One shot from the three ILSVRC2012 archives to verified, DALI-ready shards. Resumable.
#
# Usage: scripts/build_imagenet.sh ARCHIVE_DIR OUTPUT_DIR [convert option...]
#
# ARCHIVE_DIR holds ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and, if present,
# ILSVRC2012_bbox_train_v2.tar.gz. OUTPUT_DIR receives:
#   tfrecord/            the shards, dali_idx/ and manifest.json (imagenet-build convert)
#   build.log            everything this script and the tool printed, run after run
#   verify.json          the last verify report; verified.sha256 marks the manifest it passed
#   trainer-check.json   the trainer-check report, when TensorFlow and DALI are installed
# Run it again after an interruption: convert keeps the shards its manifest vouches for, and a
# build that was already verified is not verified again (the manifest pins every shard's sha256,
# and convert rechecks them, so an unchanged manifest means the very bytes verified before).
# Environment: IMAGENET_BUILD (the command, default imagenet-build on PATH),
#   SKIP_TRAINER_CHECK=1 to leave trainer-check out.
set -euo pipefail

die() { echo "error: $*" >&2; exit 1; }

[ $# -ge 2 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
ARCHIVES="$1"
OUT="$2"
shift 2

IB="${IMAGENET_BUILD:-imagenet-build}"
command -v "$IB" >/dev/null 2>&1 || die "'$IB' is not on PATH. Install it: pip install 'imagenet-build[tf,dali]' \
(or, in its repository, pip install -c constraints.txt '.[tf,dali]'); without TensorFlow and DALI the build still runs, trainer-check is skipped."

TRAIN="$ARCHIVES/ILSVRC2012_img_train.tar"
VAL="$ARCHIVES/ILSVRC2012_img_val.tar"
BBOX="$ARCHIVES/ILSVRC2012_bbox_train_v2.tar.gz"
[ -d "$ARCHIVES" ] || die "$ARCHIVES: no such folder (it should hold the ILSVRC2012 archives)"
[ -f "$TRAIN" ] || die "$TRAIN: missing. Download ILSVRC2012_img_train.tar (147,897,477,120 bytes) from image-net.org into $ARCHIVES"
[ -f "$VAL" ] || die "$VAL: missing. Download ILSVRC2012_img_val.tar (6,744,924,160 bytes) from image-net.org into $ARCHIVES"

mkdir -p "$OUT"
LOG="$OUT/build.log"
# tee ignores Ctrl-C (and docker stop), so the build's last words still reach the terminal and the log
exec > >(trap "" INT TERM; exec tee -a "$LOG") 2>&1
echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') build_imagenet.sh $ARCHIVES $OUT $*"

size_of() { stat -c %s "$1" 2>/dev/null || stat -f %z "$1"; }
check_size() {  # the public sizes of the official archives (no checksums are published with them)
  local file="$1" official="$2" size
  size=$(size_of "$file")
  if [ "$size" = "$official" ]; then
    echo "ok: $(basename "$file"): official size ($size bytes)"
  else
    echo "note: $(basename "$file") is $size bytes, the official archive $official: not the official file;" \
         "building anyway (convert checks the archive itself)"
  fi
}
check_size "$TRAIN" 147897477120
check_size "$VAL" 6744924160
BBOX_ARGS=()
if [ -f "$BBOX" ]; then
  BBOX_ARGS=(--bbox-tar "$BBOX")
  echo "ok: $(basename "$BBOX"): boxes will be read from it"
else
  echo "note: no $(basename "$BBOX") in $ARCHIVES: records will carry no boxes"
fi

# Free space: the shards take about what the two image archives take; count what is already there.
SHARDS="$OUT/tfrecord"
need=$(( $(size_of "$TRAIN") + $(size_of "$VAL") ))
have_done=$(du -sb "$SHARDS" 2>/dev/null | cut -f1 || echo 0)
need=$(( (need - ${have_done:-0}) * 105 / 100 ))
free=$(df -P -B1 "$OUT" | awk 'NR == 2 {print $4}')
if [ "$need" -gt "$free" ]; then
  die "$OUT: about $(( need / 1000000000 + 1 )) GB more are needed, $(( free / 1000000000 )) GB are free. Free some space or choose another OUTPUT_DIR."
fi
echo "ok: free space: $(( free / 1000000000 )) GB, about $(( need / 1000000000 + 1 )) GB needed"

echo "== convert"
"$IB" convert --train-tar "$TRAIN" --validation-tar "$VAL" "${BBOX_ARGS[@]}" --output-dir "$SHARDS" "$@"

echo "== verify"
manifest_sum=$(sha256sum "$SHARDS/manifest.json" | cut -d' ' -f1)
if [ -f "$OUT/verified.sha256" ] && [ "$(cat "$OUT/verified.sha256")" = "$manifest_sum" ]; then
  echo "already verified (manifest unchanged since): $OUT/verify.json"
else
  rm -f "$OUT/verified.sha256"
  if "$IB" verify "$SHARDS" --json > "$OUT/verify.json"; then
    echo "$manifest_sum" > "$OUT/verified.sha256"
    echo "verify: sound ($OUT/verify.json)"
  else
    "$IB" verify "$SHARDS" --quick || true  # the readable report, for the log
    die "verify found problems: $OUT/verify.json"
  fi
fi

echo "== trainer-check"
PY=$(head -n 1 "$(command -v "$IB")" | sed -n 's/^#!//p')
if [ "${SKIP_TRAINER_CHECK:-0}" = 1 ]; then
  echo "skipped (SKIP_TRAINER_CHECK=1)"
elif [ -n "$PY" ] && $PY -c "import tensorflow, nvidia.dali.plugin.tf" >/dev/null 2>&1; then
  "$IB" trainer-check "$SHARDS" --json > "$OUT/trainer-check.json" || die "trainer-check failed: $OUT/trainer-check.json"
  echo "trainer-check: the data trains ($OUT/trainer-check.json)"
else
  echo "skipped: TensorFlow and DALI (with its TF plugin) are not installed beside $IB"
fi
echo "== done: $SHARDS"
