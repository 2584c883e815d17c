#!/usr/bin/env bash
# The GPU proofs of docs/gpu.md in one run, in the repository root of a machine with a CUDA GPU and
# Python 3 with torch and torchvision (no package index needed: the wheels of .whl/, docs/gpu.md step 1).
# Each step is bounded and goes on past a failure; the figures land in $OUT (default /tmp/gpu-results).
# Usage: scripts/gpu_check.sh            (every step)
#        ONLY="sample convert trainer-check-cuda" scripts/gpu_check.sh   (those steps alone)
set -u -o pipefail
OUT=${OUT:-/tmp/gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
status=0
step() {  # step NAME SECONDS COMMAND...: run it bounded, its output into $OUT/NAME.txt, and say how it ended
    local name=$1 seconds=$2 started rc
    shift 2
    case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    started=$(date +%s)
    timeout "$seconds" "$@" > "$OUT/$name.txt" 2>&1
    rc=$?
    echo "== $name: exit $rc after $(( $(date +%s) - started )) s"
    tail -n 25 "$OUT/$name.txt"
    [ "$rc" = 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import os, torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__,
    torch.cuda.get_device_name(), os.cpu_count(), 'cores')"

step pytest-cuda 120 python3 -m pytest -q -p no:cacheprovider tests/readback/test_torch_cuda.py
step sample 45 python3 -m imagenet_build sample /tmp/s --classes 10 --per-class 500 --validation-per-class 10 \
    --min-size 200 --max-size 500 --json
step convert 45 python3 -m imagenet_build convert --train-dir /tmp/s/train --validation-dir /tmp/s/validation \
    --labels-file /tmp/s/labels.txt --validation-labels-file /tmp/s/validation_labels.txt \
    --bounding-box-file /tmp/s/bboxes.csv --train-shards 16 --validation-shards 2 --layout-threads 2 \
    --output-dir /tmp/b --json
step verify 45 python3 -m imagenet_build verify /tmp/b
step trainer-check-cuda 200 python3 -m imagenet_build trainer-check /tmp/b --framework torch --device cuda \
    --num-shards 4 --json
step bench-torch-cuda 150 python3 benchmarks/bench_torch.py --device cuda --images 20000 --classes 100 \
    --workers 8 --batch-size 256 --batches 20 --repeats 3 --json "$OUT/bench-torch-cuda.json"
step bench-cores 120 python3 benchmarks/bench_cores.py --images 16000 --shards 128 --repeats 3
exit $status
