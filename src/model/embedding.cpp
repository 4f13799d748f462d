#include "model/embedding.h"

#include "kernels/quant/interleave.h"
#include "kernels/ops/ops.h"

namespace infer::model {

void embed_row(const Model& m, int32_t token, int pos, float* out, float* scratch) {
  const HParams& hp = m.hparams();
  const int E = hp.n_embd;
  kernels::dequantize_weight_row(m.token_embd(), token, out);
  if (hp.embd_scale != 1.f) {
    for (int i = 0; i < E; ++i) out[i] *= hp.embd_scale;
  }
  if (!m.recipe().embedding_layernorm()) return;
  kernels::dequantize_weight_row(m.position_embd(), pos, scratch);
  for (int i = 0; i < E; ++i) out[i] = (m.token_type0() ? out[i] + m.token_type0()[i] : out[i]) + scratch[i];
  kernels::layernorm(out, m.embd_norm(), m.embd_norm_bias(), out, E, hp.rms_eps);
}

}  // namespace infer::model
