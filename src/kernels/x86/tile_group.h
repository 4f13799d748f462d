// The run-time row count of a batch tile turned into its compile-time kernel, shared by the AVX2 and
// the AVX-512 tiles. Internal linkage: files compiled for different CPUs must share no instantiation
// (avx512_common.h explains why). Internal to src/kernels.
#pragma once

namespace infer::kernels {
namespace {

// One group of `rows` (1..NR) activation rows: Tile::tile_rows<rows>(args...).
template <int NR, class Tile, class... Args>
void tile_group(int rows, Args... args) {
  if constexpr (NR > 1) {
    if (rows < NR) return tile_group<NR - 1, Tile>(rows, args...);
  }
  Tile::template tile_rows<NR>(args...);
}

}  // namespace
}  // namespace infer::kernels
