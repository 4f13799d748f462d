#include "model/batch_check.h"

#include <stdexcept>
#include <string>

namespace infer::model {

int check_batch(const HParams& hp, const Batch& batch, int page_tokens, int n_pages, int max_rows,
                std::vector<int>& out_rows) {
  const int n = int(batch.rows.size());
  if (n > max_rows) {
    throw std::invalid_argument("forward: batch of " + std::to_string(n) + " rows exceeds max_rows " +
                                std::to_string(max_rows));
  }
  out_rows.clear();
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    auto where = [r] { return "forward: row " + std::to_string(r) + ": "; };  // built only on error
    if (row.token < 0 || row.token >= hp.n_vocab) {
      throw std::out_of_range(where() + "token id " + std::to_string(row.token) + " out of range [0, " +
                              std::to_string(hp.n_vocab) + ")");
    }
    if (row.pos < 0 || row.pos >= hp.n_ctx_train) {
      throw std::out_of_range(where() + "position " + std::to_string(row.pos) + " out of the context [0, " +
                              std::to_string(hp.n_ctx_train) + ")");
    }
    if (row.seq < 0 || row.seq >= int(batch.seqs.size())) {
      throw std::out_of_range(where() + "sequence index " + std::to_string(row.seq) + " out of range");
    }
    const SeqPages& sp = batch.seqs[size_t(row.seq)];
    const int last_page = row.pos / page_tokens;
    if (!sp.page_table || last_page >= sp.n_pages) {
      throw std::out_of_range(where() + "position " + std::to_string(row.pos) + " is past the sequence's " +
                              std::to_string(sp.n_pages) + " KV pages");
    }
    for (int p = 0; p <= last_page; ++p) {
      if (sp.page_table[p] < 0 || sp.page_table[p] >= n_pages) {
        throw std::out_of_range(where() + "page table entry " + std::to_string(p) + " = " +
                                std::to_string(sp.page_table[p]) + " is not a page of the pool");
      }
    }
    if (row.want_logits && !hp.has_classifier()) {
      throw std::invalid_argument(where() + "wants logits, but a " + hp.arch_name +
                                  " model is an embedding model (no classifier)");
    }
    if (row.want_logits) out_rows.push_back(r);
  }
  const int n_logits = int(out_rows.size());
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    if (row.want_hidden && !row.want_logits) out_rows.push_back(r);
  }
  return n_logits;
}

int check_run(const HParams& hp, const Batch& batch, int page_tokens, int n_pages, int max_rows,
              std::vector<int>& out_rows, const float* logits, const float* hidden) {
  const int n_logit_rows = check_batch(hp, batch, page_tokens, n_pages, max_rows, out_rows);
  if (!out_rows.empty() && !logits && !hidden) {
    throw std::invalid_argument("forward: rows want outputs but no logits or hidden buffer was given");
  }
  if (int(out_rows.size()) > n_logit_rows && !hidden) {
    throw std::invalid_argument("forward: rows want hidden states but no hidden buffer was given");
  }
  return n_logit_rows;
}

}  // namespace infer::model
