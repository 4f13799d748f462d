// Test harness around a model::Backend (the CPU's Forward by default, or the GPU's): sequences with
// private page tables in one KV pool, fed in batches of rows, returning every row's logits. Pages are handed out in a scrambled order so that
// tests exercise the page-table indirection rather than a contiguous cache.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "kernels/runtime/thread_pool.h"
#include "model/backend.h"
#include "model/kv_pool.h"
#include "model/model.h"

// Skips the calling test, with the reason, where the CUDA backend cannot run (no CUDA build, no GPU).
#define INFER_REQUIRE_CUDA()                              \
  do {                                                    \
    std::string why_;                                     \
    if (!::infer::cuda::available(&why_)) GTEST_SKIP() << why_; \
  } while (0)

namespace infer::test {

class ForwardHarness {
 public:
  // Room for `n_seqs` sequences of up to `max_tokens` tokens each; pages of `page_tokens` tokens.
  ForwardHarness(const model::Model& m, int n_threads, int n_seqs, int max_tokens, int max_rows = 512,
                 int page_tokens = 16, model::DeviceKind device = model::DeviceKind::Cpu)
      : ForwardHarness(m, n_threads, n_seqs, max_tokens, max_rows, page_tokens, model::DeviceOptions{device}) {}
  ForwardHarness(const model::Model& m, int n_threads, int n_seqs, int max_tokens, int max_rows, int page_tokens,
                 const model::DeviceOptions& device);

  struct Chunk {
    int seq;
    std::vector<int32_t> tokens;  // fed at the sequence's next positions
  };
  // Runs all chunks as one batch (rows in chunk order); returns n_vocab logits per row, in row order.
  std::vector<std::vector<float>> feed(const std::vector<Chunk>& chunks);
  // Shorthand for one sequence.
  std::vector<std::vector<float>> feed(int seq, const std::vector<int32_t>& tokens) { return feed({{seq, tokens}}); }

  int position(int seq) const { return next_pos_[size_t(seq)]; }
  // The CPU backend's Forward and pool (diagnostics); throws std::bad_cast on another device.
  model::Forward& forward() { return dynamic_cast<model::CpuBackend&>(*backend_).forward(); }
  model::KvPool& kv() { return dynamic_cast<model::CpuBackend&>(*backend_).kv(); }
  model::Backend& backend() { return *backend_; }
  const std::vector<int32_t>& page_table(int seq) const { return tables_[size_t(seq)]; }

 private:
  const model::Model& model_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<model::Backend> backend_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int> next_pos_;
};

// Asserts that two runs gave the same rows, bit for bit (`what` names the run in a failure).
void expect_bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                          const std::string& what);

// Index of the largest logit (first one on ties).
int32_t argmax(const std::vector<float>& logits);

}  // namespace infer::test
