#include "redis/settings.h"

#include <strings.h>

#include <sys/stat.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <string>

#include "redis/args.h"
#include "redis/models.h"

namespace infer::redis {

Settings& settings() {
  static Settings s;
  return s;
}

std::string check_settings(const Settings& s) {
  if (s.default_max_tokens > s.max_tokens)
    return "infer.default-max-tokens (" + std::to_string(s.default_max_tokens) + ") must not exceed infer.max-tokens (" +
           std::to_string(s.max_tokens) + ")";
  return "";
}

namespace {

// True when the process runs under a seccomp filter (/proc/self/status "Seccomp: 2").
bool seccomp_filter_active() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
  return false;
}

}  // namespace

int thread_nice() {
  static const bool filtered = seccomp_filter_active();
  if (settings().nice == 0) return 0;
  if (filtered) {
    static bool logged = false;
    if (!logged) {
      logged = true;
      rm::Log(nullptr, "warning",
              "infer: a seccomp filter is active (e.g. systemd SystemCallFilter): compute threads keep normal "
              "priority, infer.nice is not applied (setpriority could kill the server)");
    }
    return 0;
  }
  return static_cast<int>(settings().nice);
}

namespace {

std::string str(RedisModuleString* s) {
  size_t len = 0;
  const char* p = rm::StringPtrLen(s, &len);
  return std::string(p, len);
}

// Case-insensitive, whole argument: "MODEL\0x" is not MODEL.
bool same_word(const std::string& arg, const char* word) {
  return arg.size() == std::strlen(word) && strcasecmp(arg.c_str(), word) == 0;
}

struct NumericOption {
  const char* arg;     // loadmodule argument
  const char* config;  // config name (shown as infer.<name>)
  long long Settings::*field;
  long long min, max;
  unsigned flags;
};

constexpr NumericOption kNumeric[] = {
    {"THREADS", "threads", &Settings::threads, 0, 1024, REDISMODULE_CONFIG_IMMUTABLE},
    {"NICE", "nice", &Settings::nice, 0, 19, REDISMODULE_CONFIG_DEFAULT},
    {"QUEUE", "queue-depth", &Settings::queue_depth, 1, 1 << 20, REDISMODULE_CONFIG_DEFAULT},
    {"MAX-RUNNING", "max-running", &Settings::max_running, 1, 4096, REDISMODULE_CONFIG_DEFAULT},
    {"CONTEXT", "context", &Settings::context, 16, 1 << 20, REDISMODULE_CONFIG_DEFAULT},
    {"MAX-TOKENS", "max-tokens", &Settings::max_tokens, 1, 1 << 20, REDISMODULE_CONFIG_DEFAULT},
    {"DEFAULT-MAX-TOKENS", "default-max-tokens", &Settings::default_max_tokens, 1, 1 << 20,
     REDISMODULE_CONFIG_DEFAULT},
    {"MAX-MEMORY", "max-memory", &Settings::max_memory, 0, LLONG_MAX, REDISMODULE_CONFIG_MEMORY},
    {"TIMEOUT", "timeout-ms", &Settings::timeout_ms, 0, INT_MAX, REDISMODULE_CONFIG_DEFAULT},
    {"STREAM-MAXLEN", "stream-maxlen", &Settings::stream_maxlen, 0, LLONG_MAX, REDISMODULE_CONFIG_DEFAULT},
    {"VSIM-THREAD-THRESHOLD", "vsim-thread-threshold", &Settings::vsim_thread_threshold, 0, LLONG_MAX,
     REDISMODULE_CONFIG_DEFAULT},
    {"MAX-ATTRIBUTE-BYTES", "max-attribute-bytes", &Settings::max_attribute_bytes, 2, 512LL << 20,
     REDISMODULE_CONFIG_MEMORY},
    {"INLINE-MAX-BYTES", "inline-max-bytes", &Settings::inline_max_bytes, 0, LLONG_MAX, REDISMODULE_CONFIG_MEMORY},
};

long long get_numeric(const char*, void* priv) {
  return settings().*(static_cast<const NumericOption*>(priv)->field);
}

int set_numeric(const char*, long long v, void* priv, RedisModuleString** err) {
  const auto field = static_cast<const NumericOption*>(priv)->field;
  // A cap below what the loaded models hold would be written by CONFIG REWRITE and leave them out
  // at the next start.
  if (field == &Settings::max_memory) {
    if (std::string why = check_max_memory(v); !why.empty()) {
      *err = rm::CreateString(nullptr, why.data(), why.size());
      return REDISMODULE_ERR;
    }
  }
  settings().*field = v;
  return REDISMODULE_OK;
}

// Runs once after all the values of one CONFIG SET are set: configs that bound each other are checked
// together, so they can be changed in either order (an error makes Redis restore the old values).
int apply_numeric(RedisModuleCtx*, void*, RedisModuleString** err) {
  const std::string why = check_settings(settings());
  if (why.empty()) return REDISMODULE_OK;
  *err = rm::CreateString(nullptr, why.data(), why.size());
  return REDISMODULE_ERR;
}

// "" when `dir` is empty (INFER.LOAD off) or an existing directory, else why not.
std::string check_model_dir(const std::string& dir) {
  if (std::string why = check_no_nul("MODEL-DIR", dir); !why.empty()) return why;
  struct stat st {};
  if (dir.empty() || (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) return "";
  return "MODEL-DIR '" + dir + "' is not an existing directory";
}

RedisModuleString* get_model_dir(const char*, void*) {
  // Redis does not free what a string getter returns: keep the last one and free it on the next call.
  static RedisModuleString* cached = nullptr;
  if (cached) rm::FreeString(nullptr, cached);
  cached = rm::CreateString(nullptr, settings().model_dir.data(), settings().model_dir.size());
  return cached;
}

int set_model_dir(const char*, RedisModuleString* v, void*, RedisModuleString** err) {
  try {
    const std::string dir = str(v);
    if (std::string why = check_model_dir(dir); !why.empty()) {
      *err = rm::CreateString(nullptr, why.data(), why.size());
      return REDISMODULE_ERR;
    }
    settings().model_dir = dir;
    return REDISMODULE_OK;
  } catch (...) {
    return REDISMODULE_ERR;
  }
}

}  // namespace

std::string parse_module_args(RedisModuleString** argv, int argc) {
  Settings& s = settings();
  for (int i = 0; i < argc; ++i) {
    std::string key = str(argv[i]);
    auto need = [&](int n) { return i + n < argc; };
    if (same_word(key, "MODEL")) {
      if (!need(2)) return needs_value("MODEL", "a name and a path");
      std::string name = str(argv[i + 1]), path = str(argv[i + 2]);
      if (std::string why = check_model_name(name); !why.empty()) return "MODEL: " + why;
      if (path.empty()) return "MODEL " + name + " needs a non-empty path";
      if (std::string why = check_no_nul("MODEL " + name + " path", path); !why.empty()) return why;
      i += 2;
      engine::KvType kv_type = engine::KvType::F16;
      if (need(2) && same_word(str(argv[i + 1]), "KV-TYPE")) {
        try {
          kv_type = engine::parse_kv_type(str(argv[i + 2]));
        } catch (const std::invalid_argument&) {
          return "MODEL " + name + ": KV-TYPE must be f16, q8_0 or q4_0";
        }
        i += 2;
      }
      s.startup_models.push_back({std::move(name), std::move(path), kv_type});
      continue;
    }
    if (same_word(key, "MODEL-DIR")) {
      if (!need(1)) return needs_value("MODEL-DIR", "a directory");
      s.model_dir = str(argv[++i]);
      if (std::string why = check_model_dir(s.model_dir); !why.empty()) return why;
      continue;
    }
    const NumericOption* opt = nullptr;
    for (const auto& o : kNumeric)
      if (same_word(key, o.arg)) opt = &o;
    if (!opt) return "unknown module argument '" + key + "'";
    if (!need(1)) return needs_value(key);
    long long v = 0;
    if (rm::StringToLongLong(argv[++i], &v) != REDISMODULE_OK || v < opt->min || v > opt->max)
      return key + " must be an integer in [" + std::to_string(opt->min) + ", " + std::to_string(opt->max) + "]";
    s.*(opt->field) = v;
  }
  return check_settings(s);
}

int register_configs(RedisModuleCtx* ctx) {
  for (const auto& o : kNumeric) {
    if (rm::RegisterNumericConfig(ctx, o.config, settings().*(o.field), o.flags, o.min, o.max, get_numeric,
                                  set_numeric, apply_numeric, const_cast<NumericOption*>(&o)) != REDISMODULE_OK) {
      rm::Log(ctx, "warning", "infer: cannot register config infer.%s", o.config);
      return REDISMODULE_ERR;
    }
  }
  // The model directory bounds what INFER.LOAD may open: only changeable at startup.
  if (rm::RegisterStringConfig(ctx, "model-dir", settings().model_dir.c_str(), REDISMODULE_CONFIG_IMMUTABLE,
                               get_model_dir, set_model_dir, nullptr, nullptr) != REDISMODULE_OK) {
    rm::Log(ctx, "warning", "infer: cannot register config infer.model-dir");
    return REDISMODULE_ERR;
  }
  if (rm::LoadConfigs(ctx) != REDISMODULE_OK) return REDISMODULE_ERR;  // Redis logs which config and why
  // Values from redis.conf are set one by one, without the apply check.
  if (std::string why = check_settings(settings()); !why.empty()) {
    rm::Log(ctx, "warning", "infer: %s", why.c_str());
    return REDISMODULE_ERR;
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
