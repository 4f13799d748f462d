// Fixed-width per-slot arrays (a vector set's encoded vectors and level-0 links) kept in chunks of about
// kChunkBytes: adding a slot grows only the last chunk, so a set's growth never copies all its slots at
// once on Redis's main thread, as one flat buffer does when it doubles
// (MainThreadBudget.VaddAcrossAGrowthBoundaryOfAWideSet).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vector/shrink.h"

namespace infer::vector {

template <class T>
class SlotChunks {
 public:
  // `width`: elements per slot (at least 1).
  explicit SlotChunks(size_t width) : width_(width) {
    size_t per = 1;
    while (per * 2 * width_ * sizeof(T) <= kChunkBytes && shift_ < 16) {
      per *= 2;
      ++shift_;
    }
    mask_ = (uint32_t{1} << shift_) - 1;
  }

  size_t slots() const { return slots_; }
  T* at(uint32_t slot) { return chunks_[slot >> shift_].data() + (slot & mask_) * width_; }
  const T* at(uint32_t slot) const { return chunks_[slot >> shift_].data() + (slot & mask_) * width_; }

  // Appends a slot of value-initialised elements.
  void push_slot() {
    if ((slots_ >> shift_) == chunks_.size()) chunks_.emplace_back();
    auto& last = chunks_.back();
    last.resize(last.size() + width_);
    ++slots_;
  }
  // Drops the last slot; an emptied chunk is freed, a sparse one shrunk.
  void pop_slot() {
    auto& last = chunks_.back();
    last.resize(last.size() - width_);
    --slots_;
    if (last.empty()) {
      chunks_.pop_back();
    } else {
      shrink_if_sparse(last);
    }
  }
  size_t memory_bytes() const {
    size_t bytes = chunks_.capacity() * sizeof(chunks_[0]);
    for (const auto& c : chunks_) bytes += c.capacity() * sizeof(T);
    return bytes;
  }

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  size_t width_;
  unsigned shift_ = 0;  // slots per chunk: 1 << shift_
  uint32_t mask_ = 0;
  size_t slots_ = 0;
  std::vector<std::vector<T>> chunks_;
};

}  // namespace infer::vector
