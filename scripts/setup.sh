#!/usr/bin/env bash
# Installs every Debian 12 package redis-infer needs (idempotent: apt-get update runs once, and only
# when something is missing), then configures and builds the release preset.
# Usage: scripts/setup.sh [preset ...]     (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  ccache                            # rebuilds (and fresh clones on the same machine) reuse objects
  clang libclang-rt-14-dev          # libFuzzer + sanitizer runtimes for the fuzz preset
  libpcre2-dev                      # pre-tokenizer regexes
  libicu-dev                        # WordPiece normalisation (NFD, Unicode categories, case)
  libgtest-dev libgmock-dev         # tests
  libbenchmark-dev                  # micro-benchmarks
  gcovr                             # scripts/coverage.sh: line and branch coverage per layer
  libcli11-dev                      # the infer CLI
  nlohmann-json3-dev                # JSON output, reference files, vector-set attributes
  libhnswlib-dev                    # vector-set index
  libhiredis-dev                    # the gateway's Redis client, and the tests'
  libcpp-httplib-dev                # the gateway's HTTP server
  python3-jsonschema python3-jinja2 # test oracles: schema-constrained output, chat-template renderings
  python3-redis python3-pytest      # the Python client (clients/python), its tests, ctest redis_vector_suite
  python3-hnswlib                   # scripts/vector_bench.sh: hnswlib (and numpy) beside our vector search
  redis-server redis-tools          # the host (Redis 7.0) and redis-cli
)
# npm installs the official openai SDK for GatewayTest.OfficialOpenAiSdk (scripts/test.sh). A machine
# with Node.js from elsewhere (which ships its own npm) keeps it: Debian's npm would conflict with it.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

presets=("$@"); ((${#presets[@]})) || presets=(release)
for preset in "${presets[@]}"; do
  echo "setup: building preset '$preset'"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
done
