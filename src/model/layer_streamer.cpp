// LayerStreamer and the layer layout (layer_streamer.h).
#include "model/layer_streamer.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace infer::model {
namespace {

constexpr uint64_t kPieceAlign = 256;

// Calls f(src, bytes) for every matrix and F32 vector L points to, in one fixed order, and stores
// the pointer f returns in its place (so one walk both lists the pieces and rebases them).
template <class F>
void for_each_piece(const HParams& hp, LayerWeights& L, F&& f) {
  for (kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router, &L.gate_exps,
                                   &L.up_exps, &L.down_exps}) {
    if (w->data) w->data = f(w->data, uint64_t(w->n_out) * w->row_bytes);
  }
  const uint64_t E = uint64_t(hp.n_embd), Q = uint64_t(hp.q_dim()), KV = uint64_t(hp.kv_dim()),
                 HD = uint64_t(hp.head_dim), F_ = uint64_t(hp.n_ff);
  const std::pair<const float**, uint64_t> vectors[] = {
      {&L.attn_norm, E}, {&L.bq, Q}, {&L.bk, KV}, {&L.bv, KV}, {&L.bo, E}, {&L.q_norm, HD}, {&L.k_norm, HD},
      {&L.post_attn_norm, E}, {&L.attn_out_norm, E}, {&L.attn_out_norm_b, E}, {&L.ffn_norm, E}, {&L.b_up, F_},
      {&L.b_down, E}, {&L.post_ffn_norm, E}, {&L.layer_out_norm, E}, {&L.layer_out_norm_b, E}};
  for (auto [v, n] : vectors) {
    if (*v) *v = static_cast<const float*>(f(*v, n * sizeof(float)));
  }
}

}  // namespace

LayerLayout layer_layout(const HParams& hp, const LayerWeights& L) {
  LayerLayout layout;
  LayerWeights copy = L;
  for_each_piece(hp, copy, [&](const void* src, uint64_t bytes) {
    layout.pieces.push_back({src, bytes, layout.bytes});
    layout.bytes += (bytes + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    return src;
  });
  return layout;
}

LayerWeights rebase(const HParams& hp, const LayerWeights& L, const LayerLayout& layout, void* base) {
  LayerWeights moved = L;
  size_t i = 0;
  for_each_piece(hp, moved, [&](const void*, uint64_t) -> const void* {
    return static_cast<uint8_t*>(base) + layout.pieces.at(i++).offset;
  });
  return moved;
}

std::vector<uint64_t> layer_device_bytes(const Model& m) {
  std::vector<uint64_t> bytes;
  for (const LayerWeights& L : m.layers()) bytes.push_back(layer_layout(m.hparams(), L).bytes);
  return bytes;
}

uint64_t non_layer_bytes(const Model& m) {
  uint64_t total = 0;
  for (const auto& t : m.file().tensors()) {
    if (t.name.rfind("blk.", 0) != 0) total += t.n_bytes;
  }
  return total;
}

LayerStreamer::LayerStreamer(const HParams& hp, const std::vector<LayerWeights>& layers, const StreamPlan& plan,
                             StreamDevice& device, Options opts)
    : hp_(hp), layers_(layers), plan_(plan), dev_(device), opts_(opts) {
  const int n = int(layers.size()), R = plan.resident_layers;
  if (plan.n_layer != n || R < 0 || R > n || (plan.streams() && plan.depth < 1)) {
    throw std::invalid_argument("layer streamer: a plan of " + std::to_string(plan.n_layer) + " layers (" +
                                std::to_string(R) + " resident, depth " + std::to_string(plan.depth) +
                                ") does not fit a model of " + std::to_string(n) + " layers");
  }
  for (const LayerWeights& L : layers) layouts_.push_back(layer_layout(hp, L));
  for (int l = R; l < n; ++l) {
    if (layouts_[size_t(l)].bytes > plan.slot_bytes) {
      throw std::invalid_argument("layer streamer: layer " + std::to_string(l) + " needs " +
                                  std::to_string(layouts_[size_t(l)].bytes) + " bytes, more than the plan's slots of " +
                                  std::to_string(plan.slot_bytes));
    }
  }
  try {
    for (int l = 0; l < R; ++l) {
      const LayerLayout& layout = layouts_[size_t(l)];
      resident_mem_.push_back(dev_.alloc(layout.bytes));
      auto* base = static_cast<uint8_t*>(resident_mem_.back());
      for (const LayerPiece& p : layout.pieces) dev_.copy(base + p.offset, p.src, p.bytes);
      resident_.push_back(rebase(hp, layers[size_t(l)], layout, base));
    }
    if (plan.streams()) {
      dev_.open_slots(plan.depth);
      slots_.resize(size_t(plan.depth));
      for (Slot& s : slots_) s.mem = dev_.alloc(plan.slot_bytes);
    }
  } catch (...) {
    free_memory();
    throw;
  }
  for (int d = 0; d < plan.depth; ++d) queue_copy();
}

LayerStreamer::~LayerStreamer() {
  if (held_layer_ >= plan_.resident_layers) dev_.record_consumed(int(next_read_ % uint64_t(plan_.depth)));
  dev_.synchronize();
  free_memory();
}

void LayerStreamer::free_memory() {
  for (void* p : resident_mem_) dev_.free(p);
  for (Slot& s : slots_) {
    if (s.mem) dev_.free(s.mem);
  }
  resident_mem_.clear();
  slots_.clear();
}

// The next copy in the cyclic schedule, into its slot once the slot's previous layer was consumed.
void LayerStreamer::queue_copy() {
  const int slot = int(next_copy_ % uint64_t(plan_.depth));
  const int layer = plan_.resident_layers + int(next_copy_ % uint64_t(n_streamed()));
  Slot& s = slots_[size_t(slot)];
  if (s.held) {  // the schedule queues a slot's next copy only at its layer's release
    throw std::logic_error("layer streamer: slot " + std::to_string(slot) + " is refilled while layer " +
                           std::to_string(s.layer) + " reads it");
  }
  dev_.wait_consumed(slot);
  for (const LayerPiece& p : layouts_[size_t(layer)].pieces) {
    dev_.copy_async(slot, static_cast<uint8_t*>(s.mem) + p.offset, p.src, p.bytes);
    stats_.bytes_copied += p.bytes;
  }
  dev_.record_copied(slot);
  s.layer = layer;
  ++s.generation;
  ++next_copy_;
  ++stats_.layer_copies;
}

const LayerWeights& LayerStreamer::acquire(int layer) {
  const int n = plan_.n_layer, R = plan_.resident_layers;
  if (layer < 0 || layer >= n) {
    throw std::out_of_range("layer streamer: layer " + std::to_string(layer) + " out of range [0, " +
                            std::to_string(n) + ")");
  }
  // A pass abandoned midway (an exception): release its layer and run through the rest of the
  // schedule to this layer, so that every queued copy is consumed in order.
  if (held_layer_ >= 0) release(held_layer_);
  while (next_layer_ != layer) {
    const int skipped = next_layer_;
    acquire(skipped);
    release(skipped);
  }

  if (layer < R) {
    held_layer_ = layer;
    return resident_[size_t(layer)];
  }
  const int slot = int(next_read_ % uint64_t(plan_.depth));
  Slot& s = slots_[size_t(slot)];
  dev_.wait_copied(slot);
  held_layer_ = layer;
  held_generation_ = next_read_ / uint64_t(plan_.depth) + 1;  // read k is the slot's (k / depth + 1)-th copy
  s.held = true;
  ++stats_.streamed_reads;
  check_slot(s, layer, held_generation_);
  s.view = rebase(hp_, layers_[size_t(layer)], layouts_[size_t(layer)], s.mem);
  return s.view;
}

void LayerStreamer::release(int layer) {
  if (layer != held_layer_) {
    throw std::logic_error("layer streamer: release of layer " + std::to_string(layer) + ", but layer " +
                           std::to_string(held_layer_) + " is held");
  }
  held_layer_ = -1;
  next_layer_ = (layer + 1) % plan_.n_layer;
  if (layer < plan_.resident_layers) return;
  const int slot = int(next_read_ % uint64_t(plan_.depth));
  Slot& s = slots_[size_t(slot)];
  check_slot(s, layer, held_generation_);
  s.held = false;
  dev_.record_consumed(slot);
  ++next_read_;
  queue_copy();
}

void LayerStreamer::check_slot(const Slot& s, int layer, uint64_t generation) {
  bool ok = s.layer == layer && s.generation == generation;
  if (opts_.verify_contents && dev_.host_readable()) {
    ++stats_.contents_checked;
    ok = ok && contents_match(s, layer);
  }
  if (!ok) ++stats_.slot_mismatches;
}

bool LayerStreamer::contents_match(const Slot& s, int layer) const {
  for (const LayerPiece& p : layouts_[size_t(layer)].pieces) {
    if (std::memcmp(static_cast<const uint8_t*>(s.mem) + p.offset, p.src, p.bytes) != 0) return false;
  }
  return true;
}

}  // namespace infer::model
