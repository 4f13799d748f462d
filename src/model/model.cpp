// Model loading: hyper-parameters, then every tensor bound by name with an exact shape check
// (spec/architectures.md §2, architectures-more.md). Matrices stay views into the file's memory (DESIGN invariant 1): the
// mapping, or the huge-page copy, whose Q8_0/Q4_0/Q4_K/Q5_K/Q6_K matrices are rewritten in place into the interleaved
// layout where the CPU has kernels for it (kernels/quant/interleave.h).
#include "model/model.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/matmul/kernel_plan.h"
#include "kernels/quant/interleave.h"
#include "kernels/quant/quant.h"

namespace infer::model {
namespace {

std::string shape_text(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string shape_text(const gguf::TensorView& t) { return shape_text(t.ne, t.n_dims ? int(t.n_dims) : 1); }

std::runtime_error tensor_error(const std::string& name, const std::string& what) {
  return std::runtime_error("tensor " + name + ": " + what);
}

// Binds tensors of one file, remembering which ones were used so that leftovers can be reported.
class Binder {
 public:
  explicit Binder(const gguf::File& f) : f_(f) {}

  const gguf::TensorView* find(const std::string& name, std::initializer_list<int64_t> shape, bool required) {
    const gguf::TensorView* t = f_.tensor(name);
    if (!t) {
      if (required) throw tensor_error(name, "missing");
      return nullptr;
    }
    int64_t want[4] = {1, 1, 1, 1};
    int i = 0;
    for (int64_t d : shape) want[i++] = d;
    for (int d = 0; d < 4; ++d) {
      if (t->ne[d] != want[d]) {
        throw tensor_error(name, "has shape " + shape_text(*t) + ", expected " + shape_text(want, int(shape.size())));
      }
    }
    used_.insert(name);
    return t;
  }

  kernels::WeightMatrix matrix(const std::string& name, int64_t n_in, int64_t n_out, bool required = true) {
    return weight(find(name, {n_in, n_out}, required), name, n_in, n_out);
  }

  // A stack of n_expert matrices [n_in, n_out, n_expert], as one matrix of n_out·n_expert rows.
  kernels::WeightMatrix experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) {
    return weight(find(name, {n_in, n_out, n_expert}, true), name, n_in, n_out * n_expert);
  }

  // A 1-D vector as F32: pointed to when stored as F32, else dequantised once into `owned`.
  const float* vector(const std::string& name, int64_t n, bool required,
                      std::vector<std::vector<float>>& owned) {
    const gguf::TensorView* t = find(name, {n}, required);
    if (!t) return nullptr;
    if (t->type == gguf::TensorType::F32) return reinterpret_cast<const float*>(t->data);
    if (!kernels::is_supported_weight_type(t->type)) {
      throw tensor_error(name, "type " + std::string(gguf::type_name(t->type)) + " is not supported");
    }
    owned.emplace_back(size_t(n));
    kernels::dequantize_row(t->type, t->data, owned.back().data(), n);
    return owned.back().data();
  }

  // The first row of a matrix [n, rows] as F32 (bert's token type 0), owned when converted.
  const float* first_row(const std::string& name, int64_t n, std::vector<std::vector<float>>& owned) {
    const gguf::TensorView* t = f_.tensor(name);
    if (!t) return nullptr;
    if (t->ne[0] != n || t->n_dims > 2) throw tensor_error(name, "has shape " + shape_text(*t) + ", expected [" +
                                                                   std::to_string(n) + ", n_types]");
    used_.insert(name);
    if (t->type == gguf::TensorType::F32) return reinterpret_cast<const float*>(t->data);
    owned.emplace_back(size_t(n));
    kernels::dequantize_row(t->type, t->data, owned.back().data(), n);
    return owned.back().data();
  }

  // llama.cpp refuses files with tensors the architecture does not load; so do we, naming one.
  void check_all_used() const {
    for (const auto& t : f_.tensors()) {
      if (!used_.count(t.name)) throw tensor_error(t.name, "not used by this architecture (unsupported layout)");
    }
  }

 private:
  static kernels::WeightMatrix weight(const gguf::TensorView* t, const std::string& name, int64_t n_in, int64_t n_out) {
    if (!t) return {};
    if (!kernels::is_supported_weight_type(t->type)) {
      throw tensor_error(name, "weight type " + std::string(gguf::type_name(t->type)) + " is not supported");
    }
    return kernels::WeightMatrix{t->type, t->data, n_in, n_out, gguf::row_bytes(t->type, uint64_t(n_in))};
  }

  const gguf::File& f_;
  std::set<std::string> used_;
};

// Rows [begin, begin + n) of w (a slice of a fused tensor).
kernels::WeightMatrix row_range(const kernels::WeightMatrix& w, int64_t begin, int64_t n) {
  kernels::WeightMatrix r = w;
  r.data = static_cast<const uint8_t*>(w.data) + begin * int64_t(w.row_bytes);
  r.n_out = n;
  return r;
}

// Q, K, V: three tensors, or (phi3, bert) one fused attn_qkv sliced by rows in that order.
void bind_qkv(Binder& b, const HParams& hp, const std::string& p, LayerWeights& L,
              std::vector<std::vector<float>>& owned) {
  const int64_t E = hp.n_embd, Q = hp.q_dim(), KV = hp.kv_dim();
  const bool fused_allowed = hp.arch == Arch::Phi3 || hp.arch == Arch::Bert;
  if (const kernels::WeightMatrix qkv = fused_allowed ? b.matrix(p + "attn_qkv.weight", E, Q + 2 * KV, false)
                                                      : kernels::WeightMatrix{};
      qkv.data) {
    L.wq = row_range(qkv, 0, Q);
    L.wk = row_range(qkv, Q, KV);
    L.wv = row_range(qkv, Q + KV, KV);
    if (const float* bias = b.vector(p + "attn_qkv.bias", Q + 2 * KV, false, owned)) {
      L.bq = bias;
      L.bk = bias + Q;
      L.bv = bias + Q + KV;
    }
    return;
  }
  L.wq = b.matrix(p + "attn_q.weight", E, Q);
  L.wk = b.matrix(p + "attn_k.weight", E, KV);
  L.wv = b.matrix(p + "attn_v.weight", E, KV);
  L.bq = b.vector(p + "attn_q.bias", Q, false, owned);
  L.bk = b.vector(p + "attn_k.bias", KV, false, owned);
  L.bv = b.vector(p + "attn_v.bias", KV, false, owned);
}

// One layer's tensors by the architecture's names (spec/architectures.md §2, architectures-more.md).
void bind_layer(Binder& b, const HParams& hp, const LayerRecipe& r, const std::string& p, LayerWeights& L,
                std::vector<std::vector<float>>& owned) {
  const int64_t E = hp.n_embd, Q = hp.q_dim(), F = hp.n_ff, HD = hp.head_dim;
  bind_qkv(b, hp, p, L, owned);
  L.wo = b.matrix(p + "attn_output.weight", Q, E);
  if (r.norm == NormPlacement::PostLayerNorm) {
    L.bo = b.vector(p + "attn_output.bias", E, false, owned);
    L.attn_out_norm = b.vector(p + "attn_output_norm.weight", E, true, owned);
    L.attn_out_norm_b = b.vector(p + "attn_output_norm.bias", E, true, owned);
    L.w_up = b.matrix(p + "ffn_up.weight", E, F);
    L.b_up = b.vector(p + "ffn_up.bias", F, false, owned);
    L.w_down = b.matrix(p + "ffn_down.weight", F, E);
    L.b_down = b.vector(p + "ffn_down.bias", E, false, owned);
    L.layer_out_norm = b.vector(p + "layer_output_norm.weight", E, true, owned);
    L.layer_out_norm_b = b.vector(p + "layer_output_norm.bias", E, true, owned);
    return;
  }
  L.attn_norm = b.vector(p + "attn_norm.weight", E, true, owned);
  if (r.qk_norm) {
    L.q_norm = b.vector(p + "attn_q_norm.weight", HD, true, owned);
    L.k_norm = b.vector(p + "attn_k_norm.weight", HD, true, owned);
  }
  if (r.post_block_norms) {
    L.post_attn_norm = b.vector(p + "post_attention_norm.weight", E, true, owned);
    L.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", E, true, owned);
  }
  L.ffn_norm = b.vector(p + "ffn_norm.weight", E, true, owned);
  if (r.ffn == FeedForwardKind::Experts) {
    const int64_t FE = hp.n_ff_exp, NE = hp.n_expert;
    L.router = b.matrix(p + "ffn_gate_inp.weight", E, NE);
    L.gate_exps = b.experts(p + "ffn_gate_exps.weight", E, FE, NE);
    L.up_exps = b.experts(p + "ffn_up_exps.weight", E, FE, NE);
    L.down_exps = b.experts(p + "ffn_down_exps.weight", FE, E, NE);
    return;
  }
  if (hp.arch == Arch::Phi3) {  // ffn_up holds the gate rows, then the up rows
    const kernels::WeightMatrix gate_up = b.matrix(p + "ffn_up.weight", E, 2 * F);
    L.w_gate = row_range(gate_up, 0, F);
    L.w_up = row_range(gate_up, F, F);
  } else {
    L.w_gate = b.matrix(p + "ffn_gate.weight", E, F);
    L.w_up = b.matrix(p + "ffn_up.weight", E, F);
  }
  L.w_down = b.matrix(p + "ffn_down.weight", F, E);
}

// llama3's rope_freqs (llama only), or LongRoPE's pair of factor tensors, of which the per-sequence
// context picks one here, once (spec §4.5, llama.cpp's get_rope_factors). rope_freqs wins when both
// kinds are present, as in llama.cpp.
struct RopeFactors {
  const float* divisors = nullptr;
  bool long_factors = false;
};
RopeFactors bind_rope_factors(Binder& b, const HParams& hp, int context, std::vector<std::vector<float>>& owned) {
  const int64_t n = hp.n_rot / 2;
  const float* freqs = hp.arch == Arch::Llama ? b.vector("rope_freqs.weight", n, false, owned) : nullptr;
  const float* lng = b.vector("rope_factors_long.weight", n, false, owned);
  const float* shrt = b.vector("rope_factors_short.weight", n, false, owned);
  if (!lng != !shrt) {
    throw tensor_error(lng ? "rope_factors_short.weight" : "rope_factors_long.weight",
                       std::string("missing: LongRoPE needs both factor tensors, and only ") +
                           (lng ? "rope_factors_long" : "rope_factors_short") + ".weight is present");
  }
  if (freqs || !lng) return {freqs, false};
  // llama.cpp pads each sequence's context to a multiple of 256 before comparing
  const int64_t n_ctx_seq = (int64_t(context > 0 ? context : hp.n_ctx_train) + 255) / 256 * 256;
  const bool use_long = n_ctx_seq > hp.n_ctx_orig;
  return {use_long ? lng : shrt, use_long};
}

}  // namespace

kernels::WeightMatrix expert(const kernels::WeightMatrix& stacked, int e, int n_expert) {
  const int64_t rows = stacked.n_out / n_expert;
  return row_range(stacked, int64_t(e) * rows, rows);
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
  gguf::OpenOptions oo;
  oo.lock_in_memory = opts.mlock;
  oo.huge_page_copy = !opts.mmap;
  auto model = from_file(gguf::File::open(path, oo), opts.context);
  if (opts.prefetch) model->file_->prefetch();
  // The debug log of which kernel runs each batch size (INFER_LOG_KERNELS=1), on stderr.
  if (const char* v = std::getenv("INFER_LOG_KERNELS"); v && *v && std::string_view(v) != "0") {
    for (const auto& [type, interleaved] : model->matmul_kinds()) {
      std::fprintf(stderr, "infer: %s: matmul plan, %s%s: %s\n", path.c_str(), std::string(gguf::type_name(type)).c_str(),
                   interleaved ? " (interleaved)" : "", kernels::describe_plans(type, interleaved).c_str());
    }
  }
  return model;
}

std::set<std::pair<kernels::TensorType, bool>> Model::matmul_kinds() const {
  std::set<std::pair<kernels::TensorType, bool>> kinds;
  auto add = [&](const kernels::WeightMatrix& w) {
    if (w.data) kinds.insert({w.type, w.interleaved});
  };
  for (const LayerWeights& l : layers_) {
    for (const kernels::WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps,
                                           &l.up_exps, &l.down_exps}) {
      add(*w);
    }
  }
  add(output_);
  return kinds;
}

std::unique_ptr<Model> Model::from_file(std::unique_ptr<gguf::File> file, int context) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  m->hp_ = read_hparams(*m->file_);
  m->recipe_ = describe_layers(m->hp_);
  const HParams& hp = m->hp_;
  Binder b(*m->file_);
  auto& owned = m->owned_small_;

  m->token_embd_ = b.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  if (hp.has_classifier()) {
    m->output_norm_ = b.vector("output_norm.weight", hp.n_embd, true, owned);
    m->output_ = hp.tied_output ? m->token_embd_ : b.matrix("output.weight", hp.n_embd, hp.n_vocab);
  }
  if (hp.arch == Arch::Qwen2) m->output_bias_ = b.vector("output.bias", hp.n_vocab, false, owned);
  if (hp.arch == Arch::Llama || hp.arch == Arch::Phi3) {
    const RopeFactors rf = bind_rope_factors(b, hp, context, owned);
    m->rope_factors_ = rf.divisors;
    m->rope_long_ = rf.long_factors;
  }
  if (m->recipe_.embedding_layernorm()) {
    m->position_embd_ = b.matrix("position_embd.weight", hp.n_embd, hp.n_ctx_train);
    m->token_type0_ = b.first_row("token_types.weight", hp.n_embd, owned);
    m->embd_norm_ = b.vector("token_embd_norm.weight", hp.n_embd, true, owned);
    m->embd_norm_b_ = b.vector("token_embd_norm.bias", hp.n_embd, true, owned);
  }

  m->layers_.resize(size_t(hp.n_layer));
  for (int i = 0; i < hp.n_layer; ++i) {
    bind_layer(b, hp, m->recipe_.layers[size_t(i)], "blk." + std::to_string(i) + ".", m->layers_[size_t(i)], owned);
  }
  b.check_all_used();
  if (m->file_->copied()) m->interleave_matrices();
  return m;
}

void Model::interleave_matrices() {
  // Every matrix the forward pass reads, with the rows of the pieces its kernels see (an expert's
  // rows for a stack of experts; phi3's q, k, v and gate, up are row ranges of one tensor).
  struct View {
    kernels::WeightMatrix* w;
    int64_t piece_rows;
  };
  std::vector<View> all = {{&token_embd_, token_embd_.n_out}, {&output_, output_.n_out}};
  for (LayerWeights& L : layers_) {
    for (kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) all.push_back({w, w->n_out});
    for (kernels::WeightMatrix* w : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      all.push_back({w, hp_.n_expert > 0 ? w->n_out / hp_.n_expert : w->n_out});
    }
  }
  // By tensor (a tied output is the token embedding's tensor, rewritten once). A tensor is rewritten
  // only when every piece read from it starts on a whole group of rows and spans whole groups (or ends
  // the tensor): the interleaved kernels read groups, never rows of a group shared with another piece.
  std::vector<std::string> names;
  std::map<const void*, std::vector<kernels::WeightMatrix*>> by_data;
  for (const auto& t : file_->tensors()) {
    const auto* begin = static_cast<const uint8_t*>(t.data);
    const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
    std::vector<kernels::WeightMatrix*> views;
    bool aligned = true;
    for (const View& v : all) {
      const auto* at = static_cast<const uint8_t*>(v.w->data);
      if (!at || at < begin || at >= begin + t.n_bytes || !kernels::interleaved_kernels_available(v.w->type)) continue;
      const int64_t first = (at - begin) / int64_t(v.w->row_bytes);
      const bool whole_pieces = v.piece_rows % kernels::kInterleaveRows == 0 ||
                                (v.piece_rows == v.w->n_out && first + v.w->n_out == rows);
      aligned = aligned && first % kernels::kInterleaveRows == 0 && whole_pieces;
      views.push_back(v.w);
    }
    if (views.empty() || !aligned) continue;
    names.push_back(t.name);
    by_data[t.data] = std::move(views);
  }
  file_->rewrite(names, [&](const gguf::TensorView& t, uint8_t* bytes) {
    kernels::interleave_rows(t.type, bytes, t.ne[0], t.ne[1] * t.ne[2] * t.ne[3]);
    for (kernels::WeightMatrix* w : by_data[t.data]) w->interleaved = true;
  });
  interleaved_matrices_ = int(names.size());
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for (const auto& t : file_->tensors()) total += t.n_bytes;
  return total;
}

uint64_t Model::active_weight_bytes() const {
  static constexpr std::string_view kStack = "_exps.weight";  // ffn_{gate,up,down}_exps
  uint64_t total = 0;
  for (const auto& t : file_->tensors()) {
    const bool stack = hp_.is_moe() && t.name.size() > kStack.size() && t.name.ends_with(kStack);
    total += stack ? t.n_bytes / uint64_t(hp_.n_expert) * uint64_t(hp_.n_expert_used) : t.n_bytes;
  }
  return total;
}

}  // namespace infer::model
