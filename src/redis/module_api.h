// Hand-written binding to the Redis module ABI (Redis 7.0 and later), from the documented C signatures
// and constants (shared/spec/redis-module.md §2). No redismodule.h: opaque types, constants and one
// table of function pointers, filled by rm::bind() in RedisModule_OnLoad through the GetApi pointer
// that is the first field of the context Redis passes (§2.1).
//
// Threads: the "Thread" column of spec §2.6 applies to every pointer here. Most calls need the
// global lock (main thread, or a worker inside ThreadSafeContextLock); the ones callable from any
// thread are UnblockClient, AbortBlock, the thread-safe-context calls, EventLoopAddOneShot,
// Milliseconds, MonotonicMicroseconds, GetUsedMemoryRatio, Log and the allocators.
// Memory: strings created with a NULL ctx are ours to FreeString; LoadStringBuffer results go to Free.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {
struct RedisModuleCtx;
struct RedisModuleString;
struct RedisModuleKey;
struct RedisModuleCallReply;
struct RedisModuleIO;
struct RedisModuleType;
struct RedisModuleDigest;
struct RedisModuleBlockedClient;
struct RedisModuleInfoCtx;
struct RedisModuleCommand;
struct RedisModuleUser;
struct RedisModuleDefragCtx;
struct RedisModuleKeyOptCtx;
struct RedisModuleTimer;

struct RedisModuleStreamID {
  uint64_t ms;
  uint64_t seq;
};

// Passed by value to SubscribeToServerEvent.
struct RedisModuleEvent {
  uint64_t id;
  uint64_t dataver;
};

using RedisModuleCmdFunc = int (*)(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);
using RedisModuleDisconnectFunc = void (*)(RedisModuleCtx* ctx, RedisModuleBlockedClient* bc);
using RedisModuleFreePrivdataFunc = void (*)(RedisModuleCtx* ctx, void* privdata);
using RedisModuleInfoFunc = void (*)(RedisModuleInfoCtx* ctx, int for_crash_report);
using RedisModuleEventLoopOneShotFunc = void (*)(void* user_data);
using RedisModuleEventCallback = void (*)(RedisModuleCtx* ctx, RedisModuleEvent eid, uint64_t subevent,
                                          void* data);
using RedisModuleTimerProc = void (*)(RedisModuleCtx* ctx, void* data);
using RedisModuleTimerID = uint64_t;
using RedisModuleConfigGetNumericFunc = long long (*)(const char* name, void* privdata);
using RedisModuleConfigSetNumericFunc = int (*)(const char* name, long long val, void* privdata,
                                                RedisModuleString** err);
using RedisModuleConfigGetStringFunc = RedisModuleString* (*)(const char* name, void* privdata);
using RedisModuleConfigSetStringFunc = int (*)(const char* name, RedisModuleString* val, void* privdata,
                                               RedisModuleString** err);
using RedisModuleConfigGetBoolFunc = int (*)(const char* name, void* privdata);
using RedisModuleConfigSetBoolFunc = int (*)(const char* name, int val, void* privdata,
                                             RedisModuleString** err);
using RedisModuleConfigApplyFunc = int (*)(RedisModuleCtx* ctx, void* privdata, RedisModuleString** err);

// Data-type callbacks (spec §2.3).
using RedisModuleTypeLoadFunc = void* (*)(RedisModuleIO* rdb, int encver);
using RedisModuleTypeSaveFunc = void (*)(RedisModuleIO* rdb, void* value);
using RedisModuleTypeRewriteFunc = void (*)(RedisModuleIO* aof, RedisModuleString* key, void* value);
using RedisModuleTypeMemUsageFunc = size_t (*)(const void* value);
using RedisModuleTypeDigestFunc = void (*)(RedisModuleDigest* digest, void* value);
using RedisModuleTypeFreeFunc = void (*)(void* value);
using RedisModuleTypeAuxLoadFunc = int (*)(RedisModuleIO* rdb, int encver, int when);
using RedisModuleTypeAuxSaveFunc = void (*)(RedisModuleIO* rdb, int when);
using RedisModuleTypeFreeEffortFunc = size_t (*)(RedisModuleString* key, const void* value);
using RedisModuleTypeUnlinkFunc = void (*)(RedisModuleString* key, const void* value);
using RedisModuleTypeCopyFunc = void* (*)(RedisModuleString* fromkey, RedisModuleString* tokey, const void* value);
using RedisModuleTypeDefragFunc = int (*)(RedisModuleDefragCtx* ctx, RedisModuleString* key, void** value);
using RedisModuleTypeMemUsageFunc2 = size_t (*)(RedisModuleKeyOptCtx* ctx, const void* value, size_t sample_size);
using RedisModuleTypeFreeEffortFunc2 = size_t (*)(RedisModuleKeyOptCtx* ctx, const void* value);
using RedisModuleTypeUnlinkFunc2 = void (*)(RedisModuleKeyOptCtx* ctx, const void* value);
using RedisModuleTypeCopyFunc2 = void* (*)(RedisModuleKeyOptCtx* ctx, const void* value);
using RedisModuleDefragFunc = int (*)(RedisModuleDefragCtx* ctx);

// 7.0 layout, 144 bytes; set version = REDISMODULE_TYPE_METHOD_VERSION (4).
struct RedisModuleTypeMethods {
  uint64_t version;
  RedisModuleTypeLoadFunc rdb_load;
  RedisModuleTypeSaveFunc rdb_save;
  RedisModuleTypeRewriteFunc aof_rewrite;  // must not be NULL (spec §0.8)
  RedisModuleTypeMemUsageFunc mem_usage;
  RedisModuleTypeDigestFunc digest;
  RedisModuleTypeFreeFunc free;
  RedisModuleTypeAuxLoadFunc aux_load;
  RedisModuleTypeAuxSaveFunc aux_save;
  int aux_save_triggers;
  RedisModuleTypeFreeEffortFunc free_effort;
  RedisModuleTypeUnlinkFunc unlink;
  RedisModuleTypeCopyFunc copy;
  RedisModuleTypeDefragFunc defrag;
  RedisModuleTypeMemUsageFunc2 mem_usage2;
  RedisModuleTypeFreeEffortFunc2 free_effort2;
  RedisModuleTypeUnlinkFunc2 unlink2;
  RedisModuleTypeCopyFunc2 copy2;
};
static_assert(sizeof(RedisModuleTypeMethods) == 144);

// Command info (spec §2.4). Arrays end with a zeroed key spec / an arg whose name is NULL.
struct RedisModuleCommandInfoVersion {
  int version;  // 1
  size_t sizeof_historyentry;
  size_t sizeof_keyspec;
  size_t sizeof_arg;
};

struct RedisModuleCommandHistoryEntry {
  const char* since;
  const char* changes;
};

struct RedisModuleCommandKeySpec {
  const char* notes;
  uint64_t flags;  // REDISMODULE_CMD_KEY_*
  int begin_search_type;
  union {
    struct {
      int pos;
    } index;
    struct {
      const char* keyword;
      int startfrom;
    } keyword;
  } bs;
  int find_keys_type;
  union {
    struct {
      int lastkey;
      int keystep;
      int limit;
    } range;
    struct {
      int keynumidx;
      int firstkey;
      int keystep;
    } keynum;
  } fk;
};
static_assert(sizeof(RedisModuleCommandKeySpec) == 56);

struct RedisModuleCommandArg {
  const char* name;
  int type;
  int key_spec_index;
  const char* token;
  const char* summary;
  const char* since;
  int flags;
  const char* deprecated_since;
  RedisModuleCommandArg* subargs;
};
static_assert(sizeof(RedisModuleCommandArg) == 64);

struct RedisModuleCommandInfo {
  const RedisModuleCommandInfoVersion* version;
  const char* summary;
  const char* complexity;
  const char* since;
  RedisModuleCommandHistoryEntry* history;
  const char* tips;
  int arity;
  RedisModuleCommandKeySpec* key_specs;
  RedisModuleCommandArg* args;
};
static_assert(sizeof(RedisModuleCommandInfo) == 72);
}  // extern "C"

// Constants (spec §2.2).
inline constexpr int REDISMODULE_OK = 0;
inline constexpr int REDISMODULE_ERR = 1;
inline constexpr int REDISMODULE_APIVER_1 = 1;
inline constexpr uint64_t REDISMODULE_TYPE_METHOD_VERSION = 4;

inline constexpr int REDISMODULE_READ = 1 << 0;
inline constexpr int REDISMODULE_WRITE = 1 << 1;
inline constexpr int REDISMODULE_OPEN_KEY_NOTOUCH = 1 << 16;

inline constexpr int REDISMODULE_KEYTYPE_EMPTY = 0;
inline constexpr int REDISMODULE_KEYTYPE_STRING = 1;
inline constexpr int REDISMODULE_KEYTYPE_LIST = 2;
inline constexpr int REDISMODULE_KEYTYPE_HASH = 3;
inline constexpr int REDISMODULE_KEYTYPE_SET = 4;
inline constexpr int REDISMODULE_KEYTYPE_ZSET = 5;
inline constexpr int REDISMODULE_KEYTYPE_MODULE = 6;
inline constexpr int REDISMODULE_KEYTYPE_STREAM = 7;

inline constexpr int REDISMODULE_REPLY_UNKNOWN = -1;
inline constexpr int REDISMODULE_REPLY_STRING = 0;
inline constexpr int REDISMODULE_REPLY_ERROR = 1;
inline constexpr int REDISMODULE_REPLY_INTEGER = 2;
inline constexpr int REDISMODULE_REPLY_ARRAY = 3;
inline constexpr int REDISMODULE_REPLY_NULL = 4;
inline constexpr int REDISMODULE_REPLY_MAP = 5;
inline constexpr int REDISMODULE_REPLY_SET = 6;
inline constexpr int REDISMODULE_REPLY_BOOL = 7;
inline constexpr int REDISMODULE_REPLY_DOUBLE = 8;
inline constexpr int REDISMODULE_REPLY_BIG_NUMBER = 9;
inline constexpr int REDISMODULE_REPLY_VERBATIM_STRING = 10;
inline constexpr int REDISMODULE_REPLY_ATTRIBUTE = 11;

inline constexpr long REDISMODULE_POSTPONED_LEN = -1;
inline constexpr long long REDISMODULE_NO_EXPIRE = -1;

inline constexpr int REDISMODULE_CTX_FLAGS_LUA = 1 << 0;
inline constexpr int REDISMODULE_CTX_FLAGS_MULTI = 1 << 1;
inline constexpr int REDISMODULE_CTX_FLAGS_MASTER = 1 << 2;
inline constexpr int REDISMODULE_CTX_FLAGS_SLAVE = 1 << 3;
inline constexpr int REDISMODULE_CTX_FLAGS_READONLY = 1 << 4;
inline constexpr int REDISMODULE_CTX_FLAGS_CLUSTER = 1 << 5;
inline constexpr int REDISMODULE_CTX_FLAGS_AOF = 1 << 6;
inline constexpr int REDISMODULE_CTX_FLAGS_RDB = 1 << 7;
inline constexpr int REDISMODULE_CTX_FLAGS_MAXMEMORY = 1 << 8;
inline constexpr int REDISMODULE_CTX_FLAGS_EVICT = 1 << 9;
inline constexpr int REDISMODULE_CTX_FLAGS_OOM = 1 << 10;
inline constexpr int REDISMODULE_CTX_FLAGS_OOM_WARNING = 1 << 11;
inline constexpr int REDISMODULE_CTX_FLAGS_REPLICATED = 1 << 12;
inline constexpr int REDISMODULE_CTX_FLAGS_LOADING = 1 << 13;
inline constexpr int REDISMODULE_CTX_FLAGS_MULTI_DIRTY = 1 << 19;
inline constexpr int REDISMODULE_CTX_FLAGS_IS_CHILD = 1 << 20;
inline constexpr int REDISMODULE_CTX_FLAGS_DENY_BLOCKING = 1 << 21;
inline constexpr int REDISMODULE_CTX_FLAGS_RESP3 = 1 << 22;
inline constexpr int REDISMODULE_CTX_FLAGS_ASYNC_LOADING = 1 << 23;

inline constexpr int REDISMODULE_NOTIFY_GENERIC = 1 << 2;
inline constexpr int REDISMODULE_NOTIFY_STRING = 1 << 3;
inline constexpr int REDISMODULE_NOTIFY_STREAM = 1 << 10;
inline constexpr int REDISMODULE_NOTIFY_MODULE = 1 << 13;

inline constexpr int REDISMODULE_AUX_BEFORE_RDB = 1 << 0;
inline constexpr int REDISMODULE_AUX_AFTER_RDB = 1 << 1;

inline constexpr int REDISMODULE_STREAM_ADD_AUTOID = 1 << 0;

inline constexpr int REDISMODULE_YIELD_FLAG_NONE = 1 << 0;
inline constexpr int REDISMODULE_YIELD_FLAG_CLIENTS = 1 << 1;

inline constexpr int REDISMODULE_OPTIONS_HANDLE_IO_ERRORS = 1 << 0;
inline constexpr int REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED = 1 << 1;
inline constexpr int REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD = 1 << 2;

inline constexpr unsigned REDISMODULE_CONFIG_DEFAULT = 0;
inline constexpr unsigned REDISMODULE_CONFIG_IMMUTABLE = 1 << 0;
inline constexpr unsigned REDISMODULE_CONFIG_SENSITIVE = 1 << 1;
inline constexpr unsigned REDISMODULE_CONFIG_HIDDEN = 1 << 4;
inline constexpr unsigned REDISMODULE_CONFIG_PROTECTED = 1 << 5;
inline constexpr unsigned REDISMODULE_CONFIG_DENY_LOADING = 1 << 6;
inline constexpr unsigned REDISMODULE_CONFIG_MEMORY = 1 << 7;

inline constexpr uint64_t REDISMODULE_CMD_KEY_RO = 1 << 0;
inline constexpr uint64_t REDISMODULE_CMD_KEY_RW = 1 << 1;
inline constexpr uint64_t REDISMODULE_CMD_KEY_OW = 1 << 2;
inline constexpr uint64_t REDISMODULE_CMD_KEY_RM = 1 << 3;
inline constexpr uint64_t REDISMODULE_CMD_KEY_ACCESS = 1 << 4;
inline constexpr uint64_t REDISMODULE_CMD_KEY_UPDATE = 1 << 5;
inline constexpr uint64_t REDISMODULE_CMD_KEY_INSERT = 1 << 6;
inline constexpr uint64_t REDISMODULE_CMD_KEY_DELETE = 1 << 7;
inline constexpr uint64_t REDISMODULE_CMD_KEY_NOT_KEY = 1 << 8;
inline constexpr uint64_t REDISMODULE_CMD_KEY_INCOMPLETE = 1 << 9;
inline constexpr uint64_t REDISMODULE_CMD_KEY_VARIABLE_FLAGS = 1 << 10;

inline constexpr int REDISMODULE_KSPEC_BS_INVALID = 0;
inline constexpr int REDISMODULE_KSPEC_BS_UNKNOWN = 1;
inline constexpr int REDISMODULE_KSPEC_BS_INDEX = 2;
inline constexpr int REDISMODULE_KSPEC_BS_KEYWORD = 3;
inline constexpr int REDISMODULE_KSPEC_FK_OMITTED = 0;
inline constexpr int REDISMODULE_KSPEC_FK_UNKNOWN = 1;
inline constexpr int REDISMODULE_KSPEC_FK_RANGE = 2;
inline constexpr int REDISMODULE_KSPEC_FK_KEYNUM = 3;

inline constexpr int REDISMODULE_ARG_TYPE_STRING = 0;
inline constexpr int REDISMODULE_ARG_TYPE_INTEGER = 1;
inline constexpr int REDISMODULE_ARG_TYPE_DOUBLE = 2;
inline constexpr int REDISMODULE_ARG_TYPE_KEY = 3;
inline constexpr int REDISMODULE_ARG_TYPE_PATTERN = 4;
inline constexpr int REDISMODULE_ARG_TYPE_UNIX_TIME = 5;
inline constexpr int REDISMODULE_ARG_TYPE_PURE_TOKEN = 6;
inline constexpr int REDISMODULE_ARG_TYPE_ONEOF = 7;
inline constexpr int REDISMODULE_ARG_TYPE_BLOCK = 8;
inline constexpr int REDISMODULE_CMD_ARG_OPTIONAL = 1 << 0;
inline constexpr int REDISMODULE_CMD_ARG_MULTIPLE = 1 << 1;
inline constexpr int REDISMODULE_CMD_ARG_MULTIPLE_TOKEN = 1 << 2;

inline constexpr uint64_t REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED = 0;
inline constexpr uint64_t REDISMODULE_EVENT_FLUSHDB = 2;
inline constexpr uint64_t REDISMODULE_EVENT_LOADING = 3;
inline constexpr uint64_t REDISMODULE_EVENT_SHUTDOWN = 5;
inline constexpr uint64_t REDISMODULE_EVENT_EVENTLOOP = 15;
inline constexpr uint64_t REDISMODULE_SUBEVENT_REPLROLECHANGED_NOW_MASTER = 0;
inline constexpr uint64_t REDISMODULE_SUBEVENT_REPLROLECHANGED_NOW_REPLICA = 1;
inline constexpr uint64_t REDISMODULE_SUBEVENT_LOADING_REPL_START = 2;
inline constexpr uint64_t REDISMODULE_SUBEVENT_LOADING_ENDED = 3;
inline constexpr uint64_t REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP = 0;

inline constexpr const char* REDISMODULE_ERRORMSG_WRONGTYPE =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

// The API table: X(name, return type, (parameters)). Every entry is looked up by bind(); all exist in
// Redis 7.0.15 (spec §2.6), so a missing one fails the module load with its name.
#define INFER_RM_API(X)                                                                                         \
  X(Alloc, void*, (size_t bytes))                                                                               \
  X(TryAlloc, void*, (size_t bytes))                                                                            \
  X(Calloc, void*, (size_t nmemb, size_t size))                                                                 \
  X(Realloc, void*, (void* ptr, size_t bytes))                                                                  \
  X(Free, void, (void* ptr))                                                                                    \
  X(Strdup, char*, (const char* str))                                                                           \
  X(MallocSize, size_t, (void* ptr))                                                                            \
  X(MallocSizeString, size_t, (RedisModuleString * str))                                                        \
  X(SetModuleAttribs, void, (RedisModuleCtx * ctx, const char* name, int ver, int apiver))                      \
  X(IsModuleNameBusy, int, (const char* name))                                                                  \
  X(SetModuleOptions, void, (RedisModuleCtx * ctx, int options))                                                \
  X(GetServerVersion, int, ())                                                                                  \
  X(GetTypeMethodVersion, int, ())                                                                              \
  X(CreateCommand, int,                                                                                         \
    (RedisModuleCtx * ctx, const char* name, RedisModuleCmdFunc cmdfunc, const char* strflags, int firstkey,    \
     int lastkey, int keystep))                                                                                 \
  X(GetCommand, RedisModuleCommand*, (RedisModuleCtx * ctx, const char* name))                                  \
  X(SetCommandInfo, int, (RedisModuleCommand * command, const RedisModuleCommandInfo* info))                    \
  X(WrongArity, int, (RedisModuleCtx * ctx))                                                                    \
  X(GetContextFlags, int, (RedisModuleCtx * ctx))                                                               \
  X(GetSelectedDb, int, (RedisModuleCtx * ctx))                                                                 \
  X(SelectDb, int, (RedisModuleCtx * ctx, int newid))                                                           \
  X(GetClientId, unsigned long long, (RedisModuleCtx * ctx))                                                    \
  X(Milliseconds, long long, ())                                                                                \
  X(MonotonicMicroseconds, uint64_t, ())                                                                        \
  X(GetUsedMemoryRatio, float, ())                                                                              \
  X(AvoidReplicaTraffic, int, ())                                                                               \
  X(Log, void, (RedisModuleCtx * ctx, const char* level, const char* fmt, ...))                                 \
  X(LogIOError, void, (RedisModuleIO * io, const char* level, const char* fmt, ...))                            \
  /* replies */                                                                                                 \
  X(ReplyWithLongLong, int, (RedisModuleCtx * ctx, long long ll))                                               \
  X(ReplyWithError, int, (RedisModuleCtx * ctx, const char* err))                                               \
  X(ReplyWithSimpleString, int, (RedisModuleCtx * ctx, const char* msg))                                        \
  X(ReplyWithArray, int, (RedisModuleCtx * ctx, long len))                                                      \
  X(ReplyWithMap, int, (RedisModuleCtx * ctx, long len))                                                        \
  X(ReplyWithSet, int, (RedisModuleCtx * ctx, long len))                                                        \
  X(ReplyWithNullArray, int, (RedisModuleCtx * ctx))                                                            \
  X(ReplyWithEmptyArray, int, (RedisModuleCtx * ctx))                                                           \
  X(ReplySetArrayLength, void, (RedisModuleCtx * ctx, long len))                                                \
  X(ReplySetMapLength, void, (RedisModuleCtx * ctx, long len))                                                  \
  X(ReplySetSetLength, void, (RedisModuleCtx * ctx, long len))                                                  \
  X(ReplyWithStringBuffer, int, (RedisModuleCtx * ctx, const char* buf, size_t len))                            \
  X(ReplyWithCString, int, (RedisModuleCtx * ctx, const char* buf))                                             \
  X(ReplyWithString, int, (RedisModuleCtx * ctx, RedisModuleString * str))                                      \
  X(ReplyWithEmptyString, int, (RedisModuleCtx * ctx))                                                          \
  X(ReplyWithVerbatimString, int, (RedisModuleCtx * ctx, const char* buf, size_t len))                          \
  X(ReplyWithNull, int, (RedisModuleCtx * ctx))                                                                 \
  X(ReplyWithBool, int, (RedisModuleCtx * ctx, int b))                                                          \
  X(ReplyWithDouble, int, (RedisModuleCtx * ctx, double d))                                                     \
  X(ReplyWithCallReply, int, (RedisModuleCtx * ctx, RedisModuleCallReply * reply))                              \
  /* strings */                                                                                                 \
  X(CreateString, RedisModuleString*, (RedisModuleCtx * ctx, const char* ptr, size_t len))                      \
  X(CreateStringFromLongLong, RedisModuleString*, (RedisModuleCtx * ctx, long long ll))                         \
  X(CreateStringFromDouble, RedisModuleString*, (RedisModuleCtx * ctx, double d))                               \
  X(CreateStringFromString, RedisModuleString*, (RedisModuleCtx * ctx, const RedisModuleString* str))           \
  X(CreateStringPrintf, RedisModuleString*, (RedisModuleCtx * ctx, const char* fmt, ...))                       \
  X(FreeString, void, (RedisModuleCtx * ctx, RedisModuleString * str))                                          \
  X(RetainString, void, (RedisModuleCtx * ctx, RedisModuleString * str))                                        \
  X(HoldString, RedisModuleString*, (RedisModuleCtx * ctx, RedisModuleString * str))                            \
  X(TrimStringAllocation, void, (RedisModuleString * str))                                                      \
  X(StringPtrLen, const char*, (const RedisModuleString* str, size_t* len))                                     \
  X(StringToLongLong, int, (const RedisModuleString* str, long long* ll))                                       \
  X(StringToULongLong, int, (const RedisModuleString* str, unsigned long long* ull))                            \
  X(StringToDouble, int, (const RedisModuleString* str, double* d))                                             \
  X(StringCompare, int, (RedisModuleString * a, RedisModuleString * b))                                         \
  X(StringAppendBuffer, int, (RedisModuleCtx * ctx, RedisModuleString * str, const char* buf, size_t len))      \
  /* keys */                                                                                                    \
  X(OpenKey, RedisModuleKey*, (RedisModuleCtx * ctx, RedisModuleString * keyname, int mode))                    \
  X(CloseKey, void, (RedisModuleKey * kp))                                                                      \
  X(KeyType, int, (RedisModuleKey * kp))                                                                        \
  X(KeyExists, int, (RedisModuleCtx * ctx, RedisModuleString * keyname))                                        \
  X(ValueLength, size_t, (RedisModuleKey * kp))                                                                 \
  X(DeleteKey, int, (RedisModuleKey * kp))                                                                      \
  X(UnlinkKey, int, (RedisModuleKey * kp))                                                                      \
  X(StringSet, int, (RedisModuleKey * kp, RedisModuleString * str))                                             \
  X(StringDMA, char*, (RedisModuleKey * kp, size_t * len, int mode))                                            \
  X(StringTruncate, int, (RedisModuleKey * kp, size_t newlen))                                                  \
  X(GetExpire, long long, (RedisModuleKey * kp))                                                                \
  X(SetExpire, int, (RedisModuleKey * kp, long long expire))                                                    \
  X(SignalModifiedKey, int, (RedisModuleCtx * ctx, RedisModuleString * keyname))                                \
  X(GetKeyNameFromModuleKey, const RedisModuleString*, (RedisModuleKey * kp))                                   \
  X(GetDbIdFromModuleKey, int, (RedisModuleKey * kp))                                                           \
  /* module data types */                                                                                       \
  X(CreateDataType, RedisModuleType*,                                                                           \
    (RedisModuleCtx * ctx, const char* name, int encver, RedisModuleTypeMethods* typemethods))                  \
  X(ModuleTypeSetValue, int, (RedisModuleKey * key, RedisModuleType * mt, void* value))                         \
  X(ModuleTypeReplaceValue, int,                                                                                \
    (RedisModuleKey * key, RedisModuleType * mt, void* new_value, void** old_value))                            \
  X(ModuleTypeGetType, RedisModuleType*, (RedisModuleKey * key))                                                \
  X(ModuleTypeGetValue, void*, (RedisModuleKey * key))                                                          \
  X(IsIOError, int, (RedisModuleIO * io))                                                                       \
  X(SaveUnsigned, void, (RedisModuleIO * io, uint64_t value))                                                   \
  X(LoadUnsigned, uint64_t, (RedisModuleIO * io))                                                               \
  X(SaveSigned, void, (RedisModuleIO * io, int64_t value))                                                      \
  X(LoadSigned, int64_t, (RedisModuleIO * io))                                                                  \
  X(SaveString, void, (RedisModuleIO * io, RedisModuleString * s))                                              \
  X(SaveStringBuffer, void, (RedisModuleIO * io, const char* str, size_t len))                                  \
  X(LoadString, RedisModuleString*, (RedisModuleIO * io))                                                       \
  X(LoadStringBuffer, char*, (RedisModuleIO * io, size_t * lenptr))                                             \
  X(SaveDouble, void, (RedisModuleIO * io, double value))                                                       \
  X(LoadDouble, double, (RedisModuleIO * io))                                                                   \
  X(SaveFloat, void, (RedisModuleIO * io, float value))                                                         \
  X(LoadFloat, float, (RedisModuleIO * io))                                                                     \
  X(EmitAOF, void, (RedisModuleIO * io, const char* cmdname, const char* fmt, ...))                             \
  X(GetKeyNameFromIO, const RedisModuleString*, (RedisModuleIO * io))                                           \
  X(GetContextFromIO, RedisModuleCtx*, (RedisModuleIO * io))                                                    \
  X(DigestAddStringBuffer, void, (RedisModuleDigest * md, const char* ele, size_t len))                         \
  X(DigestAddLongLong, void, (RedisModuleDigest * md, long long ele))                                           \
  X(DigestEndSequence, void, (RedisModuleDigest * md))                                                          \
  X(RegisterDefragFunc, int, (RedisModuleCtx * ctx, RedisModuleDefragFunc func))                                \
  X(DefragAlloc, void*, (RedisModuleDefragCtx * ctx, void* ptr))                                                \
  X(DefragRedisModuleString, RedisModuleString*, (RedisModuleDefragCtx * ctx, RedisModuleString * str))         \
  X(DefragShouldStop, int, (RedisModuleDefragCtx * ctx))                                                        \
  /* RM_Call */                                                                                                 \
  X(Call, RedisModuleCallReply*, (RedisModuleCtx * ctx, const char* cmdname, const char* fmt, ...))             \
  X(CallReplyType, int, (RedisModuleCallReply * reply))                                                         \
  X(CallReplyStringPtr, const char*, (RedisModuleCallReply * reply, size_t* len))                               \
  X(CallReplyInteger, long long, (RedisModuleCallReply * reply))                                                \
  X(CallReplyLength, size_t, (RedisModuleCallReply * reply))                                                    \
  X(CallReplyArrayElement, RedisModuleCallReply*, (RedisModuleCallReply * reply, size_t idx))                   \
  X(FreeCallReply, void, (RedisModuleCallReply * reply))                                                        \
  /* replication and notifications */                                                                           \
  X(Replicate, int, (RedisModuleCtx * ctx, const char* cmdname, const char* fmt, ...))                          \
  X(ReplicateVerbatim, int, (RedisModuleCtx * ctx))                                                             \
  X(NotifyKeyspaceEvent, int, (RedisModuleCtx * ctx, int type, const char* event, RedisModuleString* key))      \
  X(PublishMessage, int, (RedisModuleCtx * ctx, RedisModuleString * channel, RedisModuleString * message))      \
  /* streams */                                                                                                 \
  X(StreamAdd, int,                                                                                             \
    (RedisModuleKey * key, int flags, RedisModuleStreamID* id, RedisModuleString** argv, int64_t numfields))    \
  /* blocking clients */                                                                                        \
  X(BlockClient, RedisModuleBlockedClient*,                                                                     \
    (RedisModuleCtx * ctx, RedisModuleCmdFunc reply_callback, RedisModuleCmdFunc timeout_callback,              \
     RedisModuleFreePrivdataFunc free_privdata, long long timeout_ms))                                          \
  X(UnblockClient, int, (RedisModuleBlockedClient * bc, void* privdata))                                        \
  X(AbortBlock, int, (RedisModuleBlockedClient * bc))                                                           \
  X(IsBlockedReplyRequest, int, (RedisModuleCtx * ctx))                                                         \
  X(IsBlockedTimeoutRequest, int, (RedisModuleCtx * ctx))                                                       \
  X(GetBlockedClientPrivateData, void*, (RedisModuleCtx * ctx))                                                 \
  X(GetBlockedClientHandle, RedisModuleBlockedClient*, (RedisModuleCtx * ctx))                                  \
  X(BlockedClientDisconnected, int, (RedisModuleCtx * ctx))                                                     \
  X(SetDisconnectCallback, void, (RedisModuleBlockedClient * bc, RedisModuleDisconnectFunc callback))           \
  X(BlockedClientMeasureTimeStart, int, (RedisModuleBlockedClient * bc))                                        \
  X(BlockedClientMeasureTimeEnd, int, (RedisModuleBlockedClient * bc))                                          \
  /* thread-safe contexts and the event loop */                                                                 \
  X(GetThreadSafeContext, RedisModuleCtx*, (RedisModuleBlockedClient * bc))                                     \
  X(GetDetachedThreadSafeContext, RedisModuleCtx*, (RedisModuleCtx * ctx))                                      \
  X(FreeThreadSafeContext, void, (RedisModuleCtx * ctx))                                                        \
  X(ThreadSafeContextLock, void, (RedisModuleCtx * ctx))                                                        \
  X(ThreadSafeContextTryLock, int, (RedisModuleCtx * ctx))                                                      \
  X(ThreadSafeContextUnlock, void, (RedisModuleCtx * ctx))                                                      \
  X(EventLoopAddOneShot, int, (RedisModuleEventLoopOneShotFunc func, void* user_data))                          \
  X(Yield, void, (RedisModuleCtx * ctx, int flags, const char* busy_reply))                                     \
  X(CreateTimer, RedisModuleTimerID, (RedisModuleCtx * ctx, long long period, RedisModuleTimerProc callback,    \
                                      void* data))                                                              \
  X(StopTimer, int, (RedisModuleCtx * ctx, RedisModuleTimerID id, void** data))                                 \
  X(SubscribeToServerEvent, int,                                                                                \
    (RedisModuleCtx * ctx, RedisModuleEvent event, RedisModuleEventCallback callback))                          \
  /* INFO */                                                                                                    \
  X(RegisterInfoFunc, int, (RedisModuleCtx * ctx, RedisModuleInfoFunc cb))                                      \
  X(InfoAddSection, int, (RedisModuleInfoCtx * ctx, const char* name))                                          \
  X(InfoBeginDictField, int, (RedisModuleInfoCtx * ctx, const char* name))                                      \
  X(InfoEndDictField, int, (RedisModuleInfoCtx * ctx))                                                          \
  X(InfoAddFieldString, int, (RedisModuleInfoCtx * ctx, const char* field, RedisModuleString* value))           \
  X(InfoAddFieldCString, int, (RedisModuleInfoCtx * ctx, const char* field, const char* value))                 \
  X(InfoAddFieldDouble, int, (RedisModuleInfoCtx * ctx, const char* field, double value))                       \
  X(InfoAddFieldLongLong, int, (RedisModuleInfoCtx * ctx, const char* field, long long value))                  \
  X(InfoAddFieldULongLong, int, (RedisModuleInfoCtx * ctx, const char* field, unsigned long long value))        \
  /* configs */                                                                                                 \
  X(RegisterNumericConfig, int,                                                                                 \
    (RedisModuleCtx * ctx, const char* name, long long default_val, unsigned int flags, long long min,          \
     long long max, RedisModuleConfigGetNumericFunc getfn, RedisModuleConfigSetNumericFunc setfn,               \
     RedisModuleConfigApplyFunc applyfn, void* privdata))                                                       \
  X(RegisterStringConfig, int,                                                                                  \
    (RedisModuleCtx * ctx, const char* name, const char* default_val, unsigned int flags,                       \
     RedisModuleConfigGetStringFunc getfn, RedisModuleConfigSetStringFunc setfn,                                \
     RedisModuleConfigApplyFunc applyfn, void* privdata))                                                       \
  X(RegisterBoolConfig, int,                                                                                    \
    (RedisModuleCtx * ctx, const char* name, int default_val, unsigned int flags,                               \
     RedisModuleConfigGetBoolFunc getfn, RedisModuleConfigSetBoolFunc setfn, RedisModuleConfigApplyFunc applyfn, \
     void* privdata))                                                                                           \
  X(LoadConfigs, int, (RedisModuleCtx * ctx))                                                                   \
  /* ACL and key positions */                                                                                   \
  X(GetCurrentUserName, RedisModuleString*, (RedisModuleCtx * ctx))                                             \
  X(GetModuleUserFromUserName, RedisModuleUser*, (RedisModuleString * name))                                    \
  X(FreeModuleUser, int, (RedisModuleUser * user))                                                              \
  X(ACLCheckKeyPermissions, int, (RedisModuleUser * user, RedisModuleString * key, int flags))                  \
  X(IsKeysPositionRequest, int, (RedisModuleCtx * ctx))                                                         \
  X(KeyAtPos, void, (RedisModuleCtx * ctx, int pos))                                                            \
  X(KeyAtPosWithFlags, void, (RedisModuleCtx * ctx, int pos, int flags))

// ACL LOG entries (Redis 7.0's RM_ACLAddLogEntry; reason is RedisModuleACLLogEntryReason) and command
// permission checks (RM_ACLCheckCommandPermissions: REDISMODULE_OK when `user` may run argv; both in
// 7.0). A separate table so that the list above stays as the spec orders it; bind() fills both.
inline constexpr int REDISMODULE_ACL_LOG_CMD = 1;
inline constexpr int REDISMODULE_ACL_LOG_KEY = 2;
#define INFER_RM_API_ACL_LOG(X)                                                                                  \
  X(ACLAddLogEntry, int, (RedisModuleCtx * ctx, RedisModuleUser * user, RedisModuleString * object, int reason)) \
  X(ACLCheckCommandPermissions, int, (RedisModuleUser * user, RedisModuleString * *argv, int argc))

namespace infer::rm {

#define INFER_RM_DECLARE(name, ret, params) extern ret(*name) params;
INFER_RM_API(INFER_RM_DECLARE)
INFER_RM_API_ACL_LOG(INFER_RM_DECLARE)
#undef INFER_RM_DECLARE

// Fills every pointer above from ctx (the OnLoad context) and registers the module name with
// SetModuleAttribs. Main thread, OnLoad only. Returns false, with the missing API's name in
// `missing`, when the server lacks one.
bool bind(RedisModuleCtx* ctx, const char* module_name, int module_version, const char** missing);

// Holds an argv string that another thread will read. After a handler returns, Redis trims the argv
// strings a module holds (a realloc on the main thread), so it is trimmed here, before any other
// thread reads it, and that later trim finds nothing to do (command fuzzer, ASan heap-use-after-free).
inline RedisModuleString* hold_for_threads(RedisModuleString* str) {
  TrimStringAllocation(str);
  return HoldString(nullptr, str);
}

}  // namespace infer::rm
