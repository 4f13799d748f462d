// INFER.VADD ... CAS, as Redis 8 defines it: the new element's neighbour search runs on a search thread
// under the set's read lock, then the insert is checked and committed on the main thread (from the
// write queue, which sends it to replicas and the AOF). At the commit:
//  - the key no longer holds the same set (deleted, replaced) or the element was added meanwhile: the
//    command did nothing and replies 1, as if it had run before the change (Redis 8 does the same);
//  - the graph changed since the search: the levels it made stale are searched again there, so the
//    result is exactly the graph a plain VADD builds (Hnsw::PreparedInsert), and replicas, which insert
//    without CAS, build the same one.
// The write is replicated as the command without CAS.
#include <memory>

#include "redis/args.h"
#include "redis/blocked_call.h"
#include "redis/cluster_slots.h"
#include "redis/vset_handlers.h"
#include "redis/vset_threads.h"
#include "redis/vset_type.h"

namespace infer::redis {

namespace {

struct CasJob : BlockedJob {
  CasJob() : BlockedJob("infer.vadd", "CAS insert") {}
  ~CasJob() override {
    for (RedisModuleString* a : argv) rm::FreeString(nullptr, a);
  }
  int reply(RedisModuleCtx* ctx) override {
    if (!error.empty()) return rm::ReplyWithError(ctx, error.c_str());
    return rm::ReplyWithLongLong(ctx, 1);
  }
  bool has_writes() const override { return error.empty(); }
  void write(RedisModuleCtx* ctx, Writable writable) override;

  std::vector<RedisModuleString*> argv;  // held: the command without CAS, replicated as it is
  int key_index = 1, element_index = 0;
  std::vector<float> vec;
  std::optional<std::string> attrs;
  uint32_t ef = 0;
  bool asked = false;
  VsetRef set;  // the set the search ran on; the commit happens only if the key still holds it
  vector::VectorSet::PreparedAdd prepared;
  std::string error;  // with its code
};

void CasJob::write(RedisModuleCtx* ctx, Writable writable) {
  const VsetRef searched = std::move(set);
  if (client_gone) return;  // nothing is added for a client that left, as Redis 8 does
  if (writable == Writable::Replica) {
    error = "READONLY this node became a replica while the neighbours were searched; nothing added";
    return;
  }
  if (prepared.encoded.empty()) {  // the search was cancelled (SHUTDOWN)
    error = "ERR the CAS insert was cancelled";
    return;
  }
  RedisModuleString* key = argv[key_index];
  error = cluster_write_refusal(ctx, view(key), nullptr, asked);
  if (!error.empty()) return;
  VsetKey k(ctx, key, REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type || !k.set || k.shared != searched) return;
  if (!k.set->add_prepared(view(argv[element_index]), prepared, attrs, ef)) return;
  rm::Replicate(ctx, "INFER.VADD", "v", argv.data() + 1, argv.size() - 1);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vadd", key);
}

}  // namespace

bool start_cas_insert(RedisModuleCtx* ctx, RedisModuleString** argv, int argc, int element_index,
                      const VsetRef& set, std::vector<float> vec, std::optional<std::string> attrs, uint32_t ef) {
  auto job = std::make_unique<CasJob>();
  for (int i = 0; i < argc; ++i) {
    if (i > element_index && is_word(argv[i], "CAS")) continue;
    if (i == element_index) job->element_index = static_cast<int>(job->argv.size());
    job->argv.push_back(rm::HoldString(nullptr, argv[i]));
  }
  job->vec = std::move(vec);
  job->attrs = std::move(attrs);
  job->ef = ef;
  job->asked = importing_here(ctx, view(argv[1]));
  job->set = set;
  auto* blocked = static_cast<CasJob*>(block_client(ctx, std::move(job)));  // owned by the client now
  auto task = [blocked] {
    if (!blocked->cancellation->requested()) {
      auto lock = blocked->set->read();
      try {
        blocked->prepared = blocked->set->set().prepare_add(blocked->vec, blocked->ef);
      } catch (const vector::VectorSetError& e) {
        blocked->error = std::string("ERR ") + e.what();
      }
    }
    complete(blocked);
  };
  if (run_search_thread(task)) return true;
  abort_blocked(blocked);  // the queue is full: the caller inserts synchronously
  return false;
}

}  // namespace infer::redis
