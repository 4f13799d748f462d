// The module data type "infervset" that holds one vector::VectorSet per key, and key access helpers for
// the INFER.V* commands, EMBED ... STORE and RAG. Main thread only (the global lock is held), except what
// SharedVset says about search threads.
//
// Persistence: RDB saves the set's records (vector/serialize.h) with the type's encoding version, graph
// included, so loading does not re-insert. AOF rewrite emits one INFER.VADD per element (FP32 vector as
// stored, quantisation, M, attributes, and REDUCED-FROM for a REDUCE set): the graph is rebuilt on AOF
// load, the results stay the same up to HNSW approximation. It is mandatory on Redis 7.0 (spec §0.8).
#pragma once
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "redis/module_api.h"
#include "vector/vector_set.h"

namespace infer::redis {

// The value behind one key. It is shared by the key and by every search running off the main thread
// (vset_read.cpp), so DEL, UNLINK or FLUSHALL during a search only drop the key's reference and the set
// goes when the search is done. Search threads read under read(); main-thread writers change the set
// under write(), which waits for running searches. Main-thread reads need no lock: the only writers are
// on the main thread too.
class SharedVset {
 public:
  explicit SharedVset(std::unique_ptr<vector::VectorSet> s) : set_(std::move(s)) {}
  vector::VectorSet& set() { return *set_; }
  // Writer preference: once a writer waits at the gate no new search starts, so a stream of searches
  // cannot hold the main thread back for longer than the ones already running.
  std::shared_lock<std::shared_mutex> read() {
    std::lock_guard<std::mutex> g(gate_);
    return std::shared_lock<std::shared_mutex>(mu_);
  }
  std::unique_lock<std::shared_mutex> write() {
    std::lock_guard<std::mutex> g(gate_);
    return std::unique_lock<std::shared_mutex>(mu_);
  }

 private:
  std::unique_ptr<vector::VectorSet> set_;
  std::mutex gate_;
  std::shared_mutex mu_;
};
using VsetRef = std::shared_ptr<SharedVset>;

// CreateDataType("infervset", ...); OnLoad only.
int register_vset_type(RedisModuleCtx* ctx);
RedisModuleType* vset_type();

// An open key and the set in it. `set` is null when the key is empty; `wrong_type` when it holds
// something else. Opened for writing, it holds the set's write lock until it closes (so every writer,
// EMBED ... STORE included, waits for running searches). Closes the key on destruction.
struct VsetKey {
  RedisModuleKey* key = nullptr;
  vector::VectorSet* set = nullptr;
  bool wrong_type = false;
  VsetRef shared;  // keeps the value alive while the key is open, even if DeleteKey drops the key's reference
  std::unique_lock<std::shared_mutex> write_lock;  // declared after `shared`: released before it

  VsetKey(RedisModuleCtx* ctx, RedisModuleString* name, int mode);
  ~VsetKey();
  VsetKey(const VsetKey&) = delete;
  VsetKey& operator=(const VsetKey&) = delete;
  // Moves a new set into the (empty, writable) key and returns it.
  vector::VectorSet* store(std::unique_ptr<vector::VectorSet> fresh);
};

}  // namespace infer::redis
