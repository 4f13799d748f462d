// Compiles: the kernels layer links gguf, below it (ctest layer_include_below_compiles).
#include "gguf/tensor_type.h"
