// CpuStreamDevice (cpu_stream_device.h): one mutex over the queue and the events; the copy thread does
// the memcpy outside it, so the compute thread's reads of other slots run alongside.
#include "model/cpu_stream_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

namespace infer::model {

CpuStreamDevice::CpuStreamDevice(const Options& opts) : opts_(opts), thread_([this] { run(); }) {}

CpuStreamDevice::~CpuStreamDevice() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& [p, bytes] : allocated_) std::free(p);
}

void* CpuStreamDevice::alloc(uint64_t bytes) {
  const uint64_t rounded = (bytes + 255) / 256 * 256;
  std::lock_guard lock(mu_);
  if (used_ + rounded > opts_.budget_bytes) {
    throw std::runtime_error("cpu stream device: allocating " + std::to_string(rounded) + " bytes beside the " +
                             std::to_string(used_) + " in use exceeds the budget of " +
                             std::to_string(opts_.budget_bytes) + " bytes");
  }
  void* p = std::aligned_alloc(256, rounded > 0 ? rounded : 256);
  if (!p) throw std::bad_alloc();
  allocated_[p] = rounded;
  used_ += rounded;
  return p;
}

void CpuStreamDevice::free(void* p) {
  std::lock_guard lock(mu_);
  const auto it = allocated_.find(p);
  if (it == allocated_.end()) throw std::invalid_argument("cpu stream device: free of memory it did not allocate");
  used_ -= it->second;
  allocated_.erase(it);
  std::free(p);
}

void CpuStreamDevice::copy(void* dst, const void* src, uint64_t bytes) {
  synchronize();
  std::memcpy(dst, src, bytes);
}

void CpuStreamDevice::open_slots(int n_slots) {
  std::lock_guard lock(mu_);
  if (!queue_.empty()) throw std::logic_error("cpu stream device: open_slots with copies queued");
  slots_.assign(size_t(n_slots), Slot{});
}

CpuStreamDevice::Slot& CpuStreamDevice::slot_locked(int slot) {
  if (slot < 0 || slot >= int(slots_.size())) {
    throw std::out_of_range("cpu stream device: slot " + std::to_string(slot) + " of " +
                            std::to_string(slots_.size()));
  }
  return slots_[size_t(slot)];
}

void CpuStreamDevice::wait_consumed(int slot) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({Op::Wait, slot, nullptr, nullptr, 0, slot_locked(slot).consumed});
  }
  cv_.notify_all();
}

void CpuStreamDevice::copy_async(int slot, void* dst, const void* src, uint64_t bytes) {
  {
    std::lock_guard lock(mu_);
    slot_locked(slot);
    queue_.push_back({Op::Copy, slot, dst, src, bytes, 0});
  }
  cv_.notify_all();
}

void CpuStreamDevice::record_copied(int slot) {
  {
    std::lock_guard lock(mu_);
    ++slot_locked(slot).copied_recorded;
    queue_.push_back({Op::Record, slot, nullptr, nullptr, 0, 0});
  }
  cv_.notify_all();
}

void CpuStreamDevice::wait_copied(int slot) {
  {
    std::unique_lock lock(mu_);
    Slot& s = slot_locked(slot);
    const uint64_t target = s.copied_recorded;
    if (s.copied_done < target) ++stats_.compute_waits;
    cv_.wait(lock, [&] { return s.copied_done >= target; });
  }
  begin_read(slot);
}

void CpuStreamDevice::begin_read(int slot) {
  std::lock_guard lock(mu_);
  Slot& s = slot_locked(slot);
  s.reading = true;
  ++s.reads;
}

void CpuStreamDevice::record_consumed(int slot) {
  {
    std::lock_guard lock(mu_);
    Slot& s = slot_locked(slot);
    s.reading = false;
    ++s.consumed;
  }
  cv_.notify_all();
}

void CpuStreamDevice::synchronize() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty(); });
}

uint64_t CpuStreamDevice::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

CpuStreamDevice::Stats CpuStreamDevice::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// The transfer stream: ops in order, each leaving the queue when done.
void CpuStreamDevice::run() {
  std::mt19937 rng(opts_.seed);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    const Op op = queue_.front();
    Slot& s = slots_[size_t(op.slot)];
    switch (op.kind) {
      case Op::Wait:
        cv_.wait(lock, [&] { return stop_ || s.consumed >= op.target; });  // stopping: it never comes
        break;
      case Op::Record:
        ++s.copied_done;
        break;
      case Op::Copy: {
        const uint64_t reads = s.reads;
        bool overlap = s.reading;
        const int delay_us =
            opts_.max_copy_delay_us > 0
                ? std::uniform_int_distribution<int>(opts_.max_copy_delay_us / 2, opts_.max_copy_delay_us)(rng)
                : 0;
        lock.unlock();
        if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        std::memcpy(op.dst, op.src, op.bytes);
        lock.lock();
        overlap = overlap || s.reading || s.reads != reads;
        stats_.overlaps += overlap ? 1 : 0;
        ++stats_.copies;
        stats_.bytes += op.bytes;
        break;
      }
    }
    queue_.pop_front();
    cv_.notify_all();
  }
}

}  // namespace infer::model
