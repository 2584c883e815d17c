#!/usr/bin/env bash
# The wheels a GPU machine with PyTorch but no package index lacks for scripts/gpu_check.sh: DALI for CUDA 13
# and what it needs beyond PyTorch's environment, and the one core dependency of imagenet-build that is not
# there (google-crc32c), pinned, for CPython 3.12 on manylinux x86-64. They land in .gpu/whl/ (ignored by
# git), with their sha256 sums, and are cut into pieces of 50 MiB (.gpu/piece-00, -01, ...) that travel one
# per transfer to a machine taking at most 64 MiB at a time; scripts/gpu_check.sh joins, checks and installs
# them with no index. Prints the pieces and which to carry in which transfer (docs/gpu.md).
# Usage, in the repository root, on a machine with pip and the package index: scripts/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpu
PIECE_MIB=50
# Exactly these: DALI 2.4.0 for CUDA 13 and its Requires-Dist that a CUDA 13 PyTorch environment lacks
# (numpy, packaging, six, pyyaml, typing-extensions and wheel are there). Of nvimgcodec's "all" extra only nvJPEG
# and nvCOMP: JPEG 2000 and TIFF (nvjpeg2k, nvtiff) decode nothing a build holds.
WHEELS=(
    nvidia-dali-cuda130==2.4.0
    nvidia-nvimgcodec-cu13==0.9.0.20
    nvidia-nvjpeg==13.3.2.43
    nvidia-libnvcomp-cu13==5.3.0.16
    optree==0.20.0
    nvtx==0.2.17
    makefun==1.16.0
    libcst==1.9.0
    astunparse==1.6.3
    gast==0.7.0
    google-crc32c==1.9.0
)
# What the GPU machine's Python environment already holds, of what these wheels ask for
THERE="numpy packaging six pyyaml typing-extensions wheel"

rm -rf "$OUT"
mkdir -p "$OUT/whl"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$OUT/whl" "${WHEELS[@]}" 2>&1 | grep -v "^WARNING: Location" || true
[ "$(ls "$OUT"/whl/*.whl | wc -l)" = "${#WHEELS[@]}" ] || { echo "error: not every wheel was downloaded" >&2; exit 1; }

# Every requirement of every wheel, as it applies to CPython 3.12 on Linux x86-64 and with no extra, is
# downloaded or already there; else say which
python3 - "$OUT/whl" $THERE <<'PY'
import glob, re, sys, zipfile
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
where = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "os_name": "posix",
         "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
         "platform_python_implementation": "CPython", "extra": ""}
wheels = glob.glob(sys.argv[1] + "/*.whl")
have = {canonicalize_name(re.split("-", w.rsplit("/", 1)[1])[0]) for w in wheels} | set(map(canonicalize_name, sys.argv[2:]))
lacking = set()
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if (req.marker is None or req.marker.evaluate(where)) and canonicalize_name(req.name) not in have:
                lacking.add(req.name)
if lacking:
    sys.exit(f"error: required but neither downloaded nor on the GPU machine: {', '.join(sorted(lacking))}")
PY

(cd "$OUT/whl" && sha256sum -- *.whl > SHA256SUMS)
tar -C "$OUT" -cf "$OUT/wheels.tar" whl
split -b "${PIECE_MIB}m" -d "$OUT/wheels.tar" "$OUT/piece-"
rm "$OUT/wheels.tar"
echo "$(du -cb "$OUT"/whl/*.whl | tail -1 | cut -f1) bytes of wheels in $OUT/whl; pieces, one per transfer, in order:"
ls -l "$OUT"/piece-* | awk '{printf "  %s  %d bytes\n", $NF, $5}'
echo "then, in the last transfer's command: scripts/gpu_check.sh (it joins the pieces and installs them)"
