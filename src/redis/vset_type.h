// The module data type "infervset" that holds one vector::VectorSet per key, and key access helpers for
// the INFER.V* commands, EMBED ... STORE and RAG. Main thread only (the global lock is held).
//
// Persistence: RDB saves the set's records (vector/serialize.h) with the type's encoding version, graph
// included, so loading does not re-insert. AOF rewrite emits one INFER.VADD per element (FP32 vector as
// stored, quantisation, M, attributes, and REDUCED-FROM for a REDUCE set): the graph is rebuilt on AOF
// load, the results stay the same up to HNSW approximation. It is mandatory on Redis 7.0 (spec §0.8).
#pragma once
#include <memory>

#include "redis/module_api.h"
#include "vector/vector_set.h"

namespace infer::redis {

// CreateDataType("infervset", ...); OnLoad only.
int register_vset_type(RedisModuleCtx* ctx);
RedisModuleType* vset_type();

// An open key and the set in it. `set` is null when the key is empty; `wrong_type` when it holds
// something else. Closes the key on destruction.
struct VsetKey {
  RedisModuleKey* key = nullptr;
  vector::VectorSet* set = nullptr;
  bool wrong_type = false;

  VsetKey(RedisModuleCtx* ctx, RedisModuleString* name, int mode);
  ~VsetKey();
  VsetKey(const VsetKey&) = delete;
  VsetKey& operator=(const VsetKey&) = delete;
  // Moves a new set into the (empty, writable) key and returns it.
  vector::VectorSet* store(std::unique_ptr<vector::VectorSet> fresh);
};

}  // namespace infer::redis
