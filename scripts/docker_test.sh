#!/usr/bin/env bash
# Build the Docker images from this repository and run them as a user would, on the sample's
# ILSVRC-shaped archives mounted read-only. For each image it checks that:
#   - `--help` works and the image runs as a non-root user by default;
#   - `build /archives /out` under --user UID:GID on a folder owned by that user gives shards and
#     DALI indexes byte-identical to the same convert run on the host, and `verify` passes inside;
#     `verify /out/tfrecord` works as the image's default user; in the GPU image the build's
#     trainer-check passes and `trainer-check --device cpu` passes on its own;
#   - the default user on a folder it cannot write is told to use --user (no traceback);
#   - in the CPU image, which holds no extra, `report` says in one line to build an image FROM it with the extra;
#   - a missing archive and a full output disk stop with one line, and a build killed mid-convert
#     (`docker kill`) or stopped by a full disk, run again, ends with the reference's bytes.
# Where Docker Hub cannot be reached, the base python:3.11-slim-bookworm is replaced by a STAND-IN
# made from Debian bookworm packages (docker/standin-base.sh); the output says so.
#
# Usage: scripts/docker_test.sh [cpu|gpu]...   (default: both images)
# Environment: PYTHON, an interpreter with imagenet_build importable, for the host's reference build
#   (default .venv/bin/python, made by scripts/test.sh or scripts/demo.sh); IMAGE_NAME, the images'
#   name (default imagenet-build: imagenet-build:latest and imagenet-build:gpu).
# Needs a Docker engine; the full-disk resume needs root or passwordless sudo (to mount a tmpfs).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE=python:3.11-slim-bookworm
KINDS=("$@")
[ ${#KINDS[@]} -gt 0 ] || KINDS=(cpu gpu)
PY="${PYTHON:-$ROOT/.venv/bin/python}"
NAME="${IMAGE_NAME:-imagenet-build}"
CONTAINER="imagenet-build-interrupted-$$"

die() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
step() { echo "== $*"; }

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info failed)" >&2; exit 3; }
"$PY" -c "import imagenet_build" 2>/dev/null || {
  echo "error: $PY cannot import imagenet_build: run scripts/test.sh first, or set PYTHON" >&2; exit 2; }

SUDO=""
[ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && SUDO="sudo -n"; } || SUDO=none
W="$(mktemp -d)"
MOUNTED=""
cleanup() {
  [ -z "$MOUNTED" ] || $SUDO umount "$MOUNTED" || true
  docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
  rm -rf "$W" 2>/dev/null || $SUDO rm -rf "$W" || true
}
trap cleanup EXIT

step "base image $BASE"
if docker pull -q "$BASE" >/dev/null 2>&1; then
  ok "$BASE pulled from Docker Hub (the official image)"
elif docker image inspect "$BASE" >/dev/null 2>&1; then
  echo "note: Docker Hub cannot be reached; using the $BASE already here"
else
  echo "note: Docker Hub cannot be reached; building a STAND-IN for $BASE from Debian packages"
  "$ROOT/docker/standin-base.sh" "$BASE"
fi
standin=$(docker image inspect -f '{{json .Config.Labels}}' "$BASE" | sed -n 's/.*"imagenet-build.stand-in":"\([^"]*\)".*/\1/p')
[ -z "$standin" ] || echo "STAND-IN base, not the official image: $standin"

step "sample archives and the host's reference build"
IB_HOST=("$PY" -m imagenet_build)
"${IB_HOST[@]}" sample "$W/archives" --tarballs >/dev/null
OPTS=(--train-shards 8 --validation-shards 4 --layout-threads 4 --workers 1)
label_opts() {  # $1: where the archives folder is seen
  echo --labels-file "$1/labels.txt" --validation-labels-file "$1/validation_labels.txt"
}
# shellcheck disable=SC2046
"${IB_HOST[@]}" convert --train-tar "$W/archives/ILSVRC2012_img_train.tar" \
  --validation-tar "$W/archives/ILSVRC2012_img_val.tar" --bbox-tar "$W/archives/ILSVRC2012_bbox_train_v2.tar.gz" \
  $(label_opts "$W/archives") "${OPTS[@]}" --output-dir "$W/reference" >/dev/null 2>&1
# the shards and indexes: not the manifest (it records times) nor what the checks leave beside them for `report`
digest() {
  (cd "$1" && find . -type f ! -name manifest.json ! -name verify.json ! -name trainer-check.json \
    ! -name trainer-check.png ! -name report.html | sort | xargs sha256sum)
}
digest "$W/reference" >"$W/reference.sha256"
ok "reference: $(wc -l <"$W/reference.sha256") shards and indexes"
same_as_reference() {  # $1: a tfrecord folder
  digest "$1" | diff -q - "$W/reference.sha256" >/dev/null
}
only_reference_bytes() {  # $1: a tfrecord folder where every file (temporary ones too) is one of the reference's
  ! digest "$1" | grep -v -x -F -f "$W/reference.sha256" >/dev/null
}

# The user the containers write as: the caller, or, when the caller is root, a uid with no account
# in the image (that is what a user's `--user "$(id -u):$(id -g)"` usually is).
if [ "$(id -u)" = 0 ]; then USER_SPEC=4321:4321; else USER_SPEC="$(id -u):$(id -g)"; fi
owned_dir() { mkdir -p "$1"; [ "$(id -u)" != 0 ] || chown "$USER_SPEC" "$1"; }

test_image() {
  local kind="$1" image dockerfile
  if [ "$kind" = gpu ]; then image="$NAME:gpu" dockerfile=docker/Dockerfile.gpu
  else image="$NAME:latest" dockerfile=docker/Dockerfile; fi
  local d="$W/$kind"
  mkdir -p "$d"
  local run=(docker run --rm --network none -v "$W/archives:/archives:ro")
  # shellcheck disable=SC2207
  ARGS=(/archives /out $(label_opts /archives) "${OPTS[@]}")
  IMAGE="$image"

  step "$kind image: docker build -f $dockerfile -t $image (--network host, for pip)"
  local t0=$SECONDS
  (cd "$ROOT" && docker build --network host -f "$dockerfile" -t "$image" .) >"$d/docker-build.log" 2>&1 ||
    { tail -30 "$d/docker-build.log"; die "$kind image: docker build failed"; }
  ok "$kind image built in $((SECONDS - t0)) s, $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}')"

  docker run --rm "$image" --help | grep -q convert || die "$kind image: --help"
  [ "$(docker run --rm --entrypoint id "$image" -u)" != 0 ] || die "$kind image: runs as root by default"
  ok "--help works; the default user is not root"

  step "$kind image: build /archives /out as --user $USER_SPEC"
  owned_dir "$d/out"
  "${run[@]}" --user "$USER_SPEC" -v "$d/out:/out" "$image" build "${ARGS[@]}" >"$d/build.out" 2>&1 ||
    { tail -30 "$d/build.out"; die "$kind image: build failed"; }
  grep -q "verify: sound" "$d/build.out" || die "$kind image: verify did not pass inside the container"
  same_as_reference "$d/out/tfrecord" || die "$kind image: shards or indexes differ from the host's build"
  ok "verify passed inside; shards and indexes byte-identical to the host's build"
  if [ "$kind" = gpu ]; then
    grep -q "trainer-check: the data trains" "$d/build.out" || die "gpu image: the build's trainer-check"
    "${run[@]}" --user "$USER_SPEC" -v "$d/out:/out:ro" "$image" trainer-check /out/tfrecord --device cpu \
      >"$d/trainer.out" 2>&1 || { tail -30 "$d/trainer.out"; die "gpu image: trainer-check --device cpu"; }
    ok "trainer-check passed (in the build, and alone with --device cpu)"
  fi
  "${run[@]}" -v "$d/out:/out:ro" "$image" verify /out/tfrecord >"$d/verify.out" 2>&1 ||
    { tail -30 "$d/verify.out"; die "$kind image: verify /out/tfrecord"; }
  ok "verify /out/tfrecord as the image's default user"
  if [ "$kind" = cpu ]; then  # the image holds no extra: report's matplotlib is missing, and the line says how
    local hint
    if hint=$("${run[@]}" -v "$d/out:/out:ro" "$image" report /out/tfrecord 2>&1); then
      die "cpu image: report ran without matplotlib"
    fi
    [[ "$hint" == "error: imagenet-build report needs matplotlib, which is not installed: the Docker image "* &&
       "$hint" == *"build one FROM it that does"* && "$hint" != *Traceback* ]] ||
      die "cpu image: report without its extra: $hint"
    ok "report without its extra: one line, an image built FROM this one to add it"
  fi

  step "$kind image: what goes wrong, and the rerun"
  local err
  run=("${run[@]}" -e SKIP_TRAINER_CHECK=1)  # trainer-check was proven above
  if [ "$(id -u)" != 1000 ]; then
    mkdir -p "$d/not-yours"
    if err=$("${run[@]}" -v "$d/not-yours:/out" "$image" build "${ARGS[@]}" 2>&1); then
      die "$kind image: the default user wrote into a folder it does not own"
    fi
    [[ "$err" == *"--user"* && "$err" != *Traceback* ]] || die "$kind image: unwritable output folder: $err"
    ok "default user on a folder it cannot write: told to use --user"
  fi

  mkdir -p "$d/partial"
  cp "$W/archives/ILSVRC2012_img_train.tar" "$W/archives/labels.txt" "$W/archives/validation_labels.txt" "$d/partial/"
  owned_dir "$d/out-missing"
  if err=$(docker run --rm --network none --user "$USER_SPEC" -v "$d/partial:/archives:ro" -v "$d/out-missing:/out" \
      "$image" build "${ARGS[@]}" 2>&1); then die "$kind image: built without the validation archive"; fi
  [[ "$err" == *"ILSVRC2012_img_val.tar: missing"* && "$err" != *Traceback* ]] || die "$kind image: missing archive: $err"
  ok "missing archive: $(grep -m1 'missing' <<<"$err" | cut -c1-90)..."

  if err=$("${run[@]}" --user "$USER_SPEC" --mount type=tmpfs,destination=/out,tmpfs-size=256k "$image" \
      build "${ARGS[@]}" 2>&1); then die "$kind image: built on a disk too small"; fi
  [[ "$err" == *"more are needed"* && "$err" != *Traceback* ]] || die "$kind image: small disk: $err"
  ok "output disk too small: refused before converting"

  owned_dir "$d/out-full"
  owned_dir "$d/out-full/tfrecord"
  if [ "$SUDO" = none ]; then
    echo "note: resume after a full disk not checked: mounting a small filesystem needs root or passwordless sudo"
  else
    $SUDO mount -t tmpfs -o "size=200k,mode=0777" tmpfs "$d/out-full/tfrecord"
    MOUNTED="$d/out-full/tfrecord"
    if err=$("${run[@]}" --user "$USER_SPEC" -v "$d/out-full:/out" "$image" build "${ARGS[@]}" 2>&1); then
      die "$kind image: built on a full disk"
    fi
    [[ "$err" == *"No space left on device"* && "$err" != *Traceback* ]] || die "$kind image: full disk: $err"
    only_reference_bytes "$d/out-full/tfrecord" || die "$kind image: a full disk left a file the reference does not have"
    $SUDO mount -o remount,size=64m "$d/out-full/tfrecord"
    "${run[@]}" --user "$USER_SPEC" -v "$d/out-full:/out" "$image" build "${ARGS[@]}" >"$d/full-rerun.out" 2>&1 ||
      { tail -30 "$d/full-rerun.out"; die "$kind image: rerun after the disk was enlarged"; }
    same_as_reference "$d/out-full/tfrecord" || die "$kind image: the rerun after a full disk differs from the reference"
    ok "full disk mid-convert: one line; with space again the rerun $(grep -o 'kept from before: [0-9]*' "$d/full-rerun.out"), same bytes"
    $SUDO umount "$d/out-full/tfrecord"
    MOUNTED=""
  fi

  # Stopped mid-convert: the container is slowed down (--cpus) so that `docker stop` (SIGINT, passed
  # on by tini) and `docker kill` (SIGKILL) land while shards are being written.
  interrupt "$image" "$d/out-stopped" stop
  grep -q "run the same command again to resume" "$d/out-stopped/build.log" ||
    die "$kind image: docker stop: the build did not say how to resume"
  grep -q '"index_sha256"' "$d/out-stopped/tfrecord/manifest.json" || die "$kind image: docker stop: no progress saved"
  rerun_same "$kind" "$d/out-stopped" "[1-9][0-9]*"
  ok "docker stop mid-convert: stopped in ${STOP_SECONDS} s, progress saved; the same command again: kept from before: $KEPT, same bytes"
  interrupt "$image" "$d/out-killed" kill
  rerun_same "$kind" "$d/out-killed" "[0-9]*"
  ok "docker kill mid-convert; the same command again: kept from before: $KEPT, same bytes"
}

interrupt() {  # IMAGE OUT stop|kill: start a slowed-down build, interrupt it once a shard is recorded
  local image="$1" out="$2" how="$3" waited=0 t0
  owned_dir "$out"
  docker run -d --name "$CONTAINER" --cpus 0.05 --network none --user "$USER_SPEC" -e SKIP_TRAINER_CHECK=1 \
    -v "$W/archives:/archives:ro" -v "$out:/out" "$image" build "${ARGS[@]}" >/dev/null
  # the manifest names a shard once the build has recorded it (the file itself appears a moment before:
  # a stop in between leaves that shard to the rerun)
  until grep -qs '"index_sha256"' "$out/tfrecord/manifest.json"; do
    [ "$(docker inspect -f '{{.State.Running}}' "$CONTAINER")" = true ] || break
    sleep 0.05
    waited=$((waited + 1))
    [ "$waited" -lt 6000 ] || die "docker $how: no shard after 5 minutes"
  done
  t0=$SECONDS
  docker "$how" "$CONTAINER" >/dev/null 2>&1 || true
  STOP_SECONDS=$((SECONDS - t0))
  [ "$(docker wait "$CONTAINER")" != 0 ] || die "docker $how: the build finished before it was interrupted"
  docker rm "$CONTAINER" >/dev/null
  [ "$how" = kill ] || [ "$STOP_SECONDS" -lt 10 ] || die "docker stop took ${STOP_SECONDS} s: the build ignored SIGINT"
}

rerun_same() {  # KIND OUT KEPT_PATTERN: the same command again ends with the reference's bytes
  local kind="$1" out="$2"
  docker run --rm --network none --user "$USER_SPEC" -e SKIP_TRAINER_CHECK=1 -v "$W/archives:/archives:ro" \
    -v "$out:/out" "$IMAGE" build "${ARGS[@]}" >"$out.rerun" 2>&1 || { tail -30 "$out.rerun"; die "$kind image: the rerun failed"; }
  same_as_reference "$out/tfrecord" || die "$kind image: the rerun's shards differ from the reference"
  KEPT=$(grep -o "kept from before: [0-9]*" "$out.rerun" | grep -o "[0-9]*$") || die "$kind image: the rerun kept nothing"
  [[ "$KEPT" =~ ^$3$ ]] || die "$kind image: the rerun kept $KEPT shards"
}

for kind in "${KINDS[@]}"; do
  case "$kind" in cpu|gpu) test_image "$kind" ;; *) die "unknown image '$kind' (cpu or gpu)" ;; esac
done
[ -z "$standin" ] || echo "note: the images were built FROM a STAND-IN base, not the official $BASE"
echo "docker_test: all checks passed (${KINDS[*]})"
