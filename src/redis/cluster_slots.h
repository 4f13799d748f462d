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
std::string cluster_write_refusal(RedisModuleCtx* ctx, std::string_view key, bool* migrating = nullptr);

}  // namespace infer::redis
