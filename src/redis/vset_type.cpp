#include "redis/vset_type.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "vector/serialize.h"

namespace infer::redis {
namespace {

RedisModuleType* g_type = nullptr;

// The module value is a heap-allocated VsetRef: the key's reference to the shared set.
void* new_value(std::unique_ptr<vector::VectorSet> set) { return new VsetRef(std::make_shared<SharedVset>(std::move(set))); }
const vector::VectorSet& set_of(const void* value) { return (*static_cast<const VsetRef*>(value))->set(); }

// Why a value cannot be loaded, naming its key: a warning while loading a file or a full sync (the
// server then stops or drops the sync); verbose for RESTORE, whose client gets Redis's own error.
void log_load_failure(RedisModuleIO* io, const char* why) {
  const RedisModuleString* key = rm::GetKeyNameFromIO(io);
  size_t len = 0;
  const char* name = key ? rm::StringPtrLen(key, &len) : "?";
  RedisModuleCtx* ctx = rm::GetContextFromIO(io);
  const bool loading = ctx && (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LOADING);
  rm::LogIOError(io, loading ? "warning" : "verbose", "infer: cannot load the vector set in key '%.*s': %s",
                 static_cast<int>(std::min<size_t>(len ? len : std::strlen(name), 200)), name, why);
}

// Every callback is noexcept: no C++ exception crosses into Redis. The module sets
// REDISMODULE_OPTIONS_HANDLE_IO_ERRORS (module.cpp): a short read marks `io` and returns empty values
// instead of stopping Redis, and returning NULL makes Redis refuse the value.
void* vset_rdb_load(RedisModuleIO* io, int encver) noexcept {
  try {
    const uint64_t records = rm::LoadUnsigned(io);
    if (rm::IsIOError(io)) throw vector::VectorSetError("short read");
    uint64_t read = 0;
    auto set = vector::load_records(
        static_cast<uint32_t>(encver),
        [&]() -> std::optional<std::string> {
          if (read >= records) return std::nullopt;
          ++read;
          size_t len = 0;
          char* buf = rm::LoadStringBuffer(io, &len);
          if (rm::IsIOError(io) || !buf) {
            if (buf) rm::Free(buf);
            return std::nullopt;
          }
          std::string rec(buf, len);
          rm::Free(buf);
          return rec;
        },
        records);
    if (read != records) throw vector::VectorSetError("record count does not match the saved set");
    return new_value(std::move(set));
  } catch (const std::exception& e) {
    log_load_failure(io, rm::IsIOError(io) ? "short read or a value of the wrong kind" : e.what());
  } catch (...) {
    log_load_failure(io, "unknown error");
  }
  return nullptr;
}

void vset_rdb_save(RedisModuleIO* io, void* value) noexcept {
  const auto* set = &set_of(value);
  try {
    // Runs in the fork child (or on the main thread for SAVE, where searches may read alongside): streams record by record, no lock taken.
    rm::SaveUnsigned(io, vector::record_count(*set));
    vector::save_records(*set, [&](std::string_view rec) { rm::SaveStringBuffer(io, rec.data(), rec.size()); });
  } catch (...) {
    rm::LogIOError(io, "warning", "infer: out of memory while saving a vector set");
  }
}

void vset_aof_rewrite(RedisModuleIO* io, RedisModuleString* key, void* value) noexcept {
  const auto* set = &set_of(value);
  try {
    const auto& c = set->config();
    const char* quant = c.quant == vector::Quant::F32 ? "NOQUANT" : c.quant == vector::Quant::Bin ? "BIN" : "Q8";
    // A REDUCE set keeps only reduced vectors: they are re-added as such (REDUCED-FROM), and the set
    // rebuilds the same projection from its dimensions.
    const auto from = static_cast<long long>(c.projection_input_dim);
    set->for_each([&](const std::string& name, const std::vector<float>& v, const std::string& attrs) {
      const char* blob = reinterpret_cast<const char*>(v.data());
      const size_t blob_len = v.size() * sizeof(float);
      const auto m = static_cast<long long>(c.m), ef = static_cast<long long>(c.ef_construction);
      if (attrs.empty() && !from) {
        rm::EmitAOF(io, "INFER.VADD", "scbbcclcl", key, "FP32", blob, blob_len, name.data(), name.size(), quant, "M",
                    m, "EF", ef);
      } else if (!from) {
        rm::EmitAOF(io, "INFER.VADD", "scbbcclclcb", key, "FP32", blob, blob_len, name.data(), name.size(), quant,
                    "M", m, "EF", ef, "SETATTR", attrs.data(), attrs.size());
      } else if (attrs.empty()) {
        rm::EmitAOF(io, "INFER.VADD", "scbbcclclcl", key, "FP32", blob, blob_len, name.data(), name.size(), quant,
                    "M", m, "EF", ef, "REDUCED-FROM", from);
      } else {
        rm::EmitAOF(io, "INFER.VADD", "scbbcclclclcb", key, "FP32", blob, blob_len, name.data(), name.size(), quant,
                    "M", m, "EF", ef, "REDUCED-FROM", from, "SETATTR", attrs.data(), attrs.size());
      }
    });
  } catch (...) {
    rm::LogIOError(io, "warning", "infer: out of memory while rewriting a vector set");
  }
}

size_t vset_mem_usage(const void* value) noexcept {
  return set_of(value).memory_bytes();
}

// Drops the key's reference; a search still running keeps the set until it finishes.
void vset_free(void* value) noexcept { delete static_cast<VsetRef*>(value); }

// Roughly one allocation per element: lets Redis free large sets lazily (UNLINK, FLUSHALL ASYNC).
size_t vset_free_effort(RedisModuleString*, const void* value) noexcept {
  return set_of(value).size() + 1;
}

void* vset_copy(RedisModuleString*, RedisModuleString*, const void* value) noexcept {
  try {
    return new_value(vector::from_bytes(vector::to_bytes(set_of(value))));
  } catch (...) {
    return nullptr;  // Redis reports the COPY as failed
  }
}

void vset_digest(RedisModuleDigest* md, void* value) noexcept {
  try {
    const std::string bytes = vector::to_bytes(set_of(value));
    rm::DigestAddStringBuffer(md, bytes.data(), bytes.size());
    rm::DigestEndSequence(md);
  } catch (...) {
  }
}

}  // namespace

int register_vset_type(RedisModuleCtx* ctx) {
  RedisModuleTypeMethods tm{};
  tm.version = REDISMODULE_TYPE_METHOD_VERSION;
  tm.rdb_load = vset_rdb_load;
  tm.rdb_save = vset_rdb_save;
  tm.aof_rewrite = vset_aof_rewrite;
  tm.mem_usage = vset_mem_usage;
  tm.digest = vset_digest;
  tm.free = vset_free;
  tm.free_effort = vset_free_effort;
  tm.copy = vset_copy;
  // Exactly 9 characters, and not Redis 8's "vectorset" (spec §4.3).
  g_type = rm::CreateDataType(ctx, "infervset", static_cast<int>(vector::kEncodingVersion), &tm);
  return g_type ? REDISMODULE_OK : REDISMODULE_ERR;
}

RedisModuleType* vset_type() { return g_type; }

VsetKey::VsetKey(RedisModuleCtx* ctx, RedisModuleString* name, int mode) {
  key = rm::OpenKey(ctx, name, mode);
  const int type = rm::KeyType(key);
  if (type == REDISMODULE_KEYTYPE_EMPTY) return;
  if (type != REDISMODULE_KEYTYPE_MODULE || rm::ModuleTypeGetType(key) != g_type) {
    wrong_type = true;
    return;
  }
  shared = *static_cast<VsetRef*>(rm::ModuleTypeGetValue(key));
  set = &shared->set();
  if (mode & REDISMODULE_WRITE) write_lock = shared->write();
}

VsetKey::~VsetKey() {
  if (key) rm::CloseKey(key);
}

vector::VectorSet* VsetKey::store(std::unique_ptr<vector::VectorSet> fresh) {
  auto* value = static_cast<VsetRef*>(new_value(std::move(fresh)));
  if (rm::ModuleTypeSetValue(key, g_type, value) != REDISMODULE_OK) {
    delete value;
    throw std::runtime_error("cannot store the vector set in the key");
  }
  shared = *value;  // new: no search can hold it yet, so no lock
  set = &shared->set();
  return set;
}

}  // namespace infer::redis
