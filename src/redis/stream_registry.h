// Which generation streams are open, so that each one gets its `finish` entry even when its writer
// cannot write it:
//   - local: this node's running STREAM generations (SHUTDOWN ends them with `finish shutdown`; a
//     demotion stops them, and the new master ends their streams);
//   - inherited: streams that this node's master (or, read back from the AOF, this node before a
//     restart) left open. A promoted replica ends them with `finish failover`, a master that starts
//     from its AOF with `finish shutdown`.
// A master records each open stream in its replication stream and AOF with the internal command
// `INFER.STREAMSTATE key OPEN <tokens>` when the generation starts and after every text entry, and `INFER.STREAMSTATE key DONE` after
// the finish entry, sent right after the entries but never in their transaction (a replica without
// the module refuses the command, and would refuse the entries with it).
// Main thread only.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redis/module_api.h"

namespace infer::redis {

class StreamWriter;

// A STREAM generation started here: tracked until its writer is freed, and recorded as open.
void track_local_stream(RedisModuleCtx* ctx, const std::shared_ptr<StreamWriter>& writer);
// The local writers still alive (finished or not).
std::vector<std::shared_ptr<StreamWriter>> local_streams();

// INFER.STREAMSTATE from the replication stream or the AOF.
void note_inherited_stream(int db, const std::string& key, long long tokens);
void forget_inherited_stream(int db, const std::string& key);
// A full resynchronisation replaces the data set: what the old one recorded no longer applies.
void clear_inherited_streams();

// Appends `finish <reason> tokens <n>` to every inherited stream that still exists and does not end
// with a finish entry yet, then forgets them all. `propagate`: as in write_stream_entry. `ctx` may
// have any database selected. Returns how many streams were ended.
int end_inherited_streams(RedisModuleCtx* ctx, const char* reason, bool propagate);

// The STREAM entry writer every stream entry goes through: `XADD key [MAXLEN ~ maxlen] * <field>
// <value>` (plus `tokens <tokens>` after a finish, `logprobs <logprobs>` when that is not empty, then the
// `more` fields: a finish's tool_calls), in the selected database. With `propagate` it is sent to replicas
// and the AOF, followed by the INFER.STREAMSTATE record above (OPEN after text, DONE after finish);
// without, it changes the data set only (clients are paused at SHUTDOWN: propagating would assert).
// Returns false, logging it, when the entry could not be written.
bool write_stream_entry(RedisModuleCtx* ctx, const std::string& key, long long maxlen, const char* field,
                        const std::string& value, long long tokens, bool propagate,
                        const std::string& logprobs = {},
                        const std::vector<std::pair<std::string, std::string>>& more = {});

// INFER.STREAMSTATE key OPEN tokens | key DONE: accepted only from the master or the AOF.
int cmd_streamstate(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);

// OnLoad: SHUTDOWN, role changes and loading events end the streams above (stream_endings.cpp).
int subscribe_stream_endings(RedisModuleCtx* ctx);

}  // namespace infer::redis
