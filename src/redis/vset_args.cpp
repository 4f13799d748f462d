// Argument parsing and replies shared by the vector-set commands, INFER.EMBED and INFER.RAG.
#include <cmath>
#include <cstring>

#include "redis/args.h"
#include "redis/vset_handlers.h"

namespace infer::redis {

namespace {
constexpr long long kMaxDim = 65536;
}

int reply_wrongtype(RedisModuleCtx* ctx) { return rm::ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE); }

bool is_vector_start(RedisModuleString* arg) { return is_word(arg, "FP32") || is_word(arg, "VALUES"); }

std::optional<std::vector<float>> parse_vector(RedisModuleString** argv, int argc, int* i, std::string* err) {
  if (*i >= argc) {
    *err = "missing vector (FP32 blob or VALUES n v1 ... vn)";
    return std::nullopt;
  }
  if (is_word(argv[*i], "FP32")) {
    if (*i + 1 >= argc) {
      *err = needs_value("FP32", "a blob");
      return std::nullopt;
    }
    std::string_view blob = view(argv[*i + 1]);
    if (blob.empty() || blob.size() % 4 != 0 || blob.size() / 4 > kMaxDim) {
      *err = "invalid vector specification: FP32 blob length must be a positive multiple of 4 bytes, at most 65536 floats";
      return std::nullopt;
    }
    std::vector<float> v(blob.size() / 4);
    std::memcpy(v.data(), blob.data(), blob.size());  // argv bytes are unaligned
    for (float x : v)
      if (!std::isfinite(x)) {
        *err = "invalid vector specification: components must be finite";
        return std::nullopt;
      }
    *i += 2;
    return v;
  }
  if (is_word(argv[*i], "VALUES")) {
    long long n = 0;
    if (*i + 1 >= argc || !parse_int(argv[*i + 1], 1, kMaxDim, "VALUES count", &n, err)) {
      if (err->empty()) *err = needs_value("VALUES", "a count");
      *err = "invalid vector specification: " + *err;
      return std::nullopt;
    }
    if (*i + 2 + n > argc) {
      *err = "invalid vector specification: VALUES " + std::to_string(n) + " needs " + std::to_string(n) + " numbers";
      return std::nullopt;
    }
    std::vector<float> v(static_cast<size_t>(n));
    for (long long k = 0; k < n; ++k) {
      double d = 0;
      if (rm::StringToDouble(argv[*i + 2 + k], &d) != REDISMODULE_OK || !std::isfinite(d) ||
          std::fabs(d) > 3.4e38) {
        *err = "invalid vector specification: '" + str(argv[*i + 2 + k]) + "' is not a number";
        return std::nullopt;
      }
      v[k] = static_cast<float>(d);
    }
    *i += 2 + static_cast<int>(n);
    return v;
  }
  *err = "invalid vector specification: expected FP32 or VALUES, got '" + str(argv[*i]) + "'";
  return std::nullopt;
}

bool parse_search_options(RedisModuleString** argv, int argc, int i, vector::SearchOptions* opt,
                          std::optional<vector::Filter>* filter, VsimReplyOptions* reply, std::string* err) {
  long long n = 0;
  for (; i < argc; ++i) {
    RedisModuleString* a = argv[i];
    const bool has_value = i + 1 < argc;
    if (is_word(a, "WITHSCORES")) {
      reply->with_scores = true;
    } else if (is_word(a, "WITHATTRIBS")) {
      reply->with_attribs = true;
    } else if (is_word(a, "TRUTH")) {
      opt->truth = true;
    } else if (is_word(a, "NOTHREAD")) {
      // cmd_vsim looks for it: this search runs on the main thread whatever the set's size.
    } else if (is_word(a, "COUNT") && has_value) {
      if (!parse_int(argv[++i], 1, 1000000, "COUNT", &n, err)) {
        *err = "invalid COUNT: " + *err;
        return false;
      }
      opt->count = static_cast<size_t>(n);
    } else if (is_word(a, "EF") && has_value) {
      if (!parse_int(argv[++i], 1, 1000000, "EF", &n, err)) {
        *err = "invalid EF: " + *err;
        return false;
      }
      opt->ef = static_cast<size_t>(n);
    } else if (is_word(a, "FILTER-EF") && has_value) {
      if (!parse_int(argv[++i], 1, 100000000, "FILTER-EF", &n, err)) {
        *err = "invalid FILTER-EF: " + *err;
        return false;
      }
      opt->filter_ef = static_cast<size_t>(n);
    } else if (is_word(a, "EPSILON") && has_value) {
      double d = 0;
      if (!parse_real(argv[++i], 0, 1, "EPSILON", &d, err)) {
        *err = "invalid EPSILON: " + *err;
        return false;
      }
      opt->epsilon = static_cast<float>(d);
    } else if (is_word(a, "FILTER") && has_value) {
      try {
        *filter = vector::Filter::parse(view(argv[++i]));
      } catch (const vector::FilterError& e) {
        *err = e.what();
        return false;
      }
      opt->filter = &**filter;
    } else {
      *err = "syntax error in VSIM command at '" + str(a) + "'";
      return false;
    }
  }
  return true;
}

}  // namespace infer::redis
