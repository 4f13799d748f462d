#!/usr/bin/env bash
# Builds (via setup.sh) and runs the whole test suite with CTest.
# Usage: scripts/test.sh [preset]      (default: release; asan and tsan also work)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}
export INFER_VECTORS_DIR=${INFER_VECTORS_DIR:-$(realpath -m ../shared/tokenizer-vectors)}
export INFER_REFERENCE_DIR=${INFER_REFERENCE_DIR:-$(realpath -m ../shared/reference)}
scripts/setup.sh "$preset"
ctest --preset "$preset" -j "$(nproc)" ${CTEST_ARGS:-}
