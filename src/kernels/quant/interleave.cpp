// The interleaved layout's scalar transforms (interleave.h). Load time and lookups only.
#include "kernels/quant/interleave.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

namespace {
uint64_t checked_block_bytes(TensorType type) {
  const uint64_t bb = block_bytes(type);
  if (bb < 4) throw std::invalid_argument("interleave: blocks of " + std::to_string(bb) + " bytes are too short");
  return bb;
}

// A row's block (row r of its group) and its place in the group's unit: (row offset, unit offset,
// length) of each piece, the whole words first, then the tail.
template <class Copy>
void for_each_piece(uint64_t block_bytes, uint64_t r, Copy copy) {
  const uint64_t words = block_bytes / 4, tail = block_bytes % 4;
  for (uint64_t k = 0; k < words; ++k) copy(4 * k, 64 * k + 4 * r, 4);
  if (tail) copy(4 * words, 64 * words + tail * r, tail);
}
}  // namespace

bool interleaved_kernels_available(TensorType type) {
  if (!is_supported_weight_type(type)) return false;
  const RowKernels k = row_kernels(type);
  return k.dot_outputs_interleaved && k.dot_rows_interleaved;
}

void interleave_rows(TensorType type, uint8_t* data, int64_t n_in, int64_t n_out) {
  const uint64_t bb = checked_block_bytes(type);
  const uint64_t row_bytes = quant_row_bytes(type, n_in);
  const uint64_t n_blocks = row_bytes / bb;
  std::vector<uint8_t> rows(kInterleaveRows * row_bytes);
  for (int64_t g = 0; g + kInterleaveRows <= n_out; g += kInterleaveRows) {
    uint8_t* group = data + uint64_t(g) * row_bytes;
    std::memcpy(rows.data(), group, rows.size());
    for (uint64_t i = 0; i < n_blocks; ++i) {
      uint8_t* unit = group + i * kInterleaveRows * bb;
      for (uint64_t r = 0; r < kInterleaveRows; ++r) {
        const uint8_t* block = rows.data() + r * row_bytes + i * bb;
        for_each_piece(bb, r, [&](uint64_t at, uint64_t to, uint64_t len) { std::memcpy(unit + to, block + at, len); });
      }
    }
  }
}

void deinterleave_row(TensorType type, const uint8_t* data, int64_t n_in, int64_t n_out, int64_t row, uint8_t* out) {
  const uint64_t bb = checked_block_bytes(type);
  const uint64_t row_bytes = quant_row_bytes(type, n_in);
  if (row >= n_out / kInterleaveRows * kInterleaveRows) {  // a tail row: still in row layout
    std::memcpy(out, data + uint64_t(row) * row_bytes, row_bytes);
    return;
  }
  const uint64_t g = uint64_t(row) / kInterleaveRows, r = uint64_t(row) % kInterleaveRows;
  const uint8_t* group = data + g * kInterleaveRows * row_bytes;
  for (uint64_t i = 0; i < row_bytes / bb; ++i) {
    const uint8_t* unit = group + i * kInterleaveRows * bb;
    for_each_piece(bb, r, [&](uint64_t at, uint64_t from, uint64_t len) { std::memcpy(out + i * bb + at, unit + from, len); });
  }
}

void dequantize_weight_row(const WeightMatrix& w, int64_t row, float* dst) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  if (!w.interleaved) {
    dequantize_row(w.type, data + uint64_t(row) * w.row_bytes, dst, w.n_in);
    return;
  }
  thread_local std::vector<uint8_t> bytes;  // an embedding lookup per token: no allocation each time
  bytes.resize(w.row_bytes);
  deinterleave_row(w.type, data, w.n_in, w.n_out, row, bytes.data());
  dequantize_row(w.type, bytes.data(), dst, w.n_in);
}

}  // namespace infer::kernels
