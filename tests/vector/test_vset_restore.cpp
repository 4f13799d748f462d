// Damaged vector-set data never stops Redis: RESTORE of forged or truncated DUMP payloads (CRC
// recomputed, so Redis hands them to the module) is refused with an error and the server stays up; a
// damaged RDB file or AOF base file makes redis-server exit cleanly (an exit status, not a signal) with
// the key named in its log. Also: a vector whose L2 norm overflows float is refused, not stored as NaN.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "redis/dump_payload.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

std::string dump(redisContext* c, const std::string& key) {
  Reply r = command(c, {"DUMP", key});
  EXPECT_TRUE(r && r->type == REDIS_REPLY_STRING) << show(r.get());
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/infer-vset-restore-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

class VsetRestoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer({.server_args = {"--loglevel", "verbose"}}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    c_ = server_->connect();
    run(c_.get(), {"FLUSHALL"});
  }

  // RESTORE of `payload` into a fresh key must be refused and the server must still answer.
  void expect_refused(const std::string& payload, const std::string& what) {
    run(c_.get(), {"DEL", "w"});
    const std::string reply = run(c_.get(), {"RESTORE", "w", "0", payload});
    EXPECT_EQ(reply.rfind("(error)", 0), 0u) << what << ": " << reply;
    ASSERT_TRUE(server_->alive()) << what << "\n" << server_->log().substr(server_->log().size() > 4000 ? server_->log().size() - 4000 : 0);
    EXPECT_EQ(run(c_.get(), {"PING"}), "PONG") << what;
    EXPECT_EQ(run(c_.get(), {"EXISTS", "w"}), "0") << what;
  }
  void expect_accepted(const std::string& payload) {
    run(c_.get(), {"DEL", "w"});
    EXPECT_EQ(run(c_.get(), {"RESTORE", "w", "0", payload}), "OK");
  }

  // DUMP of `key` taken apart, with at least `fields` fields; the test fails otherwise.
  void parsed_dump(const std::string& key, ModuleDump* out, size_t fields = 3) {
    auto d = parse_module_dump(dump(c_.get(), key));
    ASSERT_TRUE(d.has_value()) << key;
    ASSERT_GE(d->value.fields.size(), fields) << key;
    *out = std::move(*d);
  }

  static inline RedisServer* server_ = nullptr;
  RedisConn c_;
};

TEST(RedisCrc64, MatchesTheCheckValue) {
  EXPECT_EQ(redis_crc64(0, "123456789", 9), 0xe9c6d914c4b8d9caULL);
}

// The reproduction: the RDB record count 2 → 3 (CRC recomputed) was a panic (signal 6).
TEST_F(VsetRestoreTest, ForgedRecordCountIsRefused) {
  ASSERT_EQ(run(c_.get(), {"INFER.VADD", "v", "VALUES", "2", "1", "0", "a"}), "1");
  ModuleDump d;
  ASSERT_NO_FATAL_FAILURE(parsed_dump("v", &d));
  ASSERT_EQ(d.value.fields.size(), 3u);
  ASSERT_EQ(d.value.fields[0].kind, ModuleField::kUint);
  ASSERT_EQ(d.value.fields[0].uint, 2u);
  expect_accepted(encode_module_dump(d));  // the rebuilt payload is the original
  for (uint64_t records : {0ull, 1ull, 3ull, 1000ull, ~0ull}) {
    ModuleDump forged = d;
    forged.value.fields[0].uint = records;
    expect_refused(encode_module_dump(forged), "record count " + std::to_string(records));
  }
  EXPECT_NE(server_->log().find("infer: cannot load the vector set in key 'w'"), std::string::npos);
}

// Every prefix of the value (type byte kept), sealed with a correct CRC, for sets of each kind.
TEST_F(VsetRestoreTest, EveryTruncationIsRefused) {
  run(c_.get(), {"INFER.VADD", "q8", "VALUES", "3", "1", "2", "3", "a", "SETATTR", "{\"n\": 1}"});
  run(c_.get(), {"INFER.VADD", "q8", "VALUES", "3", "-1", "2", "0.5", "b"});
  run(c_.get(), {"INFER.VADD", "f32", "VALUES", "3", "1", "2", "3", "a", "NOQUANT"});
  run(c_.get(), {"INFER.VADD", "bin", "VALUES", "3", "1", "2", "3", "a", "BIN"});
  run(c_.get(), {"INFER.VADD", "red", "REDUCE", "2", "VALUES", "4", "1", "2", "3", "4", "a"});
  for (const char* key : {"q8", "f32", "bin", "red"}) {
    const std::string full = dump(c_.get(), key);
    ASSERT_GT(full.size(), 10u) << key;
    const std::string body = full.substr(0, full.size() - 10), version = full.substr(full.size() - 10, 2);
    for (size_t cut = 1; cut < body.size(); ++cut)
      expect_refused(seal_dump(body.substr(0, cut), version), std::string(key) + " cut at " + std::to_string(cut));
    expect_accepted(seal_dump(body, version));
  }
}

// A field of the wrong kind where a record is expected (the loader's read fails half-way).
TEST_F(VsetRestoreTest, FieldOfTheWrongKindIsRefused) {
  run(c_.get(), {"INFER.VADD", "v", "VALUES", "2", "1", "0", "a"});
  ModuleDump d;
  ASSERT_NO_FATAL_FAILURE(parsed_dump("v", &d));
  ModuleDump forged = d;
  forged.value.fields[2] = ModuleField{ModuleField::kUint, 7, ""};
  expect_refused(encode_module_dump(forged), "element record as an unsigned");
  forged = d;
  forged.value.fields[0] = ModuleField{ModuleField::kString, 0, "2"};
  expect_refused(encode_module_dump(forged), "record count as a string");
  forged = d;
  forged.value.module_id = (d.value.module_id & ~uint64_t{1023}) | 3;  // encoding version 3
  expect_refused(encode_module_dump(forged), "unknown encoding version");
}

// One forged field at a time in the header or an element record, each refused.
TEST_F(VsetRestoreTest, ForgedFieldsAreRefused) {
  using Edit = std::function<void(ModuleDump&)>;
  struct Case {
    const char* key;
    const char* what;
    Edit edit;
  };
  run(c_.get(), {"INFER.VADD", "q8", "VALUES", "3", "1", "2", "3", "a", "SETATTR", "{\"n\": 1}"});
  run(c_.get(), {"INFER.VADD", "q8", "VALUES", "3", "-1", "2", "0.5", "b"});
  run(c_.get(), {"INFER.VADD", "f32", "VALUES", "3", "1", "2", "3", "a", "NOQUANT"});
  run(c_.get(), {"INFER.VADD", "f32", "VALUES", "3", "3", "2", "1", "b", "NOQUANT"});
  auto header = [](ModuleDump& d) -> std::string& { return d.value.fields[1].bytes; };
  auto elem = [](ModuleDump& d, size_t i) -> std::string& { return d.value.fields[2 + i].bytes; };
  auto layout = [&](ModuleDump& d, size_t i) {
    const auto& h = header(d);
    auto l = vset::parse_element(elem(d, i), static_cast<uint8_t>(h[vset::kQuant]), vset::get<uint32_t>(h, vset::kDim));
    EXPECT_TRUE(l.has_value());
    return l ? *l : vset::ElementLayout{};
  };
  const float nan = std::nanf(""), inf = INFINITY;
  const std::vector<Case> cases = {
      {"q8", "header element count + 1", [&](ModuleDump& d) { vset::set<uint64_t>(header(d), vset::kCount, 3); }},
      {"q8", "header element count huge", [&](ModuleDump& d) { vset::set<uint64_t>(header(d), vset::kCount, 1ull << 40); }},
      {"q8", "header dimension 65536", [&](ModuleDump& d) { vset::set<uint32_t>(header(d), vset::kDim, 65536); }},
      {"q8", "header dimension 0", [&](ModuleDump& d) { vset::set<uint32_t>(header(d), vset::kDim, 0); }},
      {"q8", "header quantisation 9", [&](ModuleDump& d) { header(d)[vset::kQuant] = 9; }},
      {"q8", "header M 1", [&](ModuleDump& d) { vset::set<uint32_t>(header(d), vset::kM, 1); }},
      {"q8", "header entry point 5", [&](ModuleDump& d) { vset::set<int64_t>(header(d), vset::kEntry, 5); }},
      {"q8", "header REDUCE 65536 without its matrix",
       [&](ModuleDump& d) { vset::set<uint32_t>(header(d), vset::kProjectionDim, 65536); }},
      {"q8", "header magic", [&](ModuleDump& d) { header(d)[vset::kMagic] ^= 1; }},
      {"q8", "header one byte longer", [&](ModuleDump& d) { header(d) += '\0'; }},
      {"q8", "norm NaN", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).norm, nan); }},
      {"q8", "norm infinite", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).norm, inf); }},
      {"q8", "norm above 1e38", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).norm, 3e38f); }},
      {"q8", "norm negative", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).norm, -1.0f); }},
      {"q8", "Q8 scale NaN", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, nan); }},
      {"q8", "Q8 scale infinite", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, inf); }},
      {"q8", "Q8 scale 1e30", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, 1e30f); }},
      {"q8", "Q8 scale negative", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, -0.01f); }},
      {"q8", "Q8 component -128", [&](ModuleDump& d) { elem(d, 0)[layout(d, 0).vector + 4] = static_cast<char>(-128); }},
      {"f32", "F32 component NaN", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, nan); }},
      {"f32", "F32 component 1000", [&](ModuleDump& d) { vset::set<float>(elem(d, 0), layout(d, 0).vector, 1000.0f); }},
      {"q8", "level 17", [&](ModuleDump& d) { elem(d, 0)[layout(d, 0).level] = 17; }},
      {"q8", "level 255", [&](ModuleDump& d) { elem(d, 0)[layout(d, 0).level] = static_cast<char>(255); }},
      {"q8", "link count 33 (2·M + 1)", [&](ModuleDump& d) { vset::set<uint32_t>(elem(d, 0), layout(d, 0).link_count[0], 33); }},
      {"q8", "link count 2^31", [&](ModuleDump& d) { vset::set<uint32_t>(elem(d, 0), layout(d, 0).link_count[0], 1u << 31); }},
      {"q8", "link to node 7", [&](ModuleDump& d) { vset::set<uint32_t>(elem(d, 0), layout(d, 0).links[0][0], 7); }},
      {"q8", "link to itself", [&](ModuleDump& d) { vset::set<uint32_t>(elem(d, 0), layout(d, 0).links[0][0], 0); }},
      {"q8", "repeated link",
       [&](ModuleDump& d) {
         auto l = layout(d, 0);
         std::string& r = elem(d, 0);
         vset::set<uint32_t>(r, l.link_count[0], 2);
         r.insert(l.links[0][0], r.substr(l.links[0][0], 4));
       }},
      {"q8", "name length 2^32 - 1", [&](ModuleDump& d) { vset::set<uint32_t>(elem(d, 0), 0, 0xffffffffu); }},
      {"q8", "attribute length + 1", [&](ModuleDump& d) {
         vset::set<uint32_t>(elem(d, 0), layout(d, 0).attrs_len, vset::get<uint32_t>(elem(d, 0), layout(d, 0).attrs_len) + 1);
       }},
      {"q8", "record one byte longer", [&](ModuleDump& d) { elem(d, 1) += '\0'; }},
      {"q8", "duplicate element name", [&](ModuleDump& d) { elem(d, 1)[layout(d, 1).name] = 'a'; }},
      {"q8", "element record missing, counts adjusted",
       [&](ModuleDump& d) {
         d.value.fields.pop_back();
         d.value.fields[0].uint -= 1;
       }},
  };
  for (const auto& c : cases) {
    ModuleDump d;
    ASSERT_NO_FATAL_FAILURE(parsed_dump(c.key, &d, 4));
    for (size_t i = 0; i < 2; ++i) {  // what the edits index exists
      const auto l = vset::parse_element(elem(d, i), static_cast<uint8_t>(header(d)[vset::kQuant]),
                                         vset::get<uint32_t>(header(d), vset::kDim));
      ASSERT_TRUE(l && l->size == elem(d, i).size() && !l->links[0].empty()) << c.key << " element " << i;
    }
    expect_accepted(encode_module_dump(d));
    c.edit(d);
    expect_refused(encode_module_dump(d), std::string(c.key) + ": " + c.what);
  }
}

// A REDUCE set: the matrix record with a wrong size, a non-finite entry, or missing.
TEST_F(VsetRestoreTest, ForgedReduceMatrixIsRefused) {
  run(c_.get(), {"INFER.VADD", "red", "REDUCE", "2", "VALUES", "4", "1", "2", "3", "4", "a"});
  ModuleDump d;
  ASSERT_NO_FATAL_FAILURE(parsed_dump("red", &d, 4));
  ASSERT_EQ(d.value.fields.size(), 4u);
  ASSERT_EQ(d.value.fields[2].bytes.size(), 4u * 2 * 4);
  ModuleDump forged = d;
  forged.value.fields[2].bytes.pop_back();
  expect_refused(encode_module_dump(forged), "matrix one byte short");
  forged = d;
  vset::set<float>(forged.value.fields[2].bytes, 4, std::nanf(""));
  expect_refused(encode_module_dump(forged), "matrix NaN");
  forged = d;
  forged.value.fields.erase(forged.value.fields.begin() + 2);
  forged.value.fields[0].uint -= 1;
  expect_refused(encode_module_dump(forged), "matrix missing");
}

// Damages the first infervset value in an RDB image (the only key): applies `edit` to its fields and
// recomputes the file's CRC.
std::string damage_rdb(const std::string& rdb, const std::string& key, const std::function<void(ModuleValue&)>& edit) {
  const std::string marker = std::string(1, '\x07') + static_cast<char>(key.size()) + key;
  const size_t at = rdb.find(marker);
  EXPECT_NE(at, std::string::npos) << "key " << key << " not found in the RDB";
  if (at == std::string::npos) return rdb;
  size_t end = 0;
  auto v = parse_module_value(rdb, at + marker.size(), &end);
  EXPECT_TRUE(v.has_value());
  if (!v) return rdb;
  edit(*v);
  std::string out = rdb.substr(0, at + marker.size()) + encode_module_value(*v) + rdb.substr(end);
  reseal(out);
  return out;
}

// Restarts redis-server on `dir` and expects a clean failure: an exit (with `exit_code` unless it is -1),
// not a signal, the key named in the log, no crash report.
void expect_clean_exit(const fs::path& dir, const std::vector<std::string>& extra_args, const std::string& key,
                       int exit_code) {
  std::vector<std::string> args = {"--dir", dir.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  RedisServer s({.server_args = args, .start_timeout_ms = 30000, .expect_exit = true});
  const int status = s.exit_status();
  const std::string log = s.log();
  EXPECT_TRUE(WIFEXITED(status)) << "not a clean exit (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << ")\n" << log;
  // The status is Redis's: after a refused value in an RDB file it runs its RDB checker, which cannot
  // see inside module values and so may exit 0; a damaged AOF exits 1.
  if (WIFEXITED(status) && exit_code >= 0) {
    EXPECT_EQ(WEXITSTATUS(status), exit_code) << log;
  }
  EXPECT_NE(log.find("infer: cannot load the vector set in key '" + key + "'"), std::string::npos) << log;
  EXPECT_EQ(log.find("Guru Meditation"), std::string::npos) << log;
  EXPECT_EQ(log.find("crashed by signal"), std::string::npos) << log;
}

// Fills one set and saves it (RDB, or AOF whose base is an RDB), in `dir`.
void make_saved_set(const fs::path& dir, const std::vector<std::string>& extra_args, const std::string& key,
                    const std::string& save_command) {
  std::vector<std::string> args = {"--dir", dir.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  RedisServer s({.server_args = args});
  RedisConn c = s.connect();
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(run(c.get(), {"INFER.VADD", key, "VALUES", "3", std::to_string(i), "1", std::to_string(i % 3),
                            "e" + std::to_string(i)}),
              "1");
  ASSERT_EQ(run(c.get(), {save_command}).rfind("(error)", 0), std::string::npos);
  // BGREWRITEAOF runs in a child: wait for it.
  for (int i = 0; i < 500; ++i) {
    const std::string info = run(c.get(), {"INFO", "persistence"});
    if (info.find("aof_rewrite_in_progress:0") != std::string::npos &&
        info.find("aof_rewrite_scheduled:0") != std::string::npos && info.find("rdb_bgsave_in_progress:0") != std::string::npos)
      break;
    usleep(20000);
  }
}

// Damaged RDB files of several kinds: the server exits (does not crash), naming the key.
TEST(VsetDamagedFiles, DamagedRdbStopsTheServerCleanly) {
  const std::string key = "vs:damaged";
  const std::vector<std::pair<const char*, std::function<void(ModuleValue&)>>> damages = {
      {"record count + 1", [](ModuleValue& v) { v.fields[0].uint += 1; }},
      {"element record as an unsigned", [](ModuleValue& v) { v.fields[3] = ModuleField{ModuleField::kUint, 1, ""}; }},
      {"element record truncated", [](ModuleValue& v) { v.fields[3].bytes.resize(v.fields[3].bytes.size() / 2); }},
      {"norm NaN", [](ModuleValue& v) {
         auto l = vset::parse_element(v.fields[2].bytes, 1, 3);
         ASSERT_TRUE(l.has_value());
         vset::set<float>(v.fields[2].bytes, l->norm, std::nanf(""));
       }},
  };
  for (const auto& [what, edit] : damages) {
    SCOPED_TRACE(what);
    TempDir dir;
    make_saved_set(dir.path, {}, key, "SAVE");
    const fs::path rdb = dir.path / "dump.rdb";
    ASSERT_TRUE(fs::exists(rdb));
    write_file(rdb, damage_rdb(read_file(rdb), key, edit));
    expect_clean_exit(dir.path, {}, key, -1);
  }
}

// The same through the AOF: its base file is an RDB (aof-use-rdb-preamble, the default).
TEST(VsetDamagedFiles, DamagedAofBaseStopsTheServerCleanly) {
  const std::string key = "vs:aof";
  TempDir dir;
  const std::vector<std::string> aof = {"--appendonly", "yes", "--aof-use-rdb-preamble", "yes"};
  make_saved_set(dir.path, aof, key, "BGREWRITEAOF");
  fs::path base;
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.path().filename().string().ends_with(".base.rdb")) base = e.path();
  ASSERT_FALSE(base.empty()) << "no AOF base file";
  write_file(base, damage_rdb(read_file(base), key, [](ModuleValue& v) {
               v.fields[3] = ModuleField{ModuleField::kUint, 1, ""};
             }));
  expect_clean_exit(dir.path, aof, key, 1);
}

// Components whose L2 norm overflows float were stored with a NaN norm; now refused. A large vector
// whose norm fits is stored and read back finite, and a query of any finite size works.
TEST_F(VsetRestoreTest, VectorWhoseNormOverflowsFloatIsRefused) {
  for (const char* quant : {"Q8", "NOQUANT", "BIN"}) {
    SCOPED_TRACE(quant);
    run(c_.get(), {"DEL", "nv"});
    EXPECT_EQ(run(c_.get(), {"INFER.VADD", "nv", "VALUES", "3", "3e38", "3e38", "3e38", "big", quant}),
              "(error) ERR vector too large: its L2 norm must be at most 1e38");
    ASSERT_EQ(run(c_.get(), {"INFER.VADD", "nv", "VALUES", "3", "5e37", "5e37", "5e37", "large", quant}), "1");
    ASSERT_EQ(run(c_.get(), {"INFER.VADD", "nv", "VALUES", "3", "1", "-1", "0", "small", quant}), "1");
    Reply emb = command(c_.get(), {"INFER.VEMB", "nv", "large"});
    ASSERT_TRUE(emb && emb->type == REDIS_REPLY_ARRAY && emb->elements == 3) << show(emb.get());
    for (size_t i = 0; i < 3; ++i) {
      const double x = std::strtod(emb->element[i]->str, nullptr);
      EXPECT_TRUE(std::isfinite(x)) << show(emb.get());
      if (std::string(quant) != "BIN") {
        EXPECT_NEAR(x / 5e37, 1.0, 0.02) << show(emb.get());
      }
    }
    EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "nv", "VALUES", "3", "3e38", "3e38", "3e38", "COUNT", "1"}), "[large]");
    EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "nv", "ELE", "large", "COUNT", "1"}), "[large]");
  }
}

}  // namespace
}  // namespace infer::test
