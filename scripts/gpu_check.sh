#!/usr/bin/env bash
# The GPU proof of docs/gpu.md as one run of at most 8 minutes, in the repository root of a machine with one
# CUDA GPU and Python 3 with torch and torchvision, and no package index: what it lacks (DALI for CUDA 13,
# google-crc32c) comes as the pieces scripts/gpu_wheels.sh makes (.gpu/piece-NN), joined, checked against
# their sha256 sums and installed here with no index; imagenet-build runs from this checkout (PYTHONPATH).
# Steps, each bounded (and by what is left of the 8 minutes), each going on past another's failure, each
# appending its output to $OUT/steps.log and a line to $OUT/summary.txt (the benchmarks' figures also go to
# $OUT/bench-readback.json and $OUT/bench-cores.json: four files in all):
#   install            the wheels of .gpu/, where DALI or google-crc32c is not importable
#   versions           the GPU, driver, torch, torchvision, DALI, cores
#   build              --images generated ImageNet-sized JPEGs converted on every core, verified
#   trainer-check-dali trainer-check --framework dali-torch on the GPU ("mixed": nvJPEG and the hardware
#                      decoder), ResNet-50 bf16 channels_last, 300 steps of 256
#   trainer-check-torch  the same through the PyTorch reader (torchvision's nvJPEG), 300 steps of 256
#   pytest-cuda        the CUDA tests of every reader (test_torch_cuda.py, test_dali_cuda.py)
#   bench-readback     decode images/s (DALI, torchvision) and ResNet-50 training images/s fed by each reader
#                      against synthetic batches (benchmarks/bench_readback.py)
#   bench-cores        convert at 1, 2, 4, 8, 16 workers on 64,000 images beside a copy and a copy with fsync,
#                      the driver's CPU per image and the fixed start-up (benchmarks/bench_cores.py)
# Usage: scripts/gpu_check.sh                  (every step; $OUT, default /tmp/gpu-results)
#        ONLY="build trainer-check-dali" scripts/gpu_check.sh       (those steps alone)
#        scripts/gpu_check.sh --device cpu     (every step on the CPU at small sizes: proves the script runs)
set -u -o pipefail
DEVICE=cuda
[ "${1:-}" = "--device" ] && DEVICE=${2:?--device cuda or cpu}
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpu-results}
WORK=${WORK:-/tmp/gpu-check}
BUDGET=${BUDGET:-470}  # seconds for the whole run, every step included
if [ "$DEVICE" = cuda ]; then
    IMAGES=20000 CORES_IMAGES=64000 SHARDS=128 TRAIN=() BENCH=(--batch-size 256 --batches 30 --steps 40)
else
    IMAGES=400 CORES_IMAGES=2000 SHARDS=16 TRAIN=(--steps 6 --batch-size 16)
    BENCH=(--batch-size 16 --batches 3 --steps 3 --warmup 1 --workers 1 --threads 2)
fi
mkdir -p "$OUT" "$WORK"
: > "$OUT/summary.txt"
: > "$OUT/steps.log"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
started=$(date +%s)
status=0

step() {  # step NAME SECONDS COMMAND...: run it bounded, its output into $OUT/steps.log, and say how it ended
    local name=$1 seconds=$2 left began rc
    shift 2
    case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    left=$(( BUDGET - ($(date +%s) - started) ))
    [ "$left" -lt "$seconds" ] && seconds=$left
    if [ "$seconds" -lt 10 ]; then
        echo "== $name: skipped, ${left} s left of ${BUDGET}" | tee -a "$OUT/summary.txt"
        status=1
        return 0
    fi
    began=$(date +%s)
    timeout -k 5 "$seconds" bash -c '"$@"' "$name" "$@" > "$WORK/$name.log" 2>&1  # bash: a step may be a function
    rc=$?
    echo "== $name: exit $rc after $(( $(date +%s) - began )) s (bound ${seconds} s)" | tee -a "$OUT/summary.txt"
    { echo "== $name: exit $rc"; cat "$WORK/$name.log"; } >> "$OUT/steps.log"
    tail -n 14 "$WORK/$name.log"
    [ "$rc" = 0 ] || status=1
}

install_wheels() {  # the pieces joined, their sums checked, every wheel installed with no index
    if "$PY" -c "import nvidia.dali, google_crc32c" 2>/dev/null; then
        echo "DALI and google-crc32c import already: nothing installed"
        return 0
    fi
    ls .gpu/piece-* >/dev/null 2>&1 || { echo "no .gpu/piece-NN here (scripts/gpu_wheels.sh makes them)"; return 1; }
    rm -rf "$WORK/wheels" && mkdir -p "$WORK/wheels"
    cat .gpu/piece-* | tar -x -C "$WORK/wheels" || return 1
    (cd "$WORK/wheels/whl" && sha256sum --quiet -c SHA256SUMS) || return 1
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$WORK"/wheels/whl/*.whl || return 1
    "$PY" -c "import nvidia.dali, nvidia.dali.plugin.pytorch, google_crc32c; print('DALI', nvidia.dali.__version__)"
}

versions() {
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    command -v lscpu >/dev/null && lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)'
    df -h "$WORK" | tail -n 1
    "$PY" - <<'PY'
import os, torch, torchvision
try:
    import nvidia.dali as dali
    from nvidia.dali import backend
    found = f"DALI {dali.__version__}, {backend.GetCUDADeviceCount()} GPU(s) for DALI"
except ImportError as e:
    found = f"no DALI ({e})"
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {found}, "
      f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA for torch'}, {os.cpu_count()} cores")
PY
}

make_build() {  # generated ImageNet-sized JPEGs converted on every core into $WORK/build, then verified
    rm -rf "$WORK/inputs" "$WORK/build"
    "$PY" -c "import sys; sys.path.insert(0, 'benchmarks'); from common import make_inputs; from pathlib import Path
print(make_inputs(Path(sys.argv[1]), int(sys.argv[2]), 100), 'bytes of JPEGs')" "$WORK/inputs" "$IMAGES" || return 1
    "$PY" -m imagenet_build convert --train-dir "$WORK/inputs/train" --labels-file "$WORK/inputs/labels.txt" \
        --output-dir "$WORK/build" --train-shards 64 --layout-threads 8 --workers 0 || return 1
    "$PY" -m imagenet_build verify "$WORK/build"
}

export -f install_wheels versions make_build
export PY WORK IMAGES
step install 120 install_wheels
step versions 30 versions
step build 60 make_build
step trainer-check-dali 120 "$PY" -m imagenet_build trainer-check "$WORK/build" --framework dali-torch \
    --device "$DEVICE" "${TRAIN[@]}" --json
step trainer-check-torch 150 "$PY" -m imagenet_build trainer-check "$WORK/build" --framework torch \
    --device "$DEVICE" "${TRAIN[@]}" --json
step pytest-cuda 90 "$PY" -m pytest -q -p no:cacheprovider -m "not slow" -rs tests/readers/test_torch_cuda.py \
    tests/readers/test_dali_cuda.py
step bench-readback 100 "$PY" benchmarks/bench_readback.py --device "$DEVICE" --build "$WORK/build" "${BENCH[@]}" \
    --json "$OUT/bench-readback.json"
step bench-cores 150 "$PY" benchmarks/bench_cores.py --images "$CORES_IMAGES" --shards "$SHARDS" --repeats 1 \
    --work "$WORK/cores" --json "$OUT/bench-cores.json"
echo "== all: $(( $(date +%s) - started )) s; figures in $OUT" | tee -a "$OUT/summary.txt"
exit $status
