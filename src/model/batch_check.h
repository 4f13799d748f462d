// The checks every backend makes before it runs a batch (Forward::run's contract, model.h).
#pragma once
#include <vector>

#include "model/hparams.h"
#include "model/model.h"

namespace infer::model {

// Validates every row against the model, a KV pool of n_pages pages of page_tokens tokens and the
// sequences' page tables, and lists the rows that want outputs: the want_logits rows first (the
// classifier reads them as one block), then the hidden-only rows. Returns how many want logits. Throws
// std::out_of_range / std::invalid_argument naming the row and the problem.
int check_batch(const HParams& hp, const Batch& batch, int page_tokens, int n_pages, int max_rows,
                std::vector<int>& out_rows);

// check_batch, then the output buffers a run was given against what the rows want: logits or hidden
// for any output row, hidden for hidden-only rows (std::invalid_argument). Returns check_batch's count.
int check_run(const HParams& hp, const Batch& batch, int page_tokens, int n_pages, int max_rows,
              std::vector<int>& out_rows, const float* logits, const float* hidden);

}  // namespace infer::model
