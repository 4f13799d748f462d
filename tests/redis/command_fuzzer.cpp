// Grammar-aware command fuzzer: several clients send every INFER.* command with valid and mutated
// arguments (wrong types, huge and negative numbers, missing values, repeated options, random bytes,
// long FILTER expressions, megabyte texts, attributes and FILTER operands, keys of other types), some
// inside MULTI/EXEC or EVAL, and RESTOREs of damaged vector-set DUMPs, to a real redis-server with the module, stories260K and
// a small MODEL-DIR, and sometimes close the connection right after sending or after a short delay.
// The server must answer PING after every batch and, after a quiet period at the end, report no queued
// or running jobs, no blocked clients and no KV pages held beyond the prefix cache's. On a crash or hang it prints the seed, the last commands sent
// and the server log tail, and exits nonzero.
//
// Usage: infer_command_fuzzer [--seed N] [--minutes M] [--commands N] [--clients C] [--no-stream-disconnects]
//   (with both limits the first one reached ends the run; --no-stream-disconnects never closes a
//   connection whose command names STREAM, to run past a known STREAM crash while it is open)
// Each client's command sequence follows from the seed; how the clients interleave does not, so a seed
// replays the same commands, not always the same schedule.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis/dump_payload.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Argv = std::vector<std::string>;

struct Options {
  uint64_t seed = 0;
  double minutes = 0;       // 0: no time limit
  uint64_t commands = 0;    // 0: no count limit
  int clients = 4;
  bool stream_disconnects = true;
  int batch = 50;           // commands per client between PINGs
  double disconnect_p = 0.03;
  double mutate_p = 0.35;
  double wrap_p = 0.08;      // sent inside MULTI/EXEC or EVAL
  double restore_p = 0.03;   // DUMP a vector set, damage the payload, RESTORE it elsewhere
  bool show_errors = false;  // prints the error replies to unmutated commands (tuning the grammar)
};

// ---- the server and the crash report ----

std::unique_ptr<RedisServer> g_server;
std::string g_work_dir;  // MODEL-DIR and sanitizer logs; outlives the server's own directory
uint64_t g_seed = 0;
std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_sent{0}, g_disconnects{0}, g_errors{0}, g_io_errors{0}, g_restores{0}, g_restored{0};

std::mutex g_ring_mu;
std::deque<std::string> g_ring;  // the last commands sent, for the crash report
constexpr size_t kRingSize = 40;

std::string printable(const std::string& a) {
  std::string out;
  const size_t shown = std::min<size_t>(a.size(), 60);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(a[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (shown < a.size()) out += "...(" + std::to_string(a.size()) + " bytes)";
  return "\"" + out + "\"";
}

std::string describe(const Argv& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + printable(a);
  return s;
}

void remember(int client, const Argv& argv, const char* how) {
  std::lock_guard lock(g_ring_mu);
  g_ring.push_back("[client " + std::to_string(client) + how + "] " + describe(argv));
  if (g_ring.size() > kRingSize) g_ring.pop_front();
}

std::string tail_lines(const std::string& text, size_t n) {
  size_t pos = text.size();
  for (size_t k = 0; k <= n && pos > 0; ++k) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
    if (k == n) return text.substr(pos + 1);
  }
  return text.substr(pos);
}

[[noreturn]] void report_failure(const std::string& what) {
  static std::mutex once;
  once.lock();  // never unlocked: the first failure reports, the others wait for the exit
  g_stop = true;
  std::fprintf(stderr, "\ncommand fuzzer: FAILURE: %s\n", what.c_str());
  std::fprintf(stderr, "command fuzzer: seed %llu, %llu commands sent\n", static_cast<unsigned long long>(g_seed),
               static_cast<unsigned long long>(g_sent.load()));
  {
    std::lock_guard lock(g_ring_mu);
    std::fprintf(stderr, "command fuzzer: last %zu commands (oldest first):\n", g_ring.size());
    for (const auto& s : g_ring) std::fprintf(stderr, "  %s\n", s.c_str());
  }
  if (g_server && g_server->alive()) {
    // A hang: SIGSEGV makes Redis (or the sanitizer) log the stuck thread's stack before it dies.
    kill(g_server->pid(), SIGSEGV);
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  if (g_server) std::fprintf(stderr, "command fuzzer: server log tail:\n%s\n", tail_lines(g_server->log(), 80).c_str());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(g_work_dir, ec)) {
    if (e.path().filename().string().starts_with("sanitizer")) {
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      std::fprintf(stderr, "command fuzzer: %s:\n%s\n", e.path().c_str(), tail_lines(ss.str(), 120).c_str());
    }
  }
  if (g_server && g_server->alive()) kill(g_server->pid(), SIGKILL);
  std::fflush(stderr);
  std::_Exit(1);
}

// PING on a fresh connection; a server that died or stopped answering is a failure.
void check_alive(const char* when) {
  if (!g_server->alive()) report_failure(std::string("redis-server exited (") + when + ")");
  try {
    RedisConn c = g_server->connect(30000);
    Reply r = command(c.get(), {"PING"});
    if (!r || r->type != REDIS_REPLY_STATUS || std::strcmp(r->str, "PONG") != 0)
      report_failure(std::string("PING got ") + show(r.get()) + " (" + when + ")");
  } catch (const std::exception& e) {
    // A crashing server may still be writing its report: give it a moment to exit.
    for (int i = 0; i < 20 && g_server->alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!g_server->alive()) report_failure(std::string("redis-server exited (") + when + ")");
    report_failure(std::string("no PING reply: ") + e.what() + " (" + when + ")");
  }
}

// ---- the grammar ----

class Gen {
 public:
  explicit Gen(uint64_t seed) : r_(seed) {}

  uint64_t below(uint64_t n) { return n ? r_() % n : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(r_) < p; }
  int between(int lo, int hi) { return lo + static_cast<int>(below(static_cast<uint64_t>(hi - lo + 1))); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }
  std::string num(int lo, int hi) { return std::to_string(between(lo, hi)); }
  std::string real(double lo, double hi) {
    return std::to_string(std::uniform_real_distribution<double>(lo, hi)(r_));
  }

  std::string bytes(size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(below(256));
    return s;
  }

  std::string model() {
    if (chance(0.85)) return "stories";
    return pick<std::string>({"m1", "m2", "nope", "", "STORIES"});
  }
  // Names that INFER.LOAD may create, and paths inside and outside MODEL-DIR.
  std::string load_name() { return pick<std::string>({"m1", "m2", "stories", "stories", "bad name", ""}); }
  std::string load_path() {
    return pick<std::string>({"stories260K.gguf", "stories260K.gguf", "copy.gguf", g_work_dir + "/models/copy.gguf",
                              "truncated.gguf", "empty.gguf", "nonexistent.gguf", "../models/../etc", "/etc/passwd",
                              "", "."});
  }

  std::string tok_key() { return chance(0.85) ? "tk:" + num(0, 3) : other_key(); }
  std::string vkey3() { return chance(0.9) ? "v3:" + num(0, 2) : other_key(); }
  std::string vkey64() { return chance(0.9) ? "v64:" + num(0, 1) : other_key(); }
  std::string vkey() { return chance(0.5) ? vkey3() : vkey64(); }
  std::string stream_key() { return chance(0.9) ? "st:" + num(0, 2) : other_key(); }
  std::string other_key() {
    return pick<std::string>({"str", "hash", "list", "tk:0", "v3:0", "v64:0", "st:0", "missing", "{x}", ""});
  }
  std::string element() { return chance(0.9) ? "e" + num(0, 15) : pick<std::string>({"", "missing", bytes(4)}); }

  std::string word() {
    return pick<std::string>({"Once", "upon", "a", "time", "there", "was", "little", "girl", "named", "Lily",
                              "she", "liked", "to", "play", "in", "the", "park", "with", "her", "dog", "."});
  }
  std::string text() {
    switch (below(10)) {
      case 0: return "";
      case 1: return bytes(below(64));
      case 2: {  // long text: goes to the background thread, fills the context, or passes the inline limit
        std::string s;
        const size_t n = chance(0.8) ? 300 : chance(0.9) ? 20000 : pick<size_t>({300000, 2000000});
        while (s.size() < n) s += word() + " ";
        return s;
      }
      case 3: return "<|im_start|>user\nhi<|im_end|>";
      default: {
        std::string s;
        for (int i = between(1, 12); i > 0; --i) s += (s.empty() ? "" : " ") + word();
        return s;
      }
    }
  }

  std::string attrs() {
    switch (below(12)) {
      case 0: return "";
      case 1: return chance(0.9) ? "not json" : R"({"s": ")" + std::string(pick<size_t>({2000, 200000}), 'a') + "\"}";
      case 2: return "[1, 2]";
      case 3: return R"({"n": )" + std::string(between(1, 3000), '[') + "1" + "}";  // invalid: unclosed
      case 4: {
        const int d = between(1, 3000);
        return R"({"n": )" + std::string(d, '[') + "1" + std::string(d, ']') + "}";
      }
      default: {
        std::string s = R"({"n": )" + num(0, 5) + R"(, "s": ")" + word() + R"(", "tags": [")" + word() + R"("])";
        if (chance(0.6)) s += R"(, "tokens": "tk:)" + num(0, 4) + "\"";
        if (chance(0.2)) s += R"(, "doc": ")" + other_key() + "\"";
        return s + "}";
      }
    }
  }

  std::string filter_expr(int depth) {
    if (depth <= 0 || chance(0.3)) {
      return pick<std::string>({".n", ".s", ".tags", ".missing", num(-5, 5), real(-2, 2), "\"" + word() + "\"",
                                "'x'", "true", "false", "[1, 2, 3]", "[]", "1e308", "-0"});
    }
    switch (below(5)) {
      case 0: return "(" + filter_expr(depth - 1) + ")";
      case 1: return pick<std::string>({"not ", "!", "-"}) + filter_expr(depth - 1);
      default:
        return filter_expr(depth - 1) + " " +
               pick<std::string>({"and", "or", "&&", "||", "==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "/",
                                  "%", "**"}) +
               " " + filter_expr(depth - 1);
    }
  }
  std::string filter() {
    switch (below(20)) {
      case 0: {  // long chains: under and over the node limit, and/or and arithmetic
        std::string link = pick<std::string>({" and .n == 1", " or .n == 2", " + 1", " ** 1", " && .s in .tags"});
        std::string s = ".n == 1";
        for (int i = pick<int>({10, 150, 300, 1000, 1400, 5000, 60000}); i > 0; --i) s += link;
        return s;
      }
      case 1: {
        const int d = pick<int>({50, 99, 150, 300, 100000});
        return std::string(d, pick<char>({'(', '[', '!', '-'})) + "1" + std::string(chance(0.5) ? d : 0, ')');
      }
      case 2: return bytes(below(40));
      case 3: return "";
      case 4: return "1" + std::string(between(100, 1000), '0');
      case 5: {  // long string operands against long attributes: the evaluator's work bound
        std::string s;
        for (int i = between(1, 10); i > 0; --i)
          s += std::string(s.empty() ? "" : " or ") + ".s in \"" + std::string(pick<size_t>({100, 20000, 200000}), 'a') + "\"";
        return s;
      }
      default: return filter_expr(between(0, 6));
    }
  }

  std::string fp32(size_t dim) {
    std::string s(dim * 4, '\0');
    for (size_t i = 0; i < dim; ++i) {
      const float f = std::uniform_real_distribution<float>(-1, 1)(r_);
      std::memcpy(s.data() + i * 4, &f, 4);
    }
    return s;
  }
  void vector_arg(Argv& a, size_t dim) {
    if (chance(0.5)) {
      a.push_back("FP32");
      a.push_back(fp32(chance(0.9) ? dim : below(80)));
    } else {
      const size_t n = chance(0.9) ? dim : below(80);
      a.push_back("VALUES");
      a.push_back(std::to_string(n));
      for (size_t i = 0; i < n; ++i) a.push_back(real(-1, 1));
    }
  }

  void generation_options(Argv& a) {
    for (int i = between(0, 4); i > 0; --i) {
      switch (below(12)) {
        case 0: a.insert(a.end(), {"MAXTOKENS", chance(0.9) ? num(1, 48) : num(100, 600)}); break;
        case 1: a.insert(a.end(), {"TEMP", real(0, 2)}); break;
        case 2: a.insert(a.end(), {"TOPK", num(0, 100)}); break;
        case 3: a.insert(a.end(), {"TOPP", real(0, 1)}); break;
        case 4: a.insert(a.end(), {"MINP", real(0, 1)}); break;
        case 5: a.insert(a.end(), {"REPEAT-PENALTY", real(0.5, 2)}); break;
        case 6: a.insert(a.end(), {"SEED", num(0, 1 << 30)}); break;
        case 7: a.insert(a.end(), {"STOP", word()}); break;
        case 8: a.insert(a.end(), {"TIMEOUT", num(1, 5000)}); break;
        case 9: a.push_back("WITHSTATS"); break;
        case 10: a.insert(a.end(), {"LOGPROBS", num(0, 22)}); break;
        case 11:  // the semantic cache: a set of the model's width, mostly
          a.insert(a.end(), {"CACHE", chance(0.6) ? vkey64() : "cache:" + num(0, 1)});
          if (chance(0.4)) a.insert(a.end(), {"THRESHOLD", real(-1.2, 1.2)});
          if (chance(0.4)) a.insert(a.end(), {"TTL", num(0, 3)});
          if (chance(0.4)) a.push_back("SAMPLED");
          break;
      }
    }
  }

  // One valid-looking command (its arguments drawn from the grammar; values may still be refused).
  Argv command() {
    static const std::vector<std::pair<int, Argv (Gen::*)()>> table = {
        {12, &Gen::generate}, {5, &Gen::generate_stream}, {8, &Gen::tokenize}, {5, &Gen::detokenize},
        {6, &Gen::embed},     {5, &Gen::rag},             {10, &Gen::vadd},    {10, &Gen::vsim},
        {3, &Gen::vrem},      {3, &Gen::vsetattr},        {4, &Gen::vread},    {2, &Gen::load},
        {1, &Gen::unload},    {3, &Gen::admin_read},      {5, &Gen::plain},    {1, &Gen::internal}};
    int total = 0;
    for (const auto& [w, f] : table) total += w;
    int x = static_cast<int>(below(static_cast<uint64_t>(total)));
    for (const auto& [w, f] : table) {
      if (x < w) return (this->*f)();
      x -= w;
    }
    return plain();
  }

  Argv generate() { return generate_with(false); }
  Argv generate_stream() { return generate_with(true); }
  Argv generate_with(bool stream) {
    Argv a = {"INFER.GENERATE", model()};
    switch (below(7)) {
      case 0: a.push_back(text()); break;
      case 1: a.insert(a.end(), {"PROMPT", text()}); break;
      case 2:
      case 3:
        a.push_back("TOKENS");
        for (int i = between(1, 3); i > 0; --i) a.push_back(tok_key());
        if (chance(0.5)) a.insert(a.end(), {"PROMPT", text()});
        break;
      case 4:
        a.push_back("CHAT");
        for (int i = between(1, 3); i > 0; --i) a.insert(a.end(), {pick<std::string>({"system", "user", "assistant", "bot"}), text()});
        break;
      case 5:  // a chat as JSON, well-formed or not, with the other chat options now and then
        a.insert(a.end(), {"MESSAGES", pick<std::string>({R"([{"role":"user","content":"hi"}])", "[", "[]", text()})});
        if (chance(0.3)) a.insert(a.end(), {"TOOLS", pick<std::string>({"[]", "{", text()})});
        if (chance(0.3)) a.insert(a.end(), {"CHATARGS", pick<std::string>({R"({"enable_thinking":false})", "[1]", text()})});
        if (chance(0.3)) a.insert(a.end(), {"TEMPLATE", pick<std::string>({"default", "tool_use", "chatml", text()})});
        if (chance(0.3))
          a.insert(a.end(), {"TOOLCHOICE", pick<std::string>({"auto", "none", "required", "get_weather", text()})});
        break;
      default: a.insert(a.end(), {"PROMPT", text()});
    }
    generation_options(a);
    if (stream) a.insert(a.end(), {"STREAM", stream_key()});
    return a;
  }

  Argv tokenize() {
    Argv a = {"INFER.TOKENIZE", model(), text()};
    if (chance(0.3)) a.push_back("NOSPECIAL");
    if (chance(0.3)) a.push_back("NOBOS");
    if (chance(0.6)) a.insert(a.end(), {"STORE", tok_key()});
    return a;
  }

  Argv detokenize() {
    Argv a = {"INFER.DETOKENIZE", model()};
    if (chance(0.4)) {
      a.insert(a.end(), {"KEY", tok_key()});
    } else {
      for (int i = between(1, 20); i > 0; --i) a.push_back(chance(0.95) ? num(0, 511) : num(-10, 100000));
    }
    return a;
  }

  Argv embed() {
    Argv a = {"INFER.EMBED", model(), text()};
    if (chance(0.3)) a.insert(a.end(), {"POOLING", pick<std::string>({"last", "mean", "cls"})});
    if (chance(0.3)) a.push_back("NORMALIZE");
    if (chance(0.2)) a.push_back("ARRAY");
    if (chance(0.5)) {
      a.insert(a.end(), {"STORE", vkey64(), element()});
      if (chance(0.5)) a.insert(a.end(), {"SETATTR", attrs()});
    }
    return a;
  }

  Argv rag() {
    Argv a = {"INFER.RAG", model(), vkey64()};
    if (chance(0.6)) {
      a.insert(a.end(), {"QUERY", text()});
    } else {
      vector_arg(a, 64);
      if (chance(0.8)) a.insert(a.end(), {"QUESTION", text()});
    }
    if (chance(0.4)) a.insert(a.end(), {"COUNT", num(1, 8)});
    if (chance(0.3)) a.insert(a.end(), {"FILTER", filter()});
    if (chance(0.3)) a.insert(a.end(), {"DOCKEY", pick<std::string>({"tokens", "doc", "missing", ""})});
    if (chance(0.2)) a.insert(a.end(), {"TEMPLATE", pick<std::string>({"plain", "chat", "other"})});
    if (chance(0.2)) a.insert(a.end(), {"EF", num(1, 200)});
    generation_options(a);
    if (chance(0.5)) a.push_back("WITHSOURCES");
    if (chance(0.2)) a.insert(a.end(), {"STREAM", stream_key()});
    if (a.end() == std::find(a.begin(), a.end(), "MAXTOKENS")) a.insert(a.end(), {"MAXTOKENS", num(1, 24)});
    return a;
  }

  Argv vadd() {
    const bool wide = chance(0.3);
    Argv a = {"INFER.VADD", wide ? vkey64() : vkey3()};
    if (chance(0.05)) a.insert(a.end(), {"REDUCE", num(1, 8)});
    vector_arg(a, wide ? 64 : 3);
    a.push_back(element());
    if (chance(0.3)) a.push_back(pick<std::string>({"NOQUANT", "Q8", "BIN"}));
    if (chance(0.1)) a.insert(a.end(), {"EF", num(1, 500)});
    if (chance(0.6)) a.insert(a.end(), {"SETATTR", attrs()});
    if (chance(0.1)) a.insert(a.end(), {"M", num(2, 64)});
    if (chance(0.05)) a.push_back("CAS");
    return a;
  }

  Argv vsim() {
    const bool wide = chance(0.3);
    Argv a = {"INFER.VSIM", wide ? vkey64() : vkey3()};
    if (chance(0.4)) {
      a.insert(a.end(), {"ELE", element()});
    } else {
      vector_arg(a, wide ? 64 : 3);
    }
    if (chance(0.3)) a.push_back("WITHSCORES");
    if (chance(0.3)) a.push_back("WITHATTRIBS");
    if (chance(0.3)) a.insert(a.end(), {"COUNT", num(1, 50)});
    if (chance(0.1)) a.insert(a.end(), {"EPSILON", real(0, 1)});
    if (chance(0.2)) a.insert(a.end(), {"EF", num(1, 500)});
    if (chance(0.5)) a.insert(a.end(), {"FILTER", filter()});
    if (chance(0.1)) a.insert(a.end(), {"FILTER-EF", num(1, 1000)});
    if (chance(0.1)) a.push_back("TRUTH");
    if (chance(0.2)) a.push_back("NOTHREAD");
    return a;
  }

  Argv vrem() { return {"INFER.VREM", vkey(), element()}; }
  Argv vsetattr() { return {"INFER.VSETATTR", vkey(), element(), attrs()}; }
  Argv vread() {
    switch (below(5)) {
      case 0: return {"INFER.VGETATTR", vkey(), element()};
      case 1: return chance(0.5) ? Argv{"INFER.VEMB", vkey(), element()} : Argv{"INFER.VEMB", vkey(), element(), "RAW"};
      case 2: return {"INFER.VCARD", vkey()};
      case 3: return {"INFER.VDIM", vkey()};
      default: return {"INFER.VINFO", vkey()};
    }
  }

  // LOAD's numbers stay small: a plan that fits the machine's free memory is accepted and allocated, which
  // on a shared CI machine would starve its neighbours (the memory plan has its own tests).
  Argv load() {
    Argv a = {"INFER.LOAD", load_name(), load_path()};
    if (chance(0.3)) a.insert(a.end(), {"THREADS", num(0, 2)});
    if (chance(0.3)) a.insert(a.end(), {"QUEUE", num(1, 32)});
    if (chance(0.3)) a.insert(a.end(), {"MAX-RUNNING", num(1, 8)});
    if (chance(0.3)) a.insert(a.end(), {"CONTEXT", num(16, 512)});
    if (chance(0.3)) a.insert(a.end(), {"WEIGHTS", pick<std::string>({"copy", "mmap", "other"})});
    if (chance(0.2)) a.insert(a.end(), {"DEVICE", pick<std::string>({"cpu", "cuda", "other"})});
    if (chance(0.1)) a.insert(a.end(), {"GPU-LAYERS", pick<std::string>({"auto", "0", "2", "-1", "many"})});
    if (chance(0.1)) a.insert(a.end(), {"VRAM-BUDGET", pick<std::string>({"0", "1000000", "-5"})});
    return a;
  }
  // Unloading stories is rare (most commands name it); LOAD brings it back from MODEL-DIR.
  Argv unload() { return {"INFER.UNLOAD", chance(0.97) ? pick<std::string>({"m1", "m2"}) : model()}; }
  Argv admin_read() {
    switch (below(4)) {
      case 0: return {"INFER.MODELS"};
      case 1: return {"INFER.INFO", model()};
      case 2: return chance(0.5) ? Argv{"INFER.STATS"} : Argv{"INFER.STATS", model()};
      default: return {"INFO", "infer"};
    }
  }

  // The master-to-replica records a client must not be able to send.
  Argv internal() {
    Argv a = {"INFER.STREAMSTATE", stream_key(), pick<std::string>({"OPEN", "DONE", "open", "x"})};
    if (chance(0.7)) a.push_back(num(-1, 100));
    return a;
  }

  // Keys of other types for the WRONGTYPE paths, deletions, expiries.
  Argv plain() {
    switch (below(8)) {
      case 0: return {"SET", "str", word()};
      case 1: return {"HSET", "hash", "f", word()};
      case 2: return {"LPUSH", "list", word()};
      case 3: return {"DEL", pick<std::string>({tok_key(), vkey(), stream_key(), other_key()})};
      case 4: return {"PEXPIRE", pick<std::string>({tok_key(), vkey(), stream_key()}), num(1, 500)};
      case 5: return {"SET", tok_key(), bytes(4 * below(8))};  // raw uint32 ids, valid or not
      case 6: return {"XLEN", stream_key()};
      default: return {chance(0.02) ? "FLUSHALL" : "PING"};
    }
  }

  // Out-of-grammar values: numbers at and past every boundary, bytes, emptiness, other keys.
  std::string weird() {
    switch (below(6)) {
      case 0: return bytes(below(40));
      case 1: return std::string(pick<size_t>({1000, 65536, 300000}), pick<char>({'a', '(', '9', ' '}));
      case 2: return other_key();
      case 3:
        return pick<std::string>({"STREAM", "STORE", "FILTER", "COUNT", "MAXTOKENS", "TOKENS", "PROMPT", "KEY", "VALUES",
                                  "FP32", "ELE", "SETATTR", "WITHSOURCES", "WITHSTATS", "CHAT", "QUERY", "REDUCE"});
      default:
        return pick<std::string>({"", "0", "-1", "1", "-0", "2147483648", "-2147483649", "4294967296",
                                  "9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e309", "nan",
                                  "inf", "-inf", "0x10", "1.5", " 1", "1 ", std::string(1, '\0'), "1e-320"});
    }
  }

  // A DUMP payload damaged in its body (flipped, inserted or deleted bytes, or cut short) and resealed
  // with a valid CRC, so that RESTORE hands it to the module's loader; sometimes left intact.
  std::string damage_payload(std::string p) {
    if (p.size() < 11 || chance(0.2)) return p;
    std::string body = p.substr(0, p.size() - 10);
    const std::string version = p.substr(p.size() - 10, 2);
    for (int k = between(1, 4); k > 0 && !body.empty(); --k) {
      const size_t at = 1 + below(body.size() - 1);  // never the type byte: Redis checks that itself
      switch (below(4)) {
        case 0: body[at] = static_cast<char>(body[at] ^ (1u << below(8))); break;
        case 1: body.insert(at, bytes(between(1, 8))); break;
        case 2: body.erase(at, between(1, 8)); break;
        default: body.resize(at);
      }
    }
    return seal_dump(body, version);
  }

  // Replaces, deletes, repeats, truncates or inserts arguments (never the command name).
  void mutate(Argv& a) {
    const bool is_load = a[0] == "INFER.LOAD";
    for (int k = between(1, 3); k > 0 && a.size() > 1; --k) {
      const size_t i = 1 + below(a.size() - 1);
      switch (below(6)) {
        case 0:
        case 1:
          // Numbers near LOAD's upper bounds would plan gigabytes (see load()).
          a[i] = is_load ? pick<std::string>({"", "0", "-1", "x", "99999999999"}) : weird();
          break;
        case 2: a.erase(a.begin() + static_cast<long>(i)); break;
        case 3: {  // repeat an option with its value
          const size_t n = std::min<size_t>(2, a.size() - i);
          Argv copy(a.begin() + static_cast<long>(i), a.begin() + static_cast<long>(i + n));
          a.insert(a.end(), copy.begin(), copy.end());
          break;
        }
        case 4: a.resize(i); break;
        default:
          if (!is_load) a.insert(a.begin() + static_cast<long>(i), weird());
      }
    }
  }

 private:
  std::mt19937_64 r_;
};

bool mentions_stream(const Argv& a) {
  return std::any_of(a.begin(), a.end(), [](const std::string& s) { return strcasecmp(s.c_str(), "STREAM") == 0; });
}

// Sends argv and closes the connection without reading the reply, at once or after a short delay.
void send_and_close(RedisConn& c, const Argv& argv, int delay_ms) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(c.get(), static_cast<int>(argv.size()), ptrs.data(), lens.data());
  int done = 0;
  while (!done && redisBufferWrite(c.get(), &done) == REDIS_OK) {
  }
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  c.reset();
}

void client_loop(int id, const Options& opt) {
  Gen g(opt.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(id) + 1);
  RedisConn c;
  uint64_t mine = 0;
  while (!g_stop) {
    if (!c) {
      try {
        c = g_server->connect(120000);
      } catch (const std::exception&) {
        check_alive("client reconnect failed");
        continue;
      }
    }
    Argv argv = g.command();
    const bool mutated = g.chance(opt.mutate_p);
    if (mutated) g.mutate(argv);
    const bool may_close = opt.stream_disconnects || !mentions_stream(argv);
    if (g.chance(opt.restore_p)) {
      // Vector sets come back through their type's loader: a damaged value must be an error reply.
      const std::string from = g.vkey();
      Reply dump = command(c.get(), {"DUMP", from});
      if (dump && dump->type == REDIS_REPLY_STRING) {
        argv = {"RESTORE", g.vkey(), "0", g.damage_payload(std::string(dump->str, dump->len)), "REPLACE"};
        remember(id, argv, "");
        ++g_restores;
        Reply r = command(c.get(), argv);
        if (r && r->type == REDIS_REPLY_STATUS) ++g_restored;
        if (!r) {
          ++g_io_errors;
          c.reset();
          check_alive("RESTORE got no reply");
        }
      } else if (!dump) {
        c.reset();
        check_alive("DUMP got no reply");
      }
    } else if (may_close && g.chance(opt.disconnect_p)) {
      remember(id, argv, ", closed after sending");
      send_and_close(c, argv, g.chance(0.5) ? 0 : g.between(1, 50));
      ++g_disconnects;
    } else {
      // Inside MULTI or a script nothing may block: the inline forms and their limits.
      const int wrap = g.chance(opt.wrap_p) ? g.between(1, 2) : 0;
      remember(id, argv, wrap == 1 ? " in MULTI" : wrap == 2 ? " in EVAL" : "");
      Reply r;
      if (wrap == 1) {
        Reply m = command(c.get(), {"MULTI"});
        Reply q = m ? command(c.get(), argv) : nullptr;
        r = q ? command(c.get(), {"EXEC"}) : nullptr;
      } else if (wrap == 2) {
        Argv eval = {"EVAL", "return redis.pcall(unpack(ARGV))", "0"};
        eval.insert(eval.end(), argv.begin(), argv.end());
        r = command(c.get(), eval);
      } else {
        r = command(c.get(), argv);
      }
      if (!r) {
        ++g_io_errors;
        c.reset();
        check_alive("a command got no reply");
      } else if (r->type == REDIS_REPLY_ERROR) {
        ++g_errors;
        if (opt.show_errors && !mutated)
          std::printf("error reply: %s -> %s\n", describe(argv).substr(0, 160).c_str(), std::string(r->str, std::min<size_t>(r->len, 160)).c_str());
      }
    }
    const uint64_t n = ++g_sent;
    if (opt.commands && n >= opt.commands) g_stop = true;
    if (++mine % static_cast<uint64_t>(opt.batch) == 0) check_alive("batch end");
  }
}

// INFO infer / INFO clients field, or -1.
long long info_field(redisContext* c, const char* section, const std::string& field) {
  Reply r = command(c, {"INFO", section});
  if (!r || r->type != REDIS_REPLY_STRING) return -1;
  const std::string s(r->str, r->len);
  const size_t p = s.find("\n" + field + ":");
  if (p == std::string::npos) return -1;
  return std::atoll(s.c_str() + p + field.size() + 2);
}

// After the clients stop: every job finishes or is cancelled within the quiet period, and the KV pages
// still in use are only those the prefix cache keeps.
void check_quiet(int quiet_s) {
  RedisConn c = g_server->connect(30000);
  long long queued = -1, running = -1, blocked = -1, held = -1;
  for (auto deadline = Clock::now() + std::chrono::seconds(quiet_s); Clock::now() < deadline;) {
    queued = info_field(c.get(), "infer", "infer_queued");
    running = info_field(c.get(), "infer", "infer_running");
    blocked = info_field(c.get(), "clients", "blocked_clients");
    held = info_field(c.get(), "infer", "infer_kv_pages_used") - info_field(c.get(), "infer", "infer_kv_pages_cached");
    if (queued == 0 && running == 0 && blocked == 0 && held == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  report_failure("after " + std::to_string(quiet_s) + " s without commands: infer_queued=" + std::to_string(queued) +
                 " infer_running=" + std::to_string(running) + " blocked_clients=" + std::to_string(blocked) +
                 " kv pages held by requests (used - cached)=" + std::to_string(held));
}

void prepare_model_dir(const std::string& dir) {
  fs::create_directories(dir);
  const std::string model = stories_model_path();
  fs::copy_file(model, dir + "/stories260K.gguf", fs::copy_options::overwrite_existing);
  fs::copy_file(model, dir + "/copy.gguf", fs::copy_options::overwrite_existing);
  std::ifstream in(model, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::ofstream(dir + "/truncated.gguf", std::ios::binary).write(head.data(), in.gcount());
  std::ofstream(dir + "/empty.gguf");
}

int usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--seed N] [--minutes M] [--commands N] [--clients C] [--no-stream-disconnects] [--show-errors]\n"
               "  default: a random seed, 1 minute, 4 clients\n",
               prog);
  return 2;
}

int run(int argc, char** argv) {
  Options opt;
  opt.seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--seed" && has_value) {
      opt.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--minutes" && has_value) {
      opt.minutes = std::atof(argv[++i]);
    } else if (a == "--commands" && has_value) {
      opt.commands = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--clients" && has_value) {
      opt.clients = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--show-errors") {
      opt.show_errors = true;
    } else if (a == "--no-stream-disconnects") {
      opt.stream_disconnects = false;
    } else {
      return usage(argv[0]);
    }
  }
  if (opt.minutes <= 0 && opt.commands == 0) opt.minutes = 1;
  g_seed = opt.seed;
  signal(SIGPIPE, SIG_IGN);
  if (!fs::exists(stories_model_path())) {
    std::fprintf(stderr, "command fuzzer: %s not found (set INFER_MODELS_DIR)\n", stories_model_path().c_str());
    return 2;
  }

  char tmpl[] = "/tmp/infer-command-fuzzer-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  g_work_dir = tmpl;
  prepare_model_dir(g_work_dir + "/models");
  // A sanitizer-built module reports into files here, which the crash report prints. The damaged
  // RESTOREs make Redis size a string by the length a payload declares and expect NULL from malloc
  // when it cannot (ztrymalloc), which ASan, preloaded into the server, must be told to allow.
  for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS"}) {
    const char* old = std::getenv(var);
    std::string v = std::string(old ? old : "") + (old && *old ? ":" : "") + "log_path=" + g_work_dir + "/sanitizer";
    if (std::string(var) == "ASAN_OPTIONS") v += ":allocator_may_return_null=1";
    setenv(var, v.c_str(), 1);
  }
  g_server = std::make_unique<RedisServer>(RedisServerOptions{
      .module_args = {"MODEL", "stories", stories_model_path(), "MODEL-DIR", g_work_dir + "/models", "THREADS", "1"},
      .start_timeout_ms = 30000});

  std::printf("command fuzzer: seed %llu, %d clients, %s, stream disconnects %s, server port %d\n",
              static_cast<unsigned long long>(opt.seed), opt.clients,
              opt.commands ? (std::to_string(opt.commands) + " commands").c_str()
                           : (std::to_string(opt.minutes) + " minutes").c_str(),
              opt.stream_disconnects ? "on" : "off", g_server->port());
  std::fflush(stdout);

  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) clients.emplace_back(client_loop, i, std::cref(opt));
  auto last_report = start;
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (opt.minutes > 0 && elapsed >= opt.minutes * 60) g_stop = true;
    if (Clock::now() - last_report >= std::chrono::seconds(5) || g_stop) {
      last_report = Clock::now();
      std::printf("  %6.0f s: %llu commands (%.0f/s), %llu closed after sending, %llu error replies\n", elapsed,
                  static_cast<unsigned long long>(g_sent.load()), static_cast<double>(g_sent.load()) / elapsed,
                  static_cast<unsigned long long>(g_disconnects.load()),
                  static_cast<unsigned long long>(g_errors.load()));
      std::fflush(stdout);
      check_alive("progress report");
    }
  }
  for (auto& t : clients) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  check_alive("end of run");
  check_quiet(60);
  {
    RedisConn c = g_server->connect(30000);
    std::printf("command fuzzer: %llu RESTOREs of vector-set DUMPs (%llu accepted); longest main-thread stall of "
                "any INFER command: %lld us\n",
                static_cast<unsigned long long>(g_restores.load()), static_cast<unsigned long long>(g_restored.load()),
                info_field(c.get(), "infer", "infer_max_main_thread_stall_us"));
  }
  std::printf("command fuzzer: seed %llu: %llu commands in %.0f s (%.0f/s), server alive, no jobs left\n",
              static_cast<unsigned long long>(opt.seed), static_cast<unsigned long long>(g_sent.load()), elapsed,
              static_cast<double>(g_sent.load()) / elapsed);
  g_server.reset();
  std::error_code ec;
  fs::remove_all(g_work_dir, ec);
  return 0;
}

}  // namespace
}  // namespace infer::test

int main(int argc, char** argv) {
  try {
    return infer::test::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "command fuzzer: %s\n", e.what());
    return 2;
  }
}
