// Cluster slots for writes the module makes after its command returned (a finished job's STORE, stream
// entries): by then the key's slot may have moved or be migrating, and Redis routes only commands, not
// module writes. Redis 7.0 has no slot API for modules (spec "cluster"), so the slot is computed here
// and ownership read from CLUSTER NODES.
#pragma once
#include <string>
#include <string_view>

#include "redis/module_api.h"

namespace infer::redis {

// CRC16-XMODEM of the key's hash tag (or the whole key), mod 16384: the key's cluster slot.
unsigned key_slot(std::string_view key);

// Whether this node may write `key` now. "" when it may (not a cluster, or it owns the slot and the
// slot is not migrating away without the key); else the redirection or error a client command would
// get, e.g. "MOVED 1234 127.0.0.1:7001", "ASK 1234 127.0.0.1:7001", "CLUSTERDOWN ...". `migrating` is
// set when the node owns the slot, holds the key, and the slot is migrating to another node (the key
// may leave at any moment). Main thread.
// `asked`: the command that made the write was routed here by ASKING (the slot was importing to this
// node when it ran, see importing_here); an importing slot then counts as this node's, as Redis counts
// it for such a command.
std::string cluster_write_refusal(RedisModuleCtx* ctx, std::string_view key, bool* migrating = nullptr,
                                  bool asked = false);

// True when this node is importing the key's slot: a command that runs here for such a key came with
// ASKING. Main thread, in the command's handler.
bool importing_here(RedisModuleCtx* ctx, std::string_view key);

}  // namespace infer::redis
