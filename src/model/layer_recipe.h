// How each layer of a model runs: the one description of an architecture's layer that both backends
// execute (forward.cpp on the CPU, cuda/gpu_backend.cu on the GPU), resolved once at load from the
// hyper-parameters (spec/architectures.md, architectures-more.md). Neither backend asks which
// architecture it runs; adding one touches the loader's tensor names (model.cpp, hparams.cpp) and
// describe_layers only. Biases are not described: a backend adds the ones the file has.
#pragma once
#include <vector>

#include "kernels/ops/ops.h"
#include "model/hparams.h"

namespace infer::model {

// Where a layer normalises. PreRms: each block reads RMSNorm(x) and adds its output to x. PostLayerNorm
// (bert): each block reads x, then x = LayerNorm(x + block output), and the input embeddings are
// LayerNormed too.
enum class NormPlacement { PreRms, PostLayerNorm };

// How RoPE rotates a head: none (bert: learned positions), adjacent pairs (llama), or the two halves
// (NeoX: qwen2, qwen3, gemma3, phi3, qwen3moe).
enum class RopeKind { None, AdjacentPairs, Halves };

// The feed-forward block: down(silu(gate·h) ⊙ up·h), down(gelu(gate·h) ⊙ up·h) (gemma3), the routed
// experts of SwiGLU blocks (qwen3moe), or down(gelu(up·x + b)) + b (bert).
enum class FeedForwardKind { SwiGlu, GeGlu, Experts, GeluUp };

struct LayerRecipe {
  NormPlacement norm = NormPlacement::PreRms;
  bool qk_norm = false;           // RMSNorm of every query and key head before RoPE (qwen3, qwen3moe, gemma3)
  RopeKind rope = RopeKind::Halves;
  int window = 0;                 // a sliding-window layer's window (keys pos-window+1..pos), else 0
  bool local() const { return window > 0; }  // a sliding-window layer: RoPE with the local base
  bool post_block_norms = false;  // RMSNorm of each block's output before the residual (gemma3)
  FeedForwardKind ffn = FeedForwardKind::SwiGlu;
};

// The steps around the layers follow the layers' NormPlacement, so they are read from it. PreRms: the
// input is the token's embedding, the outputs are RMSNormed. PostLayerNorm: the input is the token's
// embedding plus token type 0's and the position's, LayerNormed, and the outputs are the last layer's.
struct ModelRecipe {
  std::vector<LayerRecipe> layers;  // [n_layer]
  NormPlacement norm() const { return layers.empty() ? NormPlacement::PreRms : layers.front().norm; }
  bool embedding_layernorm() const { return norm() == NormPlacement::PostLayerNorm; }
  bool final_rmsnorm() const { return norm() == NormPlacement::PreRms; }
  bool rope() const { return !layers.empty() && layers.front().rope != RopeKind::None; }
};

// The description of every layer of a model with these hyper-parameters: the only place that maps an
// architecture to the steps of its layers.
ModelRecipe describe_layers(const HParams& hp);

// The RoPE of the global layers (with the model's scaling and `rope_factors`, Model::rope_factors()),
// or with `local`, of the sliding-window layers (their own base, unscaled). RopeKind::None: unused.
kernels::RopeParams rope_params(const HParams& hp, const ModelRecipe& r, const float* rope_factors, bool local);

}  // namespace infer::model
