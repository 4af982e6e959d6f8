#!/usr/bin/env bash
# Test selection with kernel-symbol-map in any CI, as shell steps.
#
#   on main:          examples/ci/select.sh record  EVIDENCE_DIR
#   on a pull request: examples/ci/select.sh select EVIDENCE_DIR origin/main
#        or, after its build: examples/ci/select.sh select-built EVIDENCE_DIR origin/main
#   shadow mode:       examples/ci/select.sh shadow EVIDENCE_DIR origin/main
#
# EVIDENCE_DIR is wherever your CI keeps artifacts of the main branch's last run: its wheel (the map
# inside it, with each kernel's device-code digests) and its recordings; outside the checkout, or
# git-ignored (see --diff below).
#
# Two flows on a pull request. `select` (source mode) decides from main's map alone: a changed file
# reaches the kernels of every object compiled from it. It needs nothing of the change's build, so a
# CI can pick tests before building. `select-built` (output mode) decides after the change's own
# build, comparing what the two builds emitted (`select --base-map MAIN'S --map THIS BUILD'S`): a
# kernel whose device code differs, appeared or went away reaches its tests; one edited kernel in a
# file of 50 runs that kernel's tests, a comment-only edit none (without -lineinfo, which puts line
# tables and the PTX text in every image: bench/bench_emitted.py). Files no object compiles (CMakeLists,
# Python, docs) decide as in source mode. A main map without digests (built by an older
# kernel-symbol-map) makes it decide in source mode, and it says so (NOTE, "mode_why").
# --diff counts untracked files as changes: kernel-symbol-map's wheel goes outside the checkout (mktemp),
# the recipe's own files in it (dist/, selection.json, results.xml, evaluation.md) are excluded before any
# is written, and any other file the build writes into the checkout must be git-ignored.
#
# KSM_SOURCE is anything `pip wheel` takes for kernel-symbol-map (a vendored checkout, or
# git+https://... of the project): it is on no package index yet, so its wheel goes
# where pip's isolated builds look (PIP_FIND_LINKS).
set -euo pipefail
mode=$1 evidence=$2
: "${KSM_SOURCE:?set KSM_SOURCE to a checkout of kernel-symbol-map, or a URL pip can build it from}"

# --diff counts every untracked file as a change (a file in no map: everything runs), so every file this
# recipe writes into the checkout is kept out of it, in this clone only (the pull request's files are all
# tracked), and each line once however often the clone is reused.
exclude=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$exclude")" && touch "$exclude"
for own in /dist/ /selection.json /results.xml /evaluation.md; do
  grep -qxF "$own" "$exclude" || printf '%s\n' "$own" >> "$exclude"
done

ksm_wheels=$(mktemp -d)                # outside the checkout
pip wheel --no-deps "$KSM_SOURCE" -w "$ksm_wheels"
export PIP_FIND_LINKS="$ksm_wheels"
pip install 'kernel-symbol-map[record]'
pip wheel . -w dist --no-deps          # the CMake package writes the map into the wheel
pip install dist/*.whl

case "$mode" in
  record)
    mkdir -p "$evidence/dist"
    cp dist/*.whl "$evidence/dist/"
    # One record per test; a whole CI step (any command, its Python children too) would be:
    #   kernel-symbol-map record --step unit --out "$evidence/recordings" -- pytest tests/
    pytest tests/ --kernel-record "$evidence/recordings"
    ;;
  select)
    base=$3
    # Missing or unreadable evidence is never an error: select then runs everything, and says why.
    kernel-symbol-map select --map "$evidence"/dist --recordings "$evidence"/recordings \
      --diff "$base" --json > selection.json || true
    # Exactly the tests in "skip" are deselected (never a prefix); everything else runs.
    pytest tests/ --kernel-select selection.json
    ;;
  select-built)
    base=$3
    # dist/ holds this change's wheel, built above: its map is the change's own build. Main's is the base.
    kernel-symbol-map select --base-map "$evidence"/dist --map dist --recordings "$evidence"/recordings \
      --diff "$base" --json > selection.json || true
    pytest tests/ --kernel-select selection.json
    ;;
  shadow)
    base=$3
    # Run everything, select anyway, and compare: roll out only once the misses stay at zero.
    # (KSM_SHADOW_BUILT=1 evaluates select-built's selection instead.)
    if [ "${KSM_SHADOW_BUILT:-0}" = 1 ]; then maps=(--base-map "$evidence"/dist --map dist)
    else maps=(--map "$evidence"/dist); fi
    kernel-symbol-map select "${maps[@]}" --recordings "$evidence"/recordings \
      --diff "$base" --json > selection.json || true
    status=0
    pytest tests/ --junitxml=results.xml || status=$?
    kernel-symbol-map evaluate --selection selection.json --junit results.xml --markdown evaluation.md || true
    exit $status
    ;;
  *)
    echo "usage: $0 record|select|select-built|shadow EVIDENCE_DIR [BASE]" >&2
    exit 2
    ;;
esac
