#include "model/layer_recipe.h"

namespace infer::model {

ModelRecipe describe_layers(const HParams& hp) {
  LayerRecipe base;
  switch (hp.arch) {
    case Arch::Llama:
      base.rope = RopeKind::AdjacentPairs;
      break;
    case Arch::Qwen2:
    case Arch::Phi3:
      break;
    case Arch::Qwen3:
      base.qk_norm = true;
      break;
    case Arch::Qwen3Moe:
      base.qk_norm = true;
      base.ffn = FeedForwardKind::Experts;
      break;
    case Arch::Gemma3:
      base.qk_norm = true;
      base.post_block_norms = true;
      base.ffn = FeedForwardKind::GeGlu;
      break;
    case Arch::Bert:
      base.norm = NormPlacement::PostLayerNorm;
      base.rope = RopeKind::None;
      base.ffn = FeedForwardKind::GeluUp;
      break;
  }
  ModelRecipe r;
  r.layers.assign(size_t(hp.n_layer > 0 ? hp.n_layer : 0), base);
  for (int l = 0; l < hp.n_layer; ++l) r.layers[size_t(l)].window = hp.is_local_layer(l) ? hp.n_swa : 0;
  return r;
}

kernels::RopeParams rope_params(const HParams& hp, const ModelRecipe& r, const float* rope_factors, bool local) {
  const bool halves = !r.layers.empty() && r.layers.front().rope == RopeKind::Halves;
  if (local) return {hp.n_rot, hp.rope_freq_base_swa, 1.0f, halves, nullptr, hp.rope_mscale};
  return {hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, halves, rope_factors, hp.rope_mscale};
}

}  // namespace infer::model
