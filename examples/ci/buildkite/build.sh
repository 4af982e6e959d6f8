#!/usr/bin/env bash
# Build the wheel (its map comes with it, each kernel's device-code digests in it) and keep it as an
# artifact of this Buildkite build: the `build` step of pipeline-after-build.yml, and the first half
# of upload.sh's flow in pipeline.yml. Main's keep step copies this wheel into $KSM_EVIDENCE.
set -euo pipefail
ksm_wheels=$(mktemp -d)
pip wheel --no-deps "$KSM_SOURCE" -w "$ksm_wheels"   # kernel-symbol-map is on no index
export PIP_FIND_LINKS="$ksm_wheels"
pip install 'kernel-symbol-map[record]'
pip wheel . -w dist --no-deps                        # the CMake package writes the map into the wheel
buildkite-agent artifact upload 'dist/*.whl'
