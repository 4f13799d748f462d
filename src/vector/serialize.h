// The persistent form of a vector set (RDB values, tests): a header record followed by one record per
// element, each a self-contained byte string, so that RDB saving streams node by node instead of
// building one huge buffer in the fork child. Loading restores the graph as saved (no re-insertion)
// and checks every count, length, id and link against the data, every norm and vector for being
// finite and what encode() writes; it trusts nothing, and no allocation is sized by a saved count.
//
// Encoding versions (loaders keep accepting every older one):
//   1: header, element records.
//   2: the header adds the REDUCE input dimension; when it is not 0, a record with the projection
//      matrix (dim × input floats) follows the header.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "vector/vector_set.h"

namespace infer::vector {

constexpr uint32_t kEncodingVersion = 2;

// Number of records save_records() emits (RDB writes the count first).
uint64_t record_count(const VectorSet& set);
// Calls `emit` with the header then each record; returns the number of records.
uint64_t save_records(const VectorSet& set, const std::function<void(std::string_view record)>& emit);
// Reads records from `next` (nullopt: input ended early). Throws VectorSetError naming the problem.
// `records`: how many records the container says follow (RDB), checked against the header before
// anything is allocated.
std::unique_ptr<VectorSet> load_records(uint32_t encoding_version,
                                        const std::function<std::optional<std::string>()>& next,
                                        std::optional<uint64_t> records = std::nullopt);

// The same records concatenated with u32 length prefixes after a version word: one byte stream.
std::string to_bytes(const VectorSet& set);
std::unique_ptr<VectorSet> from_bytes(std::string_view bytes);

}  // namespace infer::vector
