// The bounded queue of requests waiting for admission (DESIGN invariant 6): higher priority first,
// first-in first-out within a priority, and a hard capacity so that a full queue is an immediate
// refusal rather than an unbounded wait.
//
// Thread-safety: every method locks an internal mutex. Producers (any thread) call try_push(); the
// scheduler thread calls admit_front() and remove_if(). Callbacks given to those run under the lock:
// they must be short and must not touch the queue.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

namespace infer::engine {

template <typename T>
class AdmissionQueue {
 public:
  explicit AdmissionQueue(size_t capacity) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }

  // Enqueues behind every item of the same or higher priority. Returns false (item untouched) when full.
  bool try_push(T& item, int priority) {
    std::lock_guard lock(mu_);
    if (items_.size() >= capacity_) return false;
    auto it = items_.begin();
    while (it != items_.end() && it->priority >= priority) ++it;
    items_.insert(it, Entry{priority, std::move(item)});
    return true;
  }

  // Offers the front items to `admit(T&) -> bool` in order; each accepted item is removed and moved to
  // `out`. Stops at the first refusal, so an item that does not fit yet is never overtaken (no starvation
  // of large requests).
  template <typename Admit>
  void admit_front(Admit&& admit, std::vector<T>& out) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    while (n < items_.size() && admit(items_[n].value)) ++n;
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(items_[i].value));
    items_.erase(items_.begin(), items_.begin() + std::ptrdiff_t(n));
  }

  // Removes every item for which `pred(const T&)` holds, moving them to `out` in queue order.
  template <typename Pred>
  void remove_if(Pred&& pred, std::vector<T>& out) {
    std::lock_guard lock(mu_);
    std::vector<Entry> keep;
    keep.reserve(items_.size());
    for (auto& e : items_) {
      if (pred(std::as_const(e.value)))
        out.push_back(std::move(e.value));
      else
        keep.push_back(std::move(e));
    }
    items_.swap(keep);
  }

 private:
  struct Entry {
    int priority;
    T value;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Entry> items_;  // small (queue_depth); kept sorted by priority, stable
};

}  // namespace infer::engine
