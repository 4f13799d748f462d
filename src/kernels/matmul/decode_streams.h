// How many groups side by side the interleaved layout's decode kernels read: 1 or 2 sequential
// streams. Which is faster depends on the CPU and its memory (one stream on AMD Zen 4, two measured
// best on a Sapphire Rapids Xeon; docs/performance.md, Constants), so it is chosen at run time from the
// kernels' own calls: the first ones alternate between both in phases, timed, and the faster rate of
// weight bytes per second is kept. Both read the same bytes with the same arithmetic per row, so the
// choice changes speed, never an output. INFER_DECODE_STREAMS=1 or 2 fixes it (measurements).
// Internal to src/kernels.
#pragma once
#include <cstdint>

namespace infer::kernels {

struct DecodeStreamsCall {
  int streams;        // 1 or 2
  uint64_t start_ns;  // 0: not timed (the choice is made)
};

// The stream count of one decode call, and its start time while the choice is open.
DecodeStreamsCall decode_streams_begin();
// Ends a call that read `bytes` of weights.
void decode_streams_end(const DecodeStreamsCall& call, uint64_t bytes);

// The chosen count (0 while the calls are still being timed).
int decode_streams_chosen();
// Fixes the count (1 or 2), or with 0 reopens the choice (tests).
void set_decode_streams(int streams);

}  // namespace infer::kernels
