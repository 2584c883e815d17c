#!/usr/bin/env bash
# Mutation testing of one module against the tests that exercise it (mutmut): mutmut makes small
# behaviour changes to MODULE (a comparison flipped, a constant changed, a branch dropped, ...) and runs
# TESTS against each; a mutant no test fails has "survived" and names a missing test, or is equivalent
# (changes nothing a caller can see: docs/mutation.md lists those). Prints each survivor's diff, then
# the counts and the score. Runs in a temporary copy of the working tree: nothing here is touched.
# Not part of scripts/test.sh (minutes per module); needs the mutation extra:
#   .venv/bin/python -m pip install -c constraints.txt -e '.[mutation]'   (-e: the test environment stays editable)
# Usage: scripts/mutation.sh [-j N] [-k GLOB] [-s SEED [-n COUNT]] MODULE TEST [TEST ...]
#   -j N: run N mutants at a time (default: one per core); -j 1 on a machine others share
#   -k GLOB: only the mutants whose names match (mutmut's names, e.g. '*crop_box*'), the counts theirs alone
#   -s SEED: only COUNT mutants drawn at random by SEED (a whole number, or `random`: one drawn now, printed), of
#     those -k leaves: mutmut makes every mutant of a module, always the same ones, in an order of its own; a
#     sample drawn by a seed nobody wrote the tests against says how the tests fare on mutants they were not fitted
#     to, in minutes. The same seed and source draw the same mutants.
#   -n COUNT: how many mutants -s draws (default 40)
#   e.g. scripts/mutation.sh -j 1 imagenet_build/format/tfrecord.py tests/format/test_format.py
#        scripts/mutation.sh -j 1 -s random -n 30 imagenet_build/format/naming.py tests/format/test_naming.py
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
CHILDREN=()
ONLY=""
SEED=""
COUNT=40
while [ "$#" -gt 0 ]; do
  case "$1" in
    -j) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "error: -j: needs a whole number, 1 or more" >&2; exit 2; }
        CHILDREN=(--max-children "$2"); shift 2 ;;
    -k) [ -n "${2:-}" ] || { echo "error: -k: needs a pattern of mutant names" >&2; exit 2; }
        ONLY=$2; shift 2 ;;
    -s) [[ "${2:-}" =~ ^([0-9]+|random)$ ]] || { echo "error: -s: needs a whole number, or random" >&2; exit 2; }
        SEED=$2; shift 2 ;;
    -n) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "error: -n: needs a whole number, 1 or more" >&2; exit 2; }
        COUNT=$2; shift 2 ;;
    *) break ;;
  esac
done
if [ "$#" -lt 2 ]; then
  echo "usage: scripts/mutation.sh [-j N] [-k GLOB] [-s SEED [-n COUNT]] MODULE TEST [TEST ...]" >&2
  exit 2
fi
if [ "$SEED" = random ]; then
  SEED=$("$PY" -c 'import secrets; print(secrets.randbelow(10**9))')
fi
MODULE=$1
shift
for path in "$MODULE" "$@"; do
  [ -e "$ROOT/$path" ] || { echo "error: $path: no such file in the repository" >&2; exit 2; }
done
"$PY" -c "import mutmut" 2>/dev/null || {
  echo "error: mutmut is not installed: $PY -m pip install -c constraints.txt -e '.[mutation]'" >&2
  exit 1
}
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM  # the copy is removed on a stop too
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$WORK"
quoted() { local out="" p; for p in "$@"; do out+="\"$p\", "; done; echo "[${out%, }]"; }
# Each mutant's tests run in a process forked from a server that has run no test: forked from mutmut's own
# process, which ran the whole suite first (TensorFlow's and torch's threads started), a DataLoader or
# TensorFlow in the child could deadlock, and every mutant that survived the first tests hung to its timeout.
cat >> "$WORK/pyproject.toml" <<EOF

[tool.mutmut]
source_paths = ["$MODULE"]
pytest_add_cli_args_test_selection = $(quoted "$@")
# the tests read these too
also_copy = ["imagenet_build", "tests", "benchmarks", "docs", "docker", "README.md", "pyproject.toml",
             "constraints.txt"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "-m", "not slow"]
process_isolation = "forkserver"
EOF
cd "$WORK"
SELECTED=(${ONLY:+"$ONLY"})
DRAWN=""
if [ -n "$SEED" ]; then
  # mutmut's own names of the module's mutants (as `mutmut run` makes them, from this configuration), sorted; COUNT
  # of them drawn with Python's random.Random(SEED)
  DRAWN=$(MODULE=$MODULE ONLY=$ONLY SEED=$SEED COUNT=$COUNT "$PY" -W ignore -c '
import fnmatch, os, random
from pathlib import Path
from mutmut.mutation.file_mutation import mutate_file_contents
from mutmut.utils.format_utils import get_mutant_name
path, only = Path(os.environ["MODULE"]), os.environ["ONLY"]
names = sorted(get_mutant_name(path, name) for name in mutate_file_contents(str(path), path.read_text()).mutant_names)
names = [name for name in names if not only or fnmatch.fnmatch(name, only)]
drawn = random.Random(int(os.environ["SEED"])).sample(names, min(int(os.environ["COUNT"]), len(names)))
print(f"{len(names)}", *sorted(drawn), sep="\n")
')
  mapfile -t SELECTED < <(echo "$DRAWN" | tail -n +2)
  [ "${#SELECTED[@]}" -gt 0 ] || { echo "error: $MODULE: no mutant to draw${ONLY:+ matching $ONLY}" >&2; exit 1; }
  echo "seed $SEED: ${#SELECTED[@]} of the $(echo "$DRAWN" | head -n 1) mutants${ONLY:+ matching $ONLY} drawn" \
    "(-s $SEED -n $COUNT draws the same)"
fi
"$PY" -W ignore -m mutmut run ${CHILDREN[@]+"${CHILDREN[@]}"} ${SELECTED[@]+"${SELECTED[@]}"} > "$WORK/run.log" 2>&1 || {
  tail -n 30 "$WORK/run.log"; exit 1; }
"$PY" -W ignore -m mutmut results --all true 2>/dev/null | ONLY=$ONLY DRAWN=$DRAWN "$PY" -c '
import fnmatch, os, sys
only, drawn = os.environ["ONLY"], set(os.environ["DRAWN"].splitlines()[1:])
def kept(name):
    return (not only or fnmatch.fnmatch(name, only)) and (not drawn or name in drawn)
sys.stdout.writelines(line for line in sys.stdin if kept(line.strip().split(": ")[0]))
' > "$WORK/results.txt"
{ grep ": survived" "$WORK/results.txt" || true; } | sed 's/: survived//' | while read -r name; do
  "$PY" -W ignore -m mutmut show "$name" 2>/dev/null
  echo
done
killed=$(grep -c ": killed" "$WORK/results.txt" || true)
survived=$(grep -c ": survived" "$WORK/results.txt" || true)
other=$(grep -vc ": killed\|: survived" "$WORK/results.txt" || true)
grep -v ": killed\|: survived" "$WORK/results.txt" || true
total=$((killed + survived + other))
echo "$MODULE: $total mutants, $killed killed, $survived survived, $other other (timeout, suspicious, no tests)"
[ "$total" -gt 0 ] && echo "killed: $((100 * killed / total)) % of all mutants (docs/mutation.md: the score without the equivalent ones)"
