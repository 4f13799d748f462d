// Model loading: hyper-parameters, then every tensor bound by name with an exact shape check
// (spec/architectures.md §2). Matrices stay views into the file's memory (DESIGN invariant 1): the
// mapping, or the huge-page copy, whose Q4_K/Q6_K matrices are rewritten in place into the interleaved
// layout where the CPU has kernels for it (kernels/interleave.h).
#include "model/model.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "kernels/interleave.h"
#include "kernels/quant.h"

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
    const gguf::TensorView* t = find(name, {n_in, n_out}, required);
    if (!t) return {};
    if (!kernels::is_supported_weight_type(t->type)) {
      throw tensor_error(name, "weight type " + std::string(gguf::type_name(t->type)) + " is not supported");
    }
    return kernels::WeightMatrix{t->type, t->data, n_in, n_out, gguf::row_bytes(t->type, uint64_t(n_in))};
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

  // llama.cpp refuses files with tensors the architecture does not load; so do we, naming one.
  void check_all_used() const {
    for (const auto& t : f_.tensors()) {
      if (!used_.count(t.name)) throw tensor_error(t.name, "not used by this architecture (unsupported layout)");
    }
  }

 private:
  const gguf::File& f_;
  std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
  gguf::OpenOptions oo;
  oo.lock_in_memory = opts.mlock;
  oo.huge_page_copy = !opts.mmap;
  auto model = from_file(gguf::File::open(path, oo));
  if (opts.prefetch) model->file_->prefetch();
  return model;
}

std::unique_ptr<Model> Model::from_file(std::unique_ptr<gguf::File> file) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  m->hp_ = read_hparams(*m->file_);
  const HParams& hp = m->hp_;
  Binder b(*m->file_);
  auto& owned = m->owned_small_;

  m->token_embd_ = b.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  m->output_norm_ = b.vector("output_norm.weight", hp.n_embd, true, owned);
  m->output_ = hp.tied_output ? m->token_embd_ : b.matrix("output.weight", hp.n_embd, hp.n_vocab);
  if (hp.arch == Arch::Qwen2) m->output_bias_ = b.vector("output.bias", hp.n_vocab, false, owned);
  if (hp.arch == Arch::Llama) m->rope_freqs_ = b.vector("rope_freqs.weight", hp.n_rot / 2, false, owned);

  const int64_t E = hp.n_embd, Q = hp.q_dim(), KV = hp.kv_dim(), F = hp.n_ff;
  m->layers_.resize(size_t(hp.n_layer));
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& L = m->layers_[size_t(i)];
    L.attn_norm = b.vector(p + "attn_norm.weight", E, true, owned);
    L.wq = b.matrix(p + "attn_q.weight", E, Q);
    L.wk = b.matrix(p + "attn_k.weight", E, KV);
    L.wv = b.matrix(p + "attn_v.weight", E, KV);
    L.bq = b.vector(p + "attn_q.bias", Q, false, owned);
    L.bk = b.vector(p + "attn_k.bias", KV, false, owned);
    L.bv = b.vector(p + "attn_v.bias", KV, false, owned);
    if (hp.arch == Arch::Qwen3) {
      L.q_norm = b.vector(p + "attn_q_norm.weight", hp.head_dim, true, owned);
      L.k_norm = b.vector(p + "attn_k_norm.weight", hp.head_dim, true, owned);
    }
    L.wo = b.matrix(p + "attn_output.weight", Q, E);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", E, true, owned);
    L.w_gate = b.matrix(p + "ffn_gate.weight", E, F);
    L.w_up = b.matrix(p + "ffn_up.weight", E, F);
    L.w_down = b.matrix(p + "ffn_down.weight", F, E);
  }
  b.check_all_used();
  if (m->file_->copied()) m->interleave_matrices();
  return m;
}

void Model::interleave_matrices() {
  std::vector<kernels::WeightMatrix*> all = {&token_embd_, &output_};
  for (LayerWeights& L : layers_) {
    for (kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) all.push_back(w);
  }
  // By tensor: a tied output is the token embedding's tensor, rewritten once.
  std::vector<std::string> names;
  std::map<const void*, std::vector<kernels::WeightMatrix*>> by_data;
  for (const auto& t : file_->tensors()) {
    for (kernels::WeightMatrix* w : all) {
      if (w->data != t.data || !kernels::interleaved_kernels_available(w->type)) continue;
      if (by_data[t.data].empty()) names.push_back(t.name);
      by_data[t.data].push_back(w);
    }
  }
  file_->rewrite(names, [&](const gguf::TensorView& t, uint8_t* bytes) {
    kernels::interleave_rows(t.type, bytes, t.ne[0], t.ne[1]);
    for (kernels::WeightMatrix* w : by_data[t.data]) w->interleaved = true;
  });
  interleaved_matrices_ = int(names.size());
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for (const auto& t : file_->tensors()) total += t.n_bytes;
  return total;
}

}  // namespace infer::model
