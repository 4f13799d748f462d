// RESTORE fuzzer: DUMP payloads of vector sets of every encoding (NOQUANT, Q8, BIN, REDUCE, with and
// without attributes) and size class (one element, one left after a removal, tens, hundreds, with
// removals so that ids were renumbered), mutated and truncated, their CRC recomputed so that Redis hands
// them to the module, are sent to RESTORE on a real redis-server. Mutations: byte flips, inserted and
// deleted bytes, truncation, and edits that follow the module value's structure (the record count, the
// RDB string lengths, fields of the wrong kind, the encoding version, records dropped, repeated, swapped
// or taken from another set, and the set header's and element records' fields: dimension, counts, entry
// point, norms, quantisation scale, vector bytes, level, link counts and targets, name and attribute
// lengths). Each accepted payload is searched, changed (VREM, VADD), saved and loaded back (DEBUG
// RELOAD), and the server must answer PING after every payload. On a crash or hang it prints the seed,
// the payload number and the payload (also written to a file), and exits 1.
//
// Usage: infer_restore_fuzzer [--seed N] [--payloads N] [--minutes M]
//   (with both limits the first one reached ends the run; default: a random seed, 1 minute)
// The payload sequence follows from the seed alone: `--seed N --payloads K` replays the first K.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "redis/dump_payload.h"
#include "redis/redis_server.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Argv = std::vector<std::string>;

std::unique_ptr<RedisServer> g_server;
std::string g_work_dir;
uint64_t g_seed = 0, g_index = 0;
std::string g_payload, g_mutation;

std::string tail_lines(const std::string& text, size_t n) {
  size_t pos = text.size();
  for (size_t k = 0; k < n && pos > 0; ++k) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos);
}

[[noreturn]] void report_failure(const std::string& what) {
  std::fprintf(stderr, "\nrestore fuzzer: FAILURE: %s\n", what.c_str());
  std::fprintf(stderr, "restore fuzzer: seed %llu, payload %llu (replay: --seed %llu --payloads %llu), mutation: %s\n",
               static_cast<unsigned long long>(g_seed), static_cast<unsigned long long>(g_index),
               static_cast<unsigned long long>(g_seed), static_cast<unsigned long long>(g_index + 1), g_mutation.c_str());
  const std::string path = g_work_dir + "/failing-payload.bin";
  std::ofstream(path, std::ios::binary).write(g_payload.data(), static_cast<std::streamsize>(g_payload.size()));
  std::fprintf(stderr, "restore fuzzer: payload (%zu bytes) written to %s; first bytes:", g_payload.size(), path.c_str());
  for (size_t i = 0; i < std::min<size_t>(g_payload.size(), 96); ++i)
    std::fprintf(stderr, "%s%02x", i % 32 ? "" : "\n  ", static_cast<uint8_t>(g_payload[i]));
  std::fprintf(stderr, "\n");
  if (g_server && g_server->alive()) {
    kill(g_server->pid(), SIGSEGV);  // a hang: Redis logs the stuck thread's stack
    sleep(3);
  }
  if (g_server) std::fprintf(stderr, "restore fuzzer: server log tail:\n%s\n", tail_lines(g_server->log(), 60).c_str());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(g_work_dir, ec)) {
    if (e.path().filename().string().starts_with("sanitizer")) {
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      std::fprintf(stderr, "restore fuzzer: %s:\n%s\n", e.path().c_str(), tail_lines(ss.str(), 120).c_str());
    }
  }
  if (g_server && g_server->alive()) kill(g_server->pid(), SIGKILL);
  std::fflush(stderr);
  std::_Exit(1);
}

// A command whose reply must come back (any reply, errors included); no reply is a failure.
Reply must_reply(redisContext* c, const Argv& argv, const char* what) {
  Reply r = command(c, argv);
  if (!r) {
    for (int i = 0; i < 30 && g_server->alive(); ++i) usleep(100000);  // a crash report being written
    report_failure(std::string(g_server->alive() ? "no reply to " : "redis-server died during ") + what);
  }
  return r;
}

// ---- the base sets ----

class Rng {
 public:
  explicit Rng(uint64_t seed) : r_(seed) {}
  uint64_t below(uint64_t n) { return n ? r_() % n : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(r_) < p; }
  uint64_t next() { return r_(); }
  float normal() { return std::normal_distribution<float>()(r_); }
  std::string bytes(size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(below(256));
    return s;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

 private:
  std::mt19937_64 r_;
};

struct Base {
  std::string name;     // for the failure report
  std::string payload;  // DUMP as taken
  ModuleDump parsed;
};

void values_arg(Rng& rng, size_t dim, Argv& a) {
  a.push_back("VALUES");
  a.push_back(std::to_string(dim));
  for (size_t i = 0; i < dim; ++i) a.push_back(std::to_string(rng.normal()));
}

// Builds one set with INFER.VADD (and VREM) and returns its DUMP.
Base make_base(redisContext* c, Rng& rng, const std::string& quant, int elements, int removed, uint32_t dim,
               uint32_t reduce, int m, bool attrs) {
  const std::string key = "base";
  command(c, {"DEL", key});
  for (int i = 0; i < elements; ++i) {
    Argv a = {"INFER.VADD", key};
    if (reduce) a.insert(a.end(), {"REDUCE", std::to_string(reduce)});
    values_arg(rng, dim, a);
    a.insert(a.end(), {"e" + std::to_string(i), quant, "M", std::to_string(m)});
    if (attrs && i % 2 == 0) a.insert(a.end(), {"SETATTR", "{\"i\": " + std::to_string(i) + ", \"s\": \"x\"}"});
    Reply r = command(c, a);
    if (!r || r->type == REDIS_REPLY_ERROR) throw std::runtime_error("cannot build a base set: " + show(r.get()));
  }
  for (int i = 0; i < removed; ++i) command(c, {"INFER.VREM", key, "e" + std::to_string(i * 2)});
  Reply r = command(c, {"DUMP", key});
  if (!r || r->type != REDIS_REPLY_STRING) throw std::runtime_error("DUMP failed: " + show(r.get()));
  Base b;
  b.name = quant + " " + std::to_string(elements) + "-" + std::to_string(removed) + " dim " + std::to_string(dim) +
           (reduce ? " REDUCE " + std::to_string(reduce) : "") + (attrs ? " attrs" : "");
  b.payload.assign(r->str, r->len);
  auto parsed = parse_module_dump(b.payload);
  if (!parsed) throw std::runtime_error("cannot parse the DUMP of " + b.name);
  b.parsed = std::move(*parsed);
  command(c, {"DEL", key});
  return b;
}

std::vector<Base> make_bases(redisContext* c, uint64_t seed) {
  Rng rng(seed ^ 0x5eedba5e);
  std::vector<Base> bases;
  for (const std::string quant : {"NOQUANT", "Q8", "BIN"}) {
    bases.push_back(make_base(c, rng, quant, 1, 0, 3, 0, 16, false));
    bases.push_back(make_base(c, rng, quant, 1, 0, 5, 0, 16, true));
    bases.push_back(make_base(c, rng, quant, 2, 1, 4, 0, 4, true));    // one left after a removal
    bases.push_back(make_base(c, rng, quant, 30, 0, 8, 0, 4, false));  // tens, several levels with M 4
    bases.push_back(make_base(c, rng, quant, 40, 10, 8, 0, 6, true));  // tens, renumbered ids
    bases.push_back(make_base(c, rng, quant, 300, 60, 16, 0, 8, true));  // hundreds
    bases.push_back(make_base(c, rng, quant, 20, 4, 12, 4, 4, true));  // REDUCE 12 → 4
  }
  return bases;
}

// ---- mutations ----

uint64_t interesting_uint(Rng& rng, uint64_t near) {
  switch (rng.below(8)) {
    case 0: return 0;
    case 1: return near + 1;
    case 2: return near ? near - 1 : 0;
    case 3: return near * 2 + 1;
    case 4: return rng.pick<uint64_t>({0x7f, 0xff, 0x100, 0xffff, 0x10000, 0x10001, 0x7fffffff, 0x80000000,
                                       0xffffffff, 0x100000000ull, ~0ull});
    case 5: return rng.below(64);
    case 6: return rng.next();
    default: return near + rng.below(16);
  }
}

float interesting_float(Rng& rng) {
  return rng.pick<float>({std::nanf(""), -std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 1e-45f,
                          1e-38f, 1e38f, 3.4e38f, 1e30f, 0.5f, 2.0f, 127.0f, 1.0f / 127, 0.0078125f});
}

// Sets a little-endian field of `size` bytes at `at` to a value near its current one or a boundary.
void edit_int_field(Rng& rng, std::string& rec, size_t at, size_t size) {
  if (at + size > rec.size()) return;
  uint64_t cur = 0;
  std::memcpy(&cur, rec.data() + at, size);
  uint64_t v = interesting_uint(rng, cur);
  std::memcpy(rec.data() + at, &v, size);
}

void edit_float_field(Rng& rng, std::string& rec, size_t at) {
  if (at + 4 > rec.size()) return;
  const float f = rng.chance(0.8) ? interesting_float(rng) : vset::get<float>(rec, at) * (rng.normal() + 1);
  vset::set<float>(rec, at, f);
}

std::string edit_header(Rng& rng, std::string& h) {
  struct F {
    size_t at, size;
    const char* name;
  };
  static const std::vector<F> fields = {{vset::kMagic, 4, "magic"},  {vset::kDim, 4, "dim"},
                                        {vset::kQuant, 1, "quant"},  {vset::kM, 4, "M"},
                                        {vset::kEf, 4, "EF"},        {vset::kCounter, 8, "insert counter"},
                                        {vset::kCount, 8, "count"},  {vset::kEntry, 8, "entry point"},
                                        {vset::kProjectionDim, 4, "REDUCE input dim"}};
  const F& f = rng.pick(fields);
  edit_int_field(rng, h, f.at, f.size);
  return std::string("header ") + f.name;
}

std::string edit_element(Rng& rng, std::string& rec, const std::string& header) {
  const auto quant = static_cast<uint8_t>(header.size() > vset::kQuant ? header[vset::kQuant] : 0);
  const auto dim = vset::get<uint32_t>(header, vset::kDim);
  const auto l = vset::parse_element(rec, quant, dim);
  if (!l) {
    rec[rng.below(rec.size())] ^= static_cast<char>(1 + rng.below(255));
    return "element (unparsed) byte";
  }
  switch (rng.below(12)) {
    case 0: edit_int_field(rng, rec, l->name_len, 4); return "element name length";
    case 1: edit_int_field(rng, rec, l->attrs_len, 4); return "element attribute length";
    case 2:
      if (l->attrs_len + 4 <= rec.size() && vset::get<uint32_t>(rec, l->attrs_len) > 0) {
        rec[l->attrs + rng.below(vset::get<uint32_t>(rec, l->attrs_len))] =
            rng.pick<char>({'{', '}', '"', '[', ']', ':', ',', '\\', '\0', static_cast<char>(0xff)});
        return "element attribute byte";
      }
      rec.insert(l->attrs, "{\"a\":1}");
      vset::set<uint32_t>(rec, l->attrs_len, 7);
      return "element attributes added";
    case 3: edit_float_field(rng, rec, l->norm); return "element norm";
    case 4:
      if (quant == 1) {
        edit_float_field(rng, rec, l->vector);
        return "element Q8 scale";
      }
      if (quant == 0) {
        edit_float_field(rng, rec, l->vector + 4 * rng.below(dim));
        return "element F32 component";
      }
      [[fallthrough]];
    case 5:
      if (l->vector_bytes) rec[l->vector + rng.below(l->vector_bytes)] = static_cast<char>(rng.below(256));
      return "element vector byte";
    case 6: rec[l->level] = static_cast<char>(rng.chance(0.5) ? rng.below(20) : rng.below(256)); return "element level";
    case 7:
    case 8: {
      const size_t lv = rng.below(l->link_count.size());
      edit_int_field(rng, rec, l->link_count[lv], 4);
      return "element link count";
    }
    default: {
      const size_t lv = rng.below(l->links.size());
      if (l->links[lv].empty()) return "element (no link to edit)";
      const size_t at = l->links[lv][rng.below(l->links[lv].size())];
      if (rng.chance(0.3) && l->links[lv].size() > 1) {  // repeat another link
        std::memcpy(rec.data() + at, rec.data() + l->links[lv][0] + (at == l->links[lv][0] ? 4 : 0), 4);
        return "element repeated link";
      }
      edit_int_field(rng, rec, at, 4);
      return "element link target";
    }
  }
}

// A structural edit of the module value; returns what it did.
std::string mutate_structure(Rng& rng, ModuleDump& d, const std::vector<Base>& bases) {
  auto& f = d.value.fields;
  if (f.size() < 2) return "none";
  const size_t first_elem = (f[1].kind == ModuleField::kString && vset::get<uint32_t>(f[1].bytes, vset::kProjectionDim)) ? 3 : 2;
  auto random_record = [&]() { return 1 + rng.below(f.size() - 1); };
  switch (rng.below(16)) {
    case 0: f[0].uint = interesting_uint(rng, f[0].uint); return "record count";
    case 1:
    case 2:
      if (f[1].kind == ModuleField::kString) return edit_header(rng, f[1].bytes);
      return "none";
    case 3:
    case 4:
    case 5:
    case 6:
      if (f.size() > first_elem && f[1].kind == ModuleField::kString) {
        auto& rec = f[first_elem + rng.below(f.size() - first_elem)];
        if (rec.kind == ModuleField::kString && !rec.bytes.empty()) return edit_element(rng, rec.bytes, f[1].bytes);
      }
      return "none";
    case 7: {  // a record cut or grown
      auto& rec = f[random_record()];
      if (rec.kind != ModuleField::kString) return "none";
      if (rng.chance(0.5) && !rec.bytes.empty())
        rec.bytes.resize(rng.below(rec.bytes.size()));
      else
        rec.bytes += rng.bytes(1 + rng.below(8));
      return "record length";
    }
    case 8: {  // a record dropped, the count adjusted or not
      f.erase(f.begin() + static_cast<long>(random_record()));
      if (rng.chance(0.5) && f[0].uint) --f[0].uint;
      return "record dropped";
    }
    case 9: {  // a record repeated
      const size_t i = random_record();
      f.insert(f.begin() + static_cast<long>(i), f[i]);
      if (rng.chance(0.5)) ++f[0].uint;
      return "record repeated";
    }
    case 10: {
      const size_t i = random_record(), j = random_record();
      std::swap(f[i], f[j]);
      return "records swapped";
    }
    case 11: {  // a record from another set
      const auto& other = rng.pick(bases).parsed.value.fields;
      if (other.size() < 2) return "none";
      f[random_record()] = other[1 + rng.below(other.size() - 1)];
      return "record from another set";
    }
    case 12: {  // a field of the other kind
      auto& x = f[rng.below(f.size())];
      if (x.kind == ModuleField::kString)
        x = ModuleField{ModuleField::kUint, rng.below(100), ""};
      else
        x = ModuleField{ModuleField::kString, 0, std::to_string(x.uint)};
      return "field kind";
    }
    case 13: d.value.module_id ^= 1 + rng.below(1023); return "encoding version";
    case 14: {  // an extra field at the end
      if (rng.chance(0.5))
        f.push_back(ModuleField{ModuleField::kUint, rng.below(10), ""});
      else
        f.push_back(ModuleField{ModuleField::kString, 0, rng.bytes(rng.below(64))});
      return "field appended";
    }
    default: {  // several element edits
      std::string what = "element edits:";
      for (int k = 1 + static_cast<int>(rng.below(4)); k > 0 && f.size() > first_elem; --k) {
        auto& rec = f[first_elem + rng.below(f.size() - first_elem)];
        if (rec.kind == ModuleField::kString && !rec.bytes.empty() && f[1].kind == ModuleField::kString)
          what += " " + edit_element(rng, rec.bytes, f[1].bytes);
      }
      return what;
    }
  }
}

// An edit of the encoded value's bytes (RDB lengths included), before sealing.
std::string mutate_bytes(Rng& rng, std::string& body) {
  if (body.size() < 2) return "none";
  switch (rng.below(6)) {
    case 0:
    case 1: {
      const int n = 1 + static_cast<int>(rng.below(rng.chance(0.7) ? 2 : 16));
      for (int i = 0; i < n; ++i) body[1 + rng.below(body.size() - 1)] ^= static_cast<char>(1u << rng.below(8));
      return "bit flips";
    }
    case 2: body[1 + rng.below(body.size() - 1)] = static_cast<char>(rng.below(256)); return "byte set";
    case 3: body.insert(1 + rng.below(body.size()), rng.bytes(1 + rng.below(rng.chance(0.8) ? 4 : 200))); return "bytes inserted";
    case 4: {
      const size_t at = 1 + rng.below(body.size() - 1);
      body.erase(at, 1 + rng.below(std::min<size_t>(body.size() - at, rng.chance(0.8) ? 4 : 200)));
      return "bytes deleted";
    }
    default: body.resize(1 + rng.below(body.size() - 1)); return "truncated";
  }
}

// One payload derived from a base: structural edits, byte edits, or both; sometimes none.
std::string make_payload(Rng& rng, const std::vector<Base>& bases, std::string* what) {
  const Base& b = bases[rng.below(bases.size())];
  *what = b.name + ":";
  ModuleDump d = b.parsed;
  if (rng.chance(0.04)) {
    *what += " none";
    return b.payload;
  }
  const bool structural = rng.chance(0.7);
  if (structural)
    for (int k = rng.chance(0.8) ? 1 : 2; k > 0; --k) *what += " " + mutate_structure(rng, d, bases);
  std::string body = std::string(1, '\x07') + encode_module_value(d.value);
  if (!structural || rng.chance(0.15)) *what += " " + mutate_bytes(rng, body);
  return seal_dump(body, d.rdb_version);
}

// ---- using an accepted set ----

long long integer(const Reply& r) { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1; }

void exercise(redisContext* c, Rng& rng) {
  const long long dim = integer(must_reply(c, {"INFER.VDIM", "fz"}, "VDIM"));
  must_reply(c, {"INFER.VCARD", "fz"}, "VCARD");
  Reply info = must_reply(c, {"INFER.VINFO", "fz"}, "VINFO");
  long long input_dim = dim;
  if (info->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i + 1 < info->elements; i += 2)
      if (info->element[i]->type == REDIS_REPLY_STRING && std::string(info->element[i]->str) == "projection-input-dim" &&
          info->element[i + 1]->type == REDIS_REPLY_INTEGER && info->element[i + 1]->integer > 0)
        input_dim = info->element[i + 1]->integer;
  if (dim <= 0 || input_dim > 4096) return;
  Argv q = {"INFER.VSIM", "fz"};
  values_arg(rng, static_cast<size_t>(input_dim), q);
  q.insert(q.end(), {"COUNT", "5", "WITHSCORES", "WITHATTRIBS"});
  Reply hits = must_reply(c, q, "VSIM");
  q.push_back("TRUTH");
  must_reply(c, q, "VSIM TRUTH");
  Argv f = {"INFER.VSIM", "fz"};
  values_arg(rng, static_cast<size_t>(input_dim), f);
  f.insert(f.end(), {"FILTER", ".i > 3", "COUNT", "3"});
  must_reply(c, f, "VSIM FILTER");
  if (hits->type == REDIS_REPLY_ARRAY && hits->elements > 0 && hits->element[0]->type == REDIS_REPLY_STRING) {
    const std::string name(hits->element[0]->str, hits->element[0]->len);
    must_reply(c, {"INFER.VSIM", "fz", "ELE", name, "COUNT", "3"}, "VSIM ELE");
    Reply emb = must_reply(c, {"INFER.VEMB", "fz", name}, "VEMB");
    if (emb->type == REDIS_REPLY_ARRAY)
      for (size_t i = 0; i < emb->elements; ++i)
        if (emb->element[i]->type == REDIS_REPLY_STRING && !std::isfinite(std::strtod(emb->element[i]->str, nullptr)))
          report_failure("VEMB of an accepted set is not finite: " + show(emb.get()));
    must_reply(c, {"INFER.VGETATTR", "fz", name}, "VGETATTR");
    if (rng.chance(0.5)) must_reply(c, {"INFER.VREM", "fz", name}, "VREM");
  }
  Argv add = {"INFER.VADD", "fz"};
  values_arg(rng, static_cast<size_t>(input_dim), add);
  add.push_back("added" + std::to_string(rng.below(3)));
  must_reply(c, add, "VADD");
}

int usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [--seed N] [--payloads N] [--minutes M]\n  default: a random seed, 1 minute\n", prog);
  return 2;
}

int run(int argc, char** argv) {
  uint64_t seed = std::random_device{}(), payloads = 0;
  double minutes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--seed" && has_value)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--payloads" && has_value)
      payloads = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--minutes" && has_value)
      minutes = std::atof(argv[++i]);
    else
      return usage(argv[0]);
  }
  if (minutes <= 0 && payloads == 0) minutes = 1;
  g_seed = seed;
  signal(SIGPIPE, SIG_IGN);

  char tmpl[] = "/tmp/infer-restore-fuzzer-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  g_work_dir = tmpl;
  // A sanitizer-built module reports into files here. Redis sizes a string by the length a payload
  // declares and expects malloc to return NULL when it cannot (ztrymalloc), which ASan, preloaded into
  // the server, must be told to do.
  for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS"}) {
    const char* old = std::getenv(var);
    std::string v = std::string(old ? old : "") + (old && *old ? ":" : "") + "log_path=" + g_work_dir + "/sanitizer";
    if (std::string(var) == "ASAN_OPTIONS") v += ":allocator_may_return_null=1";
    setenv(var, v.c_str(), 1);
  }
  g_server = std::make_unique<RedisServer>(RedisServerOptions{
      .server_args = {"--enable-debug-command", "yes", "--rdbcompression", "no"}, .start_timeout_ms = 30000});
  RedisConn c = g_server->connect(60000);
  const std::vector<Base> bases = make_bases(c.get(), seed);
  std::printf("restore fuzzer: seed %llu, %zu base sets, %s, server port %d\n", static_cast<unsigned long long>(seed),
              bases.size(),
              payloads ? (std::to_string(payloads) + " payloads").c_str() : (std::to_string(minutes) + " minutes").c_str(),
              g_server->port());
  std::fflush(stdout);

  Rng rng(seed);
  uint64_t accepted = 0;
  const auto start = Clock::now();
  auto last_report = start;
  for (g_index = 0; !payloads || g_index < payloads; ++g_index) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (minutes > 0 && elapsed >= minutes * 60) break;
    if (Clock::now() - last_report >= std::chrono::seconds(10)) {
      last_report = Clock::now();
      std::printf("  %6.0f s: %llu payloads (%.0f/s), %llu accepted\n", elapsed, static_cast<unsigned long long>(g_index),
                  static_cast<double>(g_index) / elapsed, static_cast<unsigned long long>(accepted));
      std::fflush(stdout);
    }
    g_payload = make_payload(rng, bases, &g_mutation);
    Reply r = must_reply(c.get(), {"RESTORE", "fz", "0", g_payload, "REPLACE"}, "RESTORE");
    if (r->type == REDIS_REPLY_STATUS) {
      ++accepted;
      exercise(c.get(), rng);
      Reply reload = must_reply(c.get(), {"DEBUG", "RELOAD"}, "DEBUG RELOAD");
      if (reload->type != REDIS_REPLY_STATUS) report_failure("DEBUG RELOAD of an accepted set: " + show(reload.get()));
      must_reply(c.get(), {"DEL", "fz"}, "DEL");
    } else if (r->type != REDIS_REPLY_ERROR) {
      report_failure("RESTORE replied " + show(r.get()));
    }
    if (r->type == REDIS_REPLY_STATUS || g_index % 64 == 0) {
      Reply pong = must_reply(c.get(), {"PING"}, "PING");
      if (pong->type != REDIS_REPLY_STATUS) report_failure("PING got " + show(pong.get()));
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (!g_server->alive()) report_failure("redis-server exited");
  std::printf("restore fuzzer: seed %llu: %llu payloads in %.0f s (%.0f/s), %llu accepted and reloaded, server alive\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(g_index), elapsed,
              static_cast<double>(g_index) / std::max(elapsed, 1e-9), static_cast<unsigned long long>(accepted));
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
    std::fprintf(stderr, "restore fuzzer: %s\n", e.what());
    return 2;
  }
}
