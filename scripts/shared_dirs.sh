# Sourced by the scripts that run tests or checks, from the project root: the shared data directories
# the tests read (INFER_MODELS_DIR, INFER_VECTORS_DIR, INFER_REFERENCE_DIR), ../shared's unless set.
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}
export INFER_VECTORS_DIR=${INFER_VECTORS_DIR:-$(realpath -m ../shared/tokenizer-vectors)}
export INFER_REFERENCE_DIR=${INFER_REFERENCE_DIR:-$(realpath -m ../shared/reference)}
