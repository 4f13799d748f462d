// The CPU "device" of layer streaming (layer_streamer.h): host memory under a budget, one copy thread
// as the transfer stream, and the caller's thread as the compute stream, so that tests run the CUDA
// schedule on the CPU. The compute stream being synchronous, a consumed event is complete when it is
// recorded: what keeps a copy out of a slot still in use is that it is queued only after the slot's
// record_consumed, as on CUDA. The device checks it: a copy into a slot that is being read (between
// wait_copied and record_consumed) is counted in stats().overlaps.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "model/layer_streamer.h"

namespace infer::model {

class CpuStreamDevice : public StreamDevice {
 public:
  struct Options {
    uint64_t budget_bytes = 0;  // alloc throws past this many bytes in use
    // Each queued copy first sleeps a random max/2..max µs (a slow, jittery link; tests).
    int max_copy_delay_us = 0;
    uint32_t seed = 1;
  };
  explicit CpuStreamDevice(const Options& opts);
  // Finishes the queued copies (skipping waits for a consumption that was never recorded); frees what
  // is still allocated.
  ~CpuStreamDevice() override;
  CpuStreamDevice(const CpuStreamDevice&) = delete;
  CpuStreamDevice& operator=(const CpuStreamDevice&) = delete;

  void* alloc(uint64_t bytes) override;
  void free(void* p) override;
  void copy(void* dst, const void* src, uint64_t bytes) override;
  void open_slots(int n_slots) override;
  void wait_consumed(int slot) override;
  void copy_async(int slot, void* dst, const void* src, uint64_t bytes) override;
  void record_copied(int slot) override;
  void wait_copied(int slot) override;
  void record_consumed(int slot) override;
  void synchronize() override;
  bool host_readable() const override { return true; }

  uint64_t used_bytes() const;
  struct Stats {
    uint64_t copies = 0;         // asynchronous copies done
    uint64_t bytes = 0;
    uint64_t overlaps = 0;       // copies during which their slot was being read
    uint64_t compute_waits = 0;  // wait_copied calls that found the copies not yet done
  };
  Stats stats() const;

 protected:
  // The compute stream starts reading `slot` (wait_copied calls it once the copies are done).
  void begin_read(int slot);

 private:
  struct Op {
    enum Kind { Copy, Record, Wait } kind;
    int slot;
    void* dst;
    const void* src;
    uint64_t bytes;
    uint64_t target;  // Wait: the consumed count to reach
  };
  struct Slot {
    uint64_t copied_recorded = 0, copied_done = 0;  // record_copied calls, and those the copy thread passed
    uint64_t consumed = 0;                         // record_consumed calls (the compute stream is synchronous)
    bool reading = false;
    uint64_t reads = 0;                            // begin_read calls
  };
  Options opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // any change: queue, events, reading, idle
  std::deque<Op> queue_;        // an op leaves the queue when it is done
  std::vector<Slot> slots_;
  std::map<void*, uint64_t> allocated_;
  uint64_t used_ = 0;
  Stats stats_;
  bool stop_ = false;
  std::thread thread_;

  void run();
  Slot& slot_locked(int slot);
};

}  // namespace infer::model
