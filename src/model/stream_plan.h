// Layer streaming's planner (issue 24): for weights larger than device memory, which layers stay
// resident on the device (a prefix, "the first layers that fit"), and for the others the size and
// number of the slots their weights are copied into, one layer ahead of the compute per slot.
// Host code only: the CUDA backend and the CPU test device (cpu_stream_device.h) share it.
#pragma once
#include <cstdint>
#include <vector>

namespace infer::model {

struct StreamPlanInput {
  std::vector<uint64_t> layer_bytes;  // device bytes of each layer (layer_device_bytes(), padding included)
  uint64_t other_bytes = 0;           // the non-layer weights (embeddings, output, norms), always resident
  uint64_t budget_bytes = 0;          // device memory for the weights; the caller has taken off KV and scratch
  int resident_layers = -1;           // the layers to keep resident, or -1: as many as fit
  int depth = 0;                      // slots, or 0: enough to hide a copy behind the compute (below)
  double copy_bytes_per_s = 0;        // measured host→device bandwidth; 0 = unknown
  double layer_compute_s = 0;         // estimate of one layer's compute; 0 = unknown
  uint64_t align = 256;               // slot size granularity (a power of two)
};

struct StreamPlan {
  int n_layer = 0;
  int resident_layers = 0;        // layers [0, resident_layers) stay on the device; the rest stream
  int depth = 0;                  // slots (0 when every layer is resident)
  uint64_t slot_bytes = 0;        // the largest streamed layer, aligned (0 when none streams)
  uint64_t resident_bytes = 0;    // the resident layers' bytes
  uint64_t streamed_bytes_per_pass = 0;  // copied each forward pass, so each decoded token
  uint64_t device_bytes = 0;      // other + resident + depth × slot: at most the budget

  bool streams() const { return resident_layers < n_layer; }
};

// Chooses the plan. With depth 0 the target depth is ceil(copy time / compute time) + 1 of the largest
// layer (2 when either is unknown), at least 2, lowered to what the budget allows (down to 1) and to
// the number of streamed layers; the remaining budget then keeps the longest prefix of layers resident.
// Everything stays resident when it all fits (unless resident_layers asks for fewer).
// Throws std::invalid_argument for a malformed request (no layers, resident_layers or depth out of
// range) and std::runtime_error, naming the bytes, when the budget cannot hold the non-layer weights
// and one slot of the largest layer, or the requested resident layers or depth.
StreamPlan plan_streaming(const StreamPlanInput& in);

}  // namespace infer::model
