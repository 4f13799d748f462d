#include "redis/args.h"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace infer::redis {

std::string_view view(const RedisModuleString* s) {
  size_t len = 0;
  const char* p = rm::StringPtrLen(s, &len);
  return {p, len};
}

bool is_word(const RedisModuleString* s, std::string_view word) {
  std::string_view v = view(s);
  return v.size() == word.size() && strncasecmp(v.data(), word.data(), v.size()) == 0;
}

bool parse_int(const RedisModuleString* s, long long min, long long max, std::string_view what, long long* out,
               std::string* err) {
  long long v = 0;
  if (rm::StringToLongLong(s, &v) != REDISMODULE_OK || v < min || v > max) {
    *err = std::string(what) + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    return false;
  }
  *out = v;
  return true;
}

bool parse_real(const RedisModuleString* s, double min, double max, std::string_view what, double* out,
                std::string* err) {
  double v = 0;
  if (rm::StringToDouble(s, &v) != REDISMODULE_OK || !std::isfinite(v) || v < min || v > max) {
    char buf[160];
    snprintf(buf, sizeof buf, "%.*s must be a number in [%g, %g]", static_cast<int>(what.size()), what.data(), min,
             max);
    *err = buf;
    return false;
  }
  *out = v;
  return true;
}

std::string needs_value(std::string_view keyword, std::string_view what) {
  return std::string(keyword) + " needs " + std::string(what);
}

bool GivenOnce::first(std::string_view keyword, std::string* err) {
  for (std::string_view k : seen_)
    if (k == keyword) return *err = std::string(keyword) + " given twice", false;
  seen_.push_back(keyword);
  return true;
}

int reply_error(RedisModuleCtx* ctx, const std::string& msg) {
  return reply_coded_error(ctx, "ERR", msg);
}

int reply_coded_error(RedisModuleCtx* ctx, const char* code, const std::string& msg) {
  std::string line = std::string(code) + " " + msg;
  // Error replies are one line.
  for (char& c : line)
    if (c == '\r' || c == '\n') c = ' ';
  return rm::ReplyWithError(ctx, line.c_str());
}

bool refuse_if_cannot_block(RedisModuleCtx* ctx, const char* command) {
  if (!(rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_DENY_BLOCKING)) return false;
  reply_error(ctx, std::string(command) +
                       " blocks the client and cannot run inside MULTI/EXEC, a Lua script or a module call");
  return true;
}

}  // namespace infer::redis
