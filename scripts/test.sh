#!/usr/bin/env bash
# Builds (via setup.sh) and runs the whole test suite with CTest.
# Usage: scripts/test.sh [preset]      (default: release; asan and tsan also work)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
source scripts/shared_dirs.sh
scripts/setup.sh "$preset"
ctest --preset "$preset" -j "$(nproc)" ${CTEST_ARGS:-}
