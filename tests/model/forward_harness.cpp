// ForwardHarness (forward_harness.h).
#include "forward_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "cuda/cuda_backend.h"

namespace infer::test {

ForwardHarness::ForwardHarness(const model::Model& m, int n_threads, int n_seqs, int max_tokens, int max_rows,
                               int page_tokens, const model::DeviceOptions& device)
    : model_(m), next_pos_(size_t(n_seqs), 0) {
  const int pages_per_seq = (max_tokens + page_tokens - 1) / page_tokens;
  const int n_pages = pages_per_seq * n_seqs;
  pool_ = std::make_unique<kernels::ThreadPool>(n_threads);
  backend_ = cuda::make_backend(m, device, *pool_, max_rows, page_tokens, n_pages);
  // Scramble: page i of sequence s is pool page (i * n_seqs + s) reversed, so no sequence is contiguous.
  tables_.resize(size_t(n_seqs));
  for (int s = 0; s < n_seqs; ++s) {
    for (int i = 0; i < pages_per_seq; ++i) tables_[size_t(s)].push_back(n_pages - 1 - (i * n_seqs + s));
  }
}

std::vector<std::vector<float>> ForwardHarness::feed(const std::vector<Chunk>& chunks) {
  model::Batch batch;
  for (const auto& table : tables_) batch.seqs.push_back({table.data(), int(table.size())});
  for (const Chunk& c : chunks) {
    for (int32_t t : c.tokens) batch.rows.push_back({c.seq, next_pos_[size_t(c.seq)]++, t, true});
  }
  const int n_vocab = model_.hparams().n_vocab;
  std::vector<float> flat(batch.rows.size() * size_t(n_vocab));
  backend_->run(batch, flat.data());
  std::vector<std::vector<float>> out(batch.rows.size());
  for (size_t r = 0; r < out.size(); ++r) {
    out[r].assign(flat.begin() + long(r * n_vocab), flat.begin() + long((r + 1) * n_vocab));
  }
  return out;
}

void expect_bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                          const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(0, std::memcmp(a[r].data(), b[r].data(), a[r].size() * sizeof(float))) << what << ": row " << r;
  }
}

int32_t argmax(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace infer::test
