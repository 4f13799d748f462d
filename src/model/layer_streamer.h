// Layer streaming's executor (issue 24): the resident layers copied to the device once; each streamed
// layer copied into one of plan.depth slots on a transfer stream while the layers before it compute,
// and that slot refilled with the layer `depth` streamed layers later only after its layer finished.
// Host code over an abstract copy device: CUDA (a transfer stream and events) or the CPU test device
// (cpu_stream_device.h), so that CI tests the schedule without a GPU.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/stream_plan.h"

namespace infer::model {

// Device memory and two streams: the transfer stream (the asynchronous copies, in the order issued)
// and the compute stream (the caller's work), ordered by two events per slot. Each call maps to one
// CUDA call, noted on the right. Calls come from one thread, the one running the forward pass.
class StreamDevice {
 public:
  virtual ~StreamDevice() = default;
  // Device memory (256-byte aligned); throws std::runtime_error naming the bytes past the budget.
  virtual void* alloc(uint64_t bytes) = 0;                            // cudaMalloc
  virtual void free(void* p) = 0;                                     // cudaFree
  // Blocking host→device copy (resident weights, at load).
  virtual void copy(void* dst, const void* src, uint64_t bytes) = 0;  // cudaMemcpy
  // Creates the events of n_slots slots; nothing may be queued.
  virtual void open_slots(int n_slots) = 0;                           // 2 × cudaEventCreate per slot

  // Transfer stream: the next copies wait until the compute stream passed the last
  // record_consumed(slot) issued before this call (immediately when there was none).
  virtual void wait_consumed(int slot) = 0;                           // cudaStreamWaitEvent(transfer, consumed)
  // Queues a host→device copy into `slot`'s memory; `src` stays valid and unchanged until it is done.
  virtual void copy_async(int slot, void* dst, const void* src, uint64_t bytes) = 0;  // cudaMemcpyAsync
  virtual void record_copied(int slot) = 0;                           // cudaEventRecord(copied, transfer)

  // Compute stream: the work issued after this sees the copies before the last record_copied(slot).
  virtual void wait_copied(int slot) = 0;                             // cudaStreamWaitEvent(compute, copied)
  // Marks the compute stream's reads of `slot` issued so far as the ones a later wait_consumed waits for.
  virtual void record_consumed(int slot) = 0;                         // cudaEventRecord(consumed, compute)

  virtual void synchronize() = 0;                                     // cudaStreamSynchronize(transfer)
  // Whether the host may read device memory directly (the CPU device): LayerStreamer's verify_contents.
  virtual bool host_readable() const { return false; }
};

// One layer's device layout: every matrix and F32 vector its LayerWeights points to, each at its own
// 256-byte-aligned offset (fused views such as phi3's q/k/v row ranges as their own ranges).
struct LayerPiece {
  const void* src;   // in the model's host memory
  uint64_t bytes;    // a matrix's n_out × row_bytes, a vector's floats
  uint64_t offset;   // in the layer's device block
};
struct LayerLayout {
  std::vector<LayerPiece> pieces;
  uint64_t bytes = 0;  // the device block, padding included
};
LayerLayout layer_layout(const HParams& hp, const LayerWeights& L);
// `L` with every pointer moved to its piece in the device block at `base` (the other fields, e.g.
// row_bytes and the interleaved flag, kept).
LayerWeights rebase(const HParams& hp, const LayerWeights& L, const LayerLayout& layout, void* base);

// The planner's inputs from a loaded model: each layer's layer_layout().bytes, and the bytes of every
// tensor outside the layers (embeddings, output, norms).
std::vector<uint64_t> layer_device_bytes(const Model& m);
uint64_t non_layer_bytes(const Model& m);

// The streaming LayerSource. Construction allocates the resident blocks and the slots on `device`,
// copies the resident layers, and queues the copies of the first `depth` streamed layers; after each
// streamed layer's release it queues the one `depth` streamed layers later, wrapping round into the
// next pass (so the next pass's first layers copy while this one ends). Not thread-safe: the forward
// pass's thread only. The host layers and `device` must outlive it.
class LayerStreamer final : public LayerSource {
 public:
  struct Options {
    // Compare each streamed layer's slot with its host bytes when acquired and when released (a
    // host-readable device only): the test that no slot was overwritten while its layer ran.
    bool verify_contents = false;
  };
  // `layers`: the host copy of each layer in the device's weight format (the model's own layers where
  // the device reads the file's format, as the CPU device does). Throws std::invalid_argument when the
  // plan is not for these layers (layer count, a layer larger than the slots), and what device.alloc
  // throws when the budget is exceeded.
  LayerStreamer(const HParams& hp, const std::vector<LayerWeights>& layers, const StreamPlan& plan,
                StreamDevice& device, Options opts);
  LayerStreamer(const Model& model, const StreamPlan& plan, StreamDevice& device, Options opts)
      : LayerStreamer(model.hparams(), model.layers(), plan, device, opts) {}
  LayerStreamer(const Model& model, const StreamPlan& plan, StreamDevice& device)
      : LayerStreamer(model.hparams(), model.layers(), plan, device, Options{}) {}
  ~LayerStreamer() override;  // waits for the queued copies, frees the device memory
  LayerStreamer(const LayerStreamer&) = delete;
  LayerStreamer& operator=(const LayerStreamer&) = delete;

  const LayerWeights& acquire(int layer) override;
  void release(int layer) override;

  // The verification counters (tests read them).
  struct Stats {
    uint64_t layer_copies = 0;     // streamed layer copies queued
    uint64_t bytes_copied = 0;
    uint64_t streamed_reads = 0;   // acquires of streamed layers
    uint64_t slot_mismatches = 0;  // a slot that, when acquired or released, held another layer or
                                   // generation than its acquire found, or (verify_contents) other bytes
    uint64_t contents_checked = 0; // slots compared byte for byte
  };
  const Stats& stats() const { return stats_; }
  const StreamPlan& plan() const { return plan_; }

 private:
  struct Slot {
    void* mem = nullptr;
    int layer = -1;           // the layer last queued into it
    uint64_t generation = 0;  // copies queued into it
    bool held = false;        // between acquire and release
    LayerWeights view;        // the held layer, pointing into mem
  };
  const HParams& hp_;
  const std::vector<LayerWeights>& layers_;
  StreamPlan plan_;
  StreamDevice& dev_;
  Options opts_;
  std::vector<LayerLayout> layouts_;
  std::vector<void*> resident_mem_;
  std::vector<LayerWeights> resident_;
  std::vector<Slot> slots_;
  int next_layer_ = 0;        // the layer the next acquire expects
  int held_layer_ = -1;
  uint64_t held_generation_ = 0;
  uint64_t next_read_ = 0;    // streamed reads so far: read k is layer R + k mod S in slot k mod depth
  uint64_t next_copy_ = 0;    // copies queued so far, in the same numbering
  Stats stats_;

  int n_streamed() const { return plan_.n_layer - plan_.resident_layers; }
  void queue_copy();
  bool contents_match(const Slot& s, int layer) const;
  void check_slot(const Slot& s, int layer, uint64_t generation);
  void free_memory();
};

}  // namespace infer::model
