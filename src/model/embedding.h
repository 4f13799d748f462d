// A row's input embedding, the first step of every backend's forward pass: the token's row (gemma3:
// scaled by √n_embd); bert adds token type 0 and the position's row, then LayerNorms.
#pragma once
#include <cstdint>

#include "model/model.h"

namespace infer::model {

// Writes n_embd floats to `out`; `scratch` holds n_embd floats (bert's position row).
void embed_row(const Model& m, int32_t token, int pos, float* out, float* scratch);

}  // namespace infer::model
