#!/usr/bin/env bash
# One shot from ImageNet as downloaded to verified, DALI-ready shards. Resumable.
#
# Usage: scripts/build_imagenet.sh SOURCE OUTPUT_DIR [convert option...]
#
# SOURCE is a folder holding ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and, if present,
# ILSVRC2012_bbox_train_v2.tar.gz (their sizes are checked against the official ones), or any
# other copy of ImageNet that `imagenet-build convert --from` knows (a folder or a file: Kaggle's
# zip, Hugging Face's archives, ...; see the README). OUTPUT_DIR receives:
#   tfrecord/            the shards, dali_idx/ and manifest.json (imagenet-build convert), and beside them
#                        what the checks leave for `imagenet-build report`: verify.json (the last verify
#                        report), trainer-check.json and trainer-check.png (when TensorFlow and DALI, or
#                        PyTorch, are installed) and report.html (when the report extra is)
#   build.log            everything this script and the tool printed, run after run
#   verified.sha256      the manifest verify last passed
# Run it again after an interruption: convert keeps the shards its manifest vouches for, and a
# build that was already verified is not verified again (the manifest pins every shard's sha256,
# and convert rechecks them, so an unchanged manifest means the very bytes verified before).
# Environment: IMAGENET_BUILD (the command, default imagenet-build on PATH),
#   SKIP_TRAINER_CHECK=1 to leave trainer-check out, TRAINER_CHECK_FRAMEWORK=dali|dali-tf|dali-torch|torch to choose its reader
#   (default: DALI when TensorFlow and DALI's TF plugin are installed, else PyTorch when it is).
set -euo pipefail

die() { echo "error: $*" >&2; exit 1; }

# without its two arguments: the comment block above, which ends before the first line of code
[ $# -ge 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
ARCHIVES="$1"
OUT="$2"
shift 2

IB="${IMAGENET_BUILD:-imagenet-build}"
command -v "$IB" >/dev/null 2>&1 || die "'$IB' is not on PATH. Install it in a clone of imagenet-build: pip install -c constraints.txt '.[tf,dali]' \
(or '.[torch]' for the PyTorch trainer check); without those extras the build still runs, trainer-check is skipped."

TRAIN="$ARCHIVES/ILSVRC2012_img_train.tar"
VAL="$ARCHIVES/ILSVRC2012_img_val.tar"
BBOX="$ARCHIVES/ILSVRC2012_bbox_train_v2.tar.gz"
[ -e "$ARCHIVES" ] || die "$ARCHIVES: no such folder or file (it should hold the ILSVRC2012 archives, or another copy of ImageNet)"
ILSVRC=0  # the official archives (or nothing yet): their sizes are checked, and a missing one is named
if [ -d "$ARCHIVES" ] && { [ -f "$TRAIN" ] || [ -f "$VAL" ] || [ -z "$(ls -A "$ARCHIVES")" ]; }; then
  ILSVRC=1
fi
if [ "$ILSVRC" = 1 ]; then
  [ -f "$TRAIN" ] || die "$TRAIN: missing. Download ILSVRC2012_img_train.tar (147,897,477,120 bytes) from image-net.org into $ARCHIVES"
  [ -f "$VAL" ] || die "$VAL: missing. Download ILSVRC2012_img_val.tar (6,744,924,160 bytes) from image-net.org into $ARCHIVES"
fi

mkdir -p "$OUT"
LOG="$OUT/build.log"
# tee ignores Ctrl-C (and docker stop), so the build's last words still reach the terminal and the log;
# the script waits for it at exit: a container stops, and its last processes are killed, as soon as this
# script ends, and tee would lose what it had not yet written
exec > >(trap "" INT TERM; exec tee -a "$LOG") 2>&1
TEE_PID=${!:-}  # bash 4.4 and later; older ones do not say, and do not wait
trap 'exec >&- 2>&-; [ -z "$TEE_PID" ] || wait "$TEE_PID" 2>/dev/null || true' EXIT
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
SOURCE_ARGS=()
if [ "$ILSVRC" = 1 ]; then
  check_size "$TRAIN" 147897477120
  check_size "$VAL" 6744924160
  SOURCE_ARGS=(--train-tar "$TRAIN" --validation-tar "$VAL")
  if [ -f "$BBOX" ]; then
    SOURCE_ARGS+=(--bbox-tar "$BBOX")
    echo "ok: $(basename "$BBOX"): boxes will be read from it"
  else
    echo "note: no $(basename "$BBOX") in $ARCHIVES: records will carry no boxes"
  fi
  source_bytes=$(( $(size_of "$TRAIN") + $(size_of "$VAL") ))
else
  SOURCE_ARGS=(--from "$ARCHIVES")  # convert tells which copy it is, or says why not
  echo "ok: $ARCHIVES: not the ILSVRC2012 archives; convert --from will tell which copy of ImageNet it is"
  source_bytes=$(du -sbL "$ARCHIVES" | cut -f1)
fi

# Free space: the shards take about what the images take; count what is already there.
SHARDS="$OUT/tfrecord"
need=$source_bytes
have_done=$(du -sb "$SHARDS" 2>/dev/null | cut -f1 || echo 0)
need=$(( (need - ${have_done:-0}) * 105 / 100 ))
[ "$need" -ge 0 ] || need=0
free=$(df -P -B1 "$OUT" | awk 'NR == 2 {print $4}')
human() {  # a byte count at a glance, as convert says it: 50 MB, 63 MB, 1.4 GB, 140 GB
  awk -v b="$1" 'BEGIN { split("TB GB MB kB", unit, " "); split("1e12 1e9 1e6 1e3", size, " ")
    for (i = 1; i <= 4; i++) if (b >= size[i] + 0) { v = b / size[i]; printf(v < 10 ? "%.1f %s\n" : "%.0f %s\n", v, unit[i]); exit }
    printf("%d bytes\n", b) }'
}
if [ "$need" -gt "$free" ]; then
  die "$OUT: about $(human "$need") more are needed, $(human "$free") are free. Free some space or choose another OUTPUT_DIR."
fi
echo "ok: free space: $(human "$free"), about $(human "$need") more needed"

echo "== convert"
"$IB" convert "${SOURCE_ARGS[@]}" --output-dir "$SHARDS" "$@"

echo "== verify"
manifest_sum=$(sha256sum "$SHARDS/manifest.json" | cut -d' ' -f1)
if [ -f "$OUT/verified.sha256" ] && [ "$(cat "$OUT/verified.sha256")" = "$manifest_sum" ]; then
  echo "already verified (manifest unchanged since): $SHARDS/verify.json"
else
  rm -f "$OUT/verified.sha256"
  if "$IB" verify "$SHARDS" --json > "$SHARDS/verify.json"; then
    echo "$manifest_sum" > "$OUT/verified.sha256"
    echo "verify: sound ($SHARDS/verify.json)"
  else
    "$IB" verify "$SHARDS" --quick || true  # the readable report, for the log
    die "verify found problems: $SHARDS/verify.json"
  fi
fi

echo "== trainer-check"
PY=$(head -n 1 "$(command -v "$IB")" | sed -n 's/^#!//p')
if [ "${SKIP_TRAINER_CHECK:-0}" = 1 ]; then
  echo "skipped (SKIP_TRAINER_CHECK=1)"
else
  # whichever reader is installed beside the tool: DALI (into TensorFlow, else into PyTorch), else PyTorch
  FRAMEWORK="${TRAINER_CHECK_FRAMEWORK:-}"
  if [ -z "$FRAMEWORK" ] && [ -n "$PY" ]; then
    if $PY -c "import tensorflow, nvidia.dali.plugin.tf" >/dev/null 2>&1 ||
       $PY -c "import nvidia.dali, torch, torchvision" >/dev/null 2>&1; then
      FRAMEWORK=dali
    elif $PY -c "import torch, torchvision" >/dev/null 2>&1; then
      FRAMEWORK=torch
    fi
  fi
  if [ -n "$FRAMEWORK" ]; then
    "$IB" trainer-check "$SHARDS" --framework "$FRAMEWORK" --json --show "$SHARDS/trainer-check.png" \
      > "$SHARDS/trainer-check.json" || die "trainer-check (--framework $FRAMEWORK) failed: $SHARDS/trainer-check.json"
    echo "trainer-check: the data trains (--framework $FRAMEWORK, $SHARDS/trainer-check.json)"
  else
    echo "skipped: neither DALI (with TensorFlow and its TF plugin, or with PyTorch) nor PyTorch and torchvision are installed beside $IB"
  fi
fi

echo "== report"
if [ -n "$PY" ] && $PY -c "import matplotlib" >/dev/null 2>&1; then
  "$IB" report "$SHARDS" || die "report listed problems: $SHARDS/report.html"
else
  echo "skipped: the report extra is not installed beside $IB (pip install -c constraints.txt '.[report]')"
fi
echo "== done: $SHARDS"
