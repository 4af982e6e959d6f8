#!/usr/bin/env bash
# Upload the test steps of examples/ci/buildkite/steps.json this build needs.
#
#   upload.sh               pipeline.yml: build here, then select from main's map alone (source mode)
#   upload.sh after-build   pipeline-after-build.yml: after the build step, select by what the two
#                           builds emitted (output mode: --base-map main's map, --map this build's)
set -euo pipefail
here=$(dirname "$0")
flow=${1:-before-build}
# --diff counts every untracked file as a change (a file in no map: everything runs), so every file this
# recipe writes into the checkout (dist/, selection.json) is kept out of it before any is written, in this
# clone only (the pull request's files are all tracked), and each line once however often the clone is
# reused. kernel-symbol-map's wheel goes outside the checkout (mktemp).
exclude=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$exclude")" && touch "$exclude"
for own in /dist/ /selection.json; do
  grep -qxF "$own" "$exclude" || printf '%s\n' "$own" >> "$exclude"
done
case "$flow" in
  before-build)
    "$here/build.sh"                             # installs kernel-symbol-map, builds and keeps dist/*.whl
    maps=(--map "$KSM_EVIDENCE/dist")
    ;;
  after-build)
    ksm_wheels=$(mktemp -d)                      # select needs kernel-symbol-map, not the project's build
    pip wheel --no-deps "$KSM_SOURCE" -w "$ksm_wheels"
    PIP_FIND_LINKS="$ksm_wheels" pip install 'kernel-symbol-map[record]'
    buildkite-agent artifact download 'dist/*.whl' .   # the build step's wheel: the change's own map
    # A kernel whose device code differs from main's build (any architecture), or that appeared or went
    # away, reaches the steps that launched it; an object whose host code differs, the steps that launched
    # its kernels (every step when it has none). Files no object compiles (CMakeLists, Python) decide as in
    # source mode. A main map without digests (an older kernel-symbol-map) decides in source mode, and says so.
    maps=(--base-map "$KSM_EVIDENCE/dist" --map dist)
    ;;
  *)
    echo "usage: $0 [after-build]" >&2
    exit 2
    ;;
esac

if [ "${BUILDKITE_BRANCH}" = "${BUILDKITE_PIPELINE_DEFAULT_BRANCH:-main}" ]; then
  python3 "$here/select_steps.py" record "$here/steps.json" | buildkite-agent pipeline upload
  exit 0
fi

# Any other file the build writes into the checkout than those excluded above must be git-ignored.
# Main's last build kept its wheel (the map) and every step's recording in $KSM_EVIDENCE (a shared
# folder here; an S3 prefix with `aws s3 cp` works the same). Missing evidence is never an error:
# select then keeps every step, and says why.
kernel-symbol-map select "${maps[@]}" --recordings "$KSM_EVIDENCE/recordings" \
  --diff "origin/${BUILDKITE_PULL_REQUEST_BASE_BRANCH:-main}" --json > selection.json || true
buildkite-agent artifact upload selection.json

if [ "${KSM_SHADOW:-0}" = 1 ]; then
  python3 "$here/select_steps.py" shadow "$here/steps.json" | buildkite-agent pipeline upload
else
  python3 "$here/select_steps.py" select "$here/steps.json" selection.json | buildkite-agent pipeline upload
fi
