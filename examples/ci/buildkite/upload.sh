#!/usr/bin/env bash
# Upload the test steps of examples/ci/buildkite/steps.json this build needs (see pipeline.yml).
set -euo pipefail
here=$(dirname "$0")
ksm_wheels=$(mktemp -d)
pip wheel --no-deps "$KSM_SOURCE" -w "$ksm_wheels"
export PIP_FIND_LINKS="$ksm_wheels"
pip install 'kernel-symbol-map[record]'
pip wheel . -w dist --no-deps                    # the CMake package writes the map into the wheel
buildkite-agent artifact upload 'dist/*.whl'

if [ "${BUILDKITE_BRANCH}" = "${BUILDKITE_PIPELINE_DEFAULT_BRANCH:-main}" ]; then
  python3 "$here/select_steps.py" record "$here/steps.json" | buildkite-agent pipeline upload
  exit 0
fi

# Main's last build kept its wheel (the map) and every step's recording in $KSM_EVIDENCE (a shared
# folder here; an S3 prefix with `aws s3 cp` works the same). Missing evidence is never an error:
# select then keeps every step, and says why.
kernel-symbol-map select --map "$KSM_EVIDENCE/dist" --recordings "$KSM_EVIDENCE/recordings" \
  --diff "origin/${BUILDKITE_PULL_REQUEST_BASE_BRANCH:-main}" --json > selection.json || true
buildkite-agent artifact upload selection.json

if [ "${KSM_SHADOW:-0}" = 1 ]; then
  python3 "$here/select_steps.py" shadow "$here/steps.json" | buildkite-agent pipeline upload
else
  python3 "$here/select_steps.py" select "$here/steps.json" selection.json | buildkite-agent pipeline upload
fi
