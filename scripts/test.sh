#!/usr/bin/env bash
# Builds (via setup.sh) and runs the whole test suite with CTest.
# Usage: scripts/test.sh [preset]      (default: release; asan and tsan also work)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
source scripts/shared_dirs.sh
scripts/setup.sh "$preset"
# The official openai npm package for GatewayTest.OfficialOpenAiSdk, as package-lock.json pins it
# (the test skips when it is not installed: no npm, or no registry).
if command -v npm >/dev/null && [ ! -f tests/gateway/openai_sdk/node_modules/openai/package.json ]; then
  (cd tests/gateway/openai_sdk && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "test: npm ci failed; GatewayTest.OfficialOpenAiSdk will skip" >&2
fi
ctest --preset "$preset" -j "$(nproc)" ${CTEST_ARGS:-}
