#!/usr/bin/env bash
# Set up .venv with the test extras (TensorFlow CPU, DALI, its TF plugin, PyTorch) and run the tests,
# after ruff and mypy, then build the sample dataset and verify it as a user's CI would.
# Usage: scripts/test.sh [--loaded] [pytest args...]
# --loaded: the tests on twice the cores, one busy process per core beside them, as on a machine busy with other
# work (CI runs it so): a test that holds only on a quiet machine fails here, before it reaches a user.
LOADED=""
if [ "${1:-}" = --loaded ]; then
  LOADED=1
  shift
fi
source "$(dirname "$0")/_venv.sh"
ensure_venv test
ensure_dali_tf_plugin
cd "$ROOT"
# The report page's tests drive a real browser (Debian's chromium): installed where it is missing and this
# machine may (root, apt-get), so that they run instead of skipping; elsewhere they skip, saying so.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== apt-get install chromium (for the report page's browser test)"
  LOG="$(mktemp)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >"$LOG" 2>&1 \
    || echo "chromium could not be installed (see $LOG): the report page's browser test skips"
fi
# Spark's tests need Java 17+ (Debian's openjdk-17-jre-headless): likewise installed where missing and possible.
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== apt-get install openjdk-17-jre-headless (for the Spark engine's tests)"
  LOG="$(mktemp)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless) >"$LOG" 2>&1 \
    || echo "Java could not be installed (see $LOG): the Spark engine's tests skip"
fi
# The Docker image's test builds a stand-in for its base image with debootstrap where Docker Hub cannot be
# reached: installed likewise where a Docker engine answers and debootstrap is missing.
if docker info >/dev/null 2>&1 && ! command -v debootstrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
  echo "== apt-get install debootstrap (for the Docker image's stand-in base)"
  LOG="$(mktemp)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap) >"$LOG" 2>&1 \
    || echo "debootstrap could not be installed (see $LOG): the Docker image's test fails where Docker Hub is unreachable"
fi
echo "== ruff check imagenet_build tests benchmarks"
"$PY" -m ruff check imagenet_build tests benchmarks
echo "== mypy imagenet_build"
"$PY" -m mypy imagenet_build
echo "== lint-imports (the import contracts of pyproject.toml) and the size rule"
"$PY" scripts/lint_imports.py  # lint-imports, require() calls counted as imports
"$PY" scripts/check_sizes.py
# On every core (pytest-xdist): each worker process runs whole test files, with its own session fixtures
# (the sample, its builds, the S3 server on a port of its own). `scripts/test.sh -n 0` runs them in this process.
WORK="$(mktemp -d)"
BURNERS=()
end_burners() {
  if [ ${#BURNERS[@]} -gt 0 ]; then
    kill "${BURNERS[@]}" 2>/dev/null || true
    wait "${BURNERS[@]}" 2>/dev/null || true
    BURNERS=()
  fi
}
trap 'end_burners; rm -rf "$WORK"' EXIT
WORKERS=auto
if [ -n "$LOADED" ]; then
  CORES="$(nproc)"
  WORKERS=$((2 * CORES))
  echo "== loaded: the tests on $WORKERS workers, $CORES busy process(es) beside them"
  for _ in $(seq "$CORES"); do
    (while :; do :; done) &
    BURNERS+=("$!")
  done
fi
"$PY" -m pytest -n "$WORKERS" --dist loadfile "$@"
end_burners

echo "== sample -> convert -> verify"
IB="$VENV/bin/imagenet-build"
"$IB" sample "$WORK/sample" >/dev/null
"$IB" convert --from "$WORK/sample" \
  --train-shards 4 --validation-shards 2 --layout-threads 2 --output-dir "$WORK/shards" >/dev/null
"$IB" verify "$WORK/shards" --deep
