// Must not compile: the kernels layer sees only the layers it links, and model is above it
// (ctest layer_include_above_fails_kernels).
#include "model/backend.h"
