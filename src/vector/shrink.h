// Giving memory back from the flat per-slot buffers of a vector set when elements are removed.
#pragma once
#include <algorithm>
#include <iterator>

namespace infer::vector {

// Reallocates `v` once it is less than half used, keeping 50% headroom, so that alternating inserts and
// removals never reallocate back and forth.
template <class V>
void shrink_if_sparse(V& v) {
  if (v.size() >= v.capacity() / 2) return;
  V smaller;
  smaller.reserve(v.size() + v.size() / 2);
  std::move(v.begin(), v.end(), std::back_inserter(smaller));
  v.swap(smaller);
}

}  // namespace infer::vector
