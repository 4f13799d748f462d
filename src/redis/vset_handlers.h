// Handlers of the vector-set commands (vset_write.cpp, vset_read.cpp, vset_members.cpp, vset_cas.cpp),
// registered by vset_commands.cpp, and the argument helpers they share with INFER.EMBED and INFER.RAG.
// Main thread only; handlers may throw, the registration wrapper turns exceptions into -ERR replies.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "redis/models.h"
#include "redis/module_api.h"
#include "vector/vector_set.h"

namespace infer::redis {

int cmd_vadd(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vrem(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vsetattr(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vsim(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vemb(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vcard(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vdim(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vinfo(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vgetattr(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vismember(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vrandmember(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vrange(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
int cmd_vlinks(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);

// Replies Redis's WRONGTYPE error (a key that holds something other than a vector set).
int reply_wrongtype(RedisModuleCtx* ctx);

// Submits an embedding request for `text` (pooled and normalised as asked, see engine::Request) on
// behalf of a blocked client (cmd_embed.cpp). Engine::submit
// tokenises on the calling thread, so texts over kSyncTokenizeBytes are tokenised on a background
// thread first (`text` held, not copied; one too long for the context refused untokenised) and
// submitted from the main thread (event-loop one-shot); shorter ones are submitted now.
// Exactly one of `submitted` (main thread, with the engine handle) or `refused` (main thread) runs;
// after `submitted`, `on_done` runs on the engine thread as usual. The caller keeps everything the
// callbacks touch alive until it unblocks the client.
void submit_embedding(std::shared_ptr<const LoadedModel> model, RedisModuleString* text, engine::Pooling pooling,
                      bool normalize, std::chrono::steady_clock::time_point deadline,
                      std::function<void(engine::Handle)> submitted,
                      std::function<void(const engine::SubmitError&)> refused,
                      std::function<void(engine::Result&&)> on_done);

// VADD ... CAS (vset_cas.cpp): blocks the client and searches the new element's neighbours in `set` on
// a search thread; the insert is committed from the write queue. Returns false, the client not
// blocked, when the search threads' queue is full (the caller then inserts as without CAS).
bool start_cas_insert(RedisModuleCtx* ctx, RedisModuleString** argv, int argc, int element_index,
                      const std::shared_ptr<class SharedVset>& set, std::vector<float> vec,
                      std::optional<std::string> attrs, uint32_t ef);

// Parses `FP32 blob` or `VALUES n v1..vn` at argv[*i]; on success advances *i past it. Returns nullopt
// with `err` set when the words there are not a valid vector (dimension 1..65536, finite numbers,
// blob length a multiple of 4).
std::optional<std::vector<float>> parse_vector(RedisModuleString** argv, int argc, int* i, std::string* err);
// True when argv[i] starts a vector (FP32 or VALUES).
bool is_vector_start(RedisModuleString* arg);
// The longest element name (and RAG DOCKEY attribute name) a client may give: names are copied and
// hashed on the main thread. element_name_error: "" when `name` fits, else the error; writes from the
// master or the AOF are never refused.
inline constexpr size_t kMaxNameBytes = 65536;
std::string element_name_error(RedisModuleCtx* ctx, const RedisModuleString* name);
// The most element names one VRANDMEMBER, VRANGE or VLINKS reply may hold, and their bytes: the reply
// is written on the main thread (vset_members.cpp); a larger one is refused before it starts.
inline constexpr size_t kMaxReplyNames = 65536;
inline constexpr size_t kMaxReplyNameBytes = size_t{4} << 20;
// "" when a client may set attributes of `bytes` (infer.max-attribute-bytes), else the error. Writes
// from the master or the AOF are never refused: a replica must apply what its master did.
std::string attribute_size_error(RedisModuleCtx* ctx, size_t bytes);

// VSIM-style options after the query: WITHSCORES WITHATTRIBS COUNT EPSILON EF FILTER FILTER-EF TRUTH
// NOTHREAD. `filter` receives the parsed FILTER. Returns false with `err` set on a bad option.
struct VsimReplyOptions {
  bool with_scores = false;
  bool with_attribs = false;
};
bool parse_search_options(RedisModuleString** argv, int argc, int i, vector::SearchOptions* opt,
                          std::optional<vector::Filter>* filter, VsimReplyOptions* reply, std::string* err);

}  // namespace infer::redis
