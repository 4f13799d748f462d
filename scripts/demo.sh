#!/usr/bin/env bash
# The main job: set up, then show the model answering. (Grows into: start redis-server with the module and
# a model, and answer an INFER.GENERATE through redis-cli.)
set -euo pipefail
cd "$(dirname "$0")/.."
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}
scripts/setup.sh release
build/release/src/cli/infer inspect "$INFER_MODELS_DIR/stories260K.gguf"
