// ReferenceForward (reference_forward.h): plain loops in double, one function, top to bottom.
#include "reference_forward.h"

#include <algorithm>
#include <cmath>

#include "kernels/quant/interleave.h"
#include "kernels/quant/quant.h"

namespace infer::test {
namespace {

std::vector<float> copy_vec(const float* p, int64_t n) { return p ? std::vector<float>(p, p + n) : std::vector<float>{}; }

// y = x / sqrt(mean(x²) + eps) * w, in double.
void rmsnorm(std::vector<double>& x, size_t off, size_t n, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double r = 1.0 / std::sqrt(ss / double(n) + eps);
  for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * r * w[i];
}

// GELU, tanh approximation, in double (the engine's f16 table stays within 2e-3 σ of it).
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x))); }

}  // namespace

ReferenceForward::Matrix ReferenceForward::dequantize(const kernels::WeightMatrix& w) {
  Matrix m;
  m.n_in = w.n_in;
  m.n_out = w.n_out;
  m.w.resize(size_t(w.n_in * w.n_out));
  // Either layout: a loaded model's matrices may be interleaved (kernels/quant/interleave.h).
  for (int64_t r = 0; r < w.n_out; ++r) kernels::dequantize_weight_row(w, r, &m.w[size_t(r * w.n_in)]);
  return m;
}

std::vector<double> ReferenceForward::matvec(const Matrix& m, const std::vector<double>& x) {
  std::vector<double> y(size_t(m.n_out));
  for (int64_t o = 0; o < m.n_out; ++o) {
    const float* row = &m.w[size_t(o * m.n_in)];
    double acc = 0;
    for (int64_t i = 0; i < m.n_in; ++i) acc += double(row[i]) * x[size_t(i)];
    y[size_t(o)] = acc;
  }
  return y;
}

ReferenceForward::ReferenceForward(const model::Model& m) : hp_(m.hparams()) {
  token_embd_ = dequantize(m.token_embd());
  output_ = dequantize(m.output());
  output_norm_ = copy_vec(m.output_norm(), hp_.n_embd);
  output_bias_ = copy_vec(m.output_bias(), hp_.n_vocab);
  rope_factors_ = copy_vec(m.rope_factors(), hp_.n_rot / 2);
  for (const model::LayerWeights& L : m.layers()) {
    Layer r;
    r.attn_norm = copy_vec(L.attn_norm, hp_.n_embd);
    r.ffn_norm = copy_vec(L.ffn_norm, hp_.n_embd);
    r.bq = copy_vec(L.bq, hp_.q_dim());
    r.bk = copy_vec(L.bk, hp_.kv_dim());
    r.bv = copy_vec(L.bv, hp_.kv_dim());
    r.q_norm = copy_vec(L.q_norm, hp_.head_dim);
    r.k_norm = copy_vec(L.k_norm, hp_.head_dim);
    r.post_attn_norm = copy_vec(L.post_attn_norm, hp_.n_embd);
    r.post_ffn_norm = copy_vec(L.post_ffn_norm, hp_.n_embd);
    r.wq = dequantize(L.wq);
    r.wk = dequantize(L.wk);
    r.wv = dequantize(L.wv);
    r.wo = dequantize(L.wo);
    if (hp_.is_moe()) {
      r.router = dequantize(L.router);
      for (int e = 0; e < hp_.n_expert; ++e) {
        r.gate_exps.push_back(dequantize(model::expert(L.gate_exps, e, hp_.n_expert)));
        r.up_exps.push_back(dequantize(model::expert(L.up_exps, e, hp_.n_expert)));
        r.down_exps.push_back(dequantize(model::expert(L.down_exps, e, hp_.n_expert)));
      }
      layers_.push_back(std::move(r));
      continue;
    }
    r.gate = dequantize(L.w_gate);
    r.up = dequantize(L.w_up);
    r.down = dequantize(L.w_down);
    layers_.push_back(std::move(r));
  }
}

std::vector<std::vector<float>> ReferenceForward::run(const std::vector<int32_t>& tokens) const {
  const size_t E = size_t(hp_.n_embd), HD = size_t(hp_.head_dim);
  const size_t n_head = size_t(hp_.n_head), n_kv = size_t(hp_.n_kv_head), n_gqa = n_head / n_kv;
  const double eps = hp_.rms_eps;
  // cache[layer][pos] = K or V row (kv_dim doubles)
  std::vector<std::vector<std::vector<double>>> kcache(layers_.size()), vcache(layers_.size());
  std::vector<std::vector<float>> all_logits;

  auto rope = [&](std::vector<double>& v, size_t off, int pos, bool local) {
    const size_t half = size_t(hp_.n_rot) / 2;
    const double base = local ? hp_.rope_freq_base_swa : hp_.rope_freq_base;
    for (size_t i = 0; i < half; ++i) {
      double theta = double(pos) * std::pow(base, -2.0 * double(i) / double(hp_.n_rot));
      if (!local && !rope_factors_.empty()) theta /= rope_factors_[i];
      if (!local) theta *= hp_.rope_freq_scale;
      const double c = hp_.rope_mscale * std::cos(theta), s = hp_.rope_mscale * std::sin(theta);
      const bool adjacent = hp_.arch == model::Arch::Llama;  // spec §4.3: llama pairs adjacent elements
      const size_t a = adjacent ? off + 2 * i : off + i;
      const size_t b = adjacent ? off + 2 * i + 1 : off + i + half;
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  };
  auto add = [](std::vector<double>& y, const std::vector<float>& b) {
    for (size_t i = 0; i < b.size(); ++i) y[i] += b[i];
  };
  // down(act(gate·h) ⊙ up·h), act SiLU or (gemma3) GELU
  auto gated_ffn = [&](const Matrix& gate, const Matrix& up, const Matrix& down, const std::vector<double>& h) {
    std::vector<double> g = matvec(gate, h);
    const std::vector<double> u = matvec(up, h);
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = (hp_.arch == model::Arch::Gemma3 ? gelu(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
    }
    return matvec(down, g);
  };
  // qwen3moe: softmax over all experts, the n_expert_used most probable renormalised, their outputs summed
  auto moe_ffn = [&](const Layer& L, const std::vector<double>& h) {
    std::vector<double> p = matvec(L.router, h);
    const double max = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - max));
    for (double& v : p) v /= sum;
    std::vector<int> order(p.size());
    for (size_t e = 0; e < p.size(); ++e) order[e] = int(e);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    double chosen = 0;
    for (int j = 0; j < hp_.n_expert_used; ++j) chosen += p[size_t(order[size_t(j)])];
    std::vector<double> out(h.size(), 0.0);
    for (int j = 0; j < hp_.n_expert_used; ++j) {
      const size_t e = size_t(order[size_t(j)]);
      const std::vector<double> y = gated_ffn(L.gate_exps[e], L.up_exps[e], L.down_exps[e], h);
      for (size_t i = 0; i < out.size(); ++i) out[i] += p[e] / chosen * y[i];
    }
    return out;
  };

  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x(E);
    for (size_t i = 0; i < E; ++i) x[i] = token_embd_.w[size_t(tokens[pos]) * E + i] * double(hp_.embd_scale);

    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      const bool local = hp_.is_local_layer(int(l));
      // attention rmsnorm
      std::vector<double> h = x;
      rmsnorm(h, 0, E, L.attn_norm, eps);
      // qkv matmuls, biases
      std::vector<double> q = matvec(L.wq, h), k = matvec(L.wk, h), v = matvec(L.wv, h);
      add(q, L.bq);
      add(k, L.bk);
      add(v, L.bv);
      // q/k norm (qwen3), RoPE
      if (!L.q_norm.empty()) {
        for (size_t hh = 0; hh < n_head; ++hh) rmsnorm(q, hh * HD, HD, L.q_norm, eps);
        for (size_t hh = 0; hh < n_kv; ++hh) rmsnorm(k, hh * HD, HD, L.k_norm, eps);
      }
      for (size_t hh = 0; hh < n_head; ++hh) rope(q, hh * HD, int(pos), local);
      for (size_t hh = 0; hh < n_kv; ++hh) rope(k, hh * HD, int(pos), local);
      kcache[l].push_back(k);
      vcache[l].push_back(v);
      // causal GQA attention over positions first..pos (a local layer: the last n_swa of them)
      const size_t first = local && pos + 1 > size_t(hp_.n_swa) ? pos + 1 - size_t(hp_.n_swa) : 0;
      std::vector<double> att(q.size(), 0.0);
      for (size_t hh = 0; hh < n_head; ++hh) {
        const size_t kvo = (hh / n_gqa) * HD;
        std::vector<double> score(pos + 1, -1e300);
        double max = -1e300;
        for (size_t j = first; j <= pos; ++j) {
          double dot = 0;
          for (size_t d = 0; d < HD; ++d) dot += q[hh * HD + d] * kcache[l][j][kvo + d];
          score[j] = dot * double(hp_.attn_scale);
          max = std::max(max, score[j]);
        }
        double sum = 0;
        for (size_t j = first; j <= pos; ++j) sum += (score[j] = std::exp(score[j] - max));
        for (size_t j = first; j <= pos; ++j) {
          for (size_t d = 0; d < HD; ++d) att[hh * HD + d] += score[j] / sum * vcache[l][j][kvo + d];
        }
      }
      // output projection (gemma3: post-norm), residual
      std::vector<double> o = matvec(L.wo, att);
      if (!L.post_attn_norm.empty()) rmsnorm(o, 0, E, L.post_attn_norm, eps);
      for (size_t i = 0; i < E; ++i) x[i] += o[i];
      // ffn rmsnorm, SwiGLU / GeGLU / experts (gemma3: post-norm), residual
      h = x;
      rmsnorm(h, 0, E, L.ffn_norm, eps);
      std::vector<double> dn = hp_.is_moe() ? moe_ffn(L, h) : gated_ffn(L.gate, L.up, L.down, h);
      if (!L.post_ffn_norm.empty()) rmsnorm(dn, 0, E, L.post_ffn_norm, eps);
      for (size_t i = 0; i < E; ++i) x[i] += dn[i];
    }
    // final rmsnorm, classifier
    rmsnorm(x, 0, E, output_norm_, eps);
    std::vector<double> logits = matvec(output_, x);
    add(logits, output_bias_);
    if (const double c = hp_.logit_softcap; c > 0) {
      for (double& v : logits) v = c * std::tanh(v / c);
    }
    all_logits.emplace_back(logits.begin(), logits.end());
  }
  return all_logits;
}

}  // namespace infer::test
