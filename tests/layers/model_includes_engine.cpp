// Must not compile: engine is above model (ctest layer_include_above_fails_model).
#include "engine/decode_step.h"
