// INFER.V* commands and INFER.EMBED through a real redis-server with the module: replies, every error
// path, key types, ACL key specs, RESP3 shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

class VsetCommands : public SharedServerTest<VsetCommands> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  void SetUp() override {
    SharedServerTest<VsetCommands>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
  }
};

TEST_F(VsetCommands, AddSearchAndReadBack) {
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "a", "SETATTR", R"({"year": 1990})"}), "1");
  EXPECT_EQ(run({"INFER.VADD", "s", "FP32", fp32({0, 1, 0}), "b"}), "1");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "3", "0.9", "0.1", "0", "c", "SETATTR", R"({"year": 2000})"}), "1");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "3", "0", "0", "1", "b"}), "0");  // update
  EXPECT_EQ(run({"INFER.VCARD", "s"}), "3");
  EXPECT_EQ(run({"INFER.VDIM", "s"}), "3");
  EXPECT_EQ(run({"INFER.VSIM", "s", "VALUES", "3", "1", "0", "0"}), "[a, c, b]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "VALUES", "3", "1", "0", "0", "COUNT", "1", "WITHSCORES"}), "[a, 1]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "COUNT", "2", "WITHATTRIBS"}),
            R"([a, {"year": 1990}, c, {"year": 2000}])");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "FILTER", ".year > 1995"}), "[c]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "FILTER", ".year > 1995", "TRUTH"}), "[c]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "EPSILON", "0.01"}), "[a, c]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "EF", "5", "FILTER-EF", "10", "NOTHREAD", "COUNT", "3"}), "[a, c, b]");
  EXPECT_EQ(run({"INFER.VEMB", "s", "a"}), "[1, 0, 0]");
  EXPECT_EQ(run({"INFER.VGETATTR", "s", "c"}), R"({"year": 2000})");
  EXPECT_EQ(run({"INFER.VGETATTR", "s", "b"}), "(nil)");
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "b", R"({"year": 1800})"}), "1");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "FILTER", ".year < 1900"}), "[b]");
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "b", ""}), "1");
  EXPECT_EQ(run({"INFER.VGETATTR", "s", "b"}), "(nil)");
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "zz", "{}"}), "0");
  std::string info = run({"INFER.VINFO", "s"});
  EXPECT_NE(info.find("quant-type, int8"), std::string::npos) << info;
  EXPECT_NE(info.find("size, 3"), std::string::npos) << info;
  EXPECT_NE(info.find("attributes-count, 2"), std::string::npos) << info;
}

TEST_F(VsetCommands, RemoveDeletesTheKeyWithItsLastElement) {
  run({"INFER.VADD", "s", "VALUES", "2", "1", "0", "a"});
  run({"INFER.VADD", "s", "VALUES", "2", "0", "1", "b"});
  EXPECT_EQ(run({"INFER.VREM", "s", "a"}), "1");
  EXPECT_EQ(run({"INFER.VREM", "s", "a"}), "0");
  EXPECT_EQ(run({"INFER.VSIM", "s", "VALUES", "2", "1", "0"}), "[b]");
  EXPECT_EQ(run({"INFER.VREM", "s", "b"}), "1");
  EXPECT_EQ(run({"EXISTS", "s"}), "0");
  EXPECT_EQ(run({"INFER.VREM", "s", "b"}), "0");
}

TEST_F(VsetCommands, QuantisationsAndRawEmbeddings) {
  run({"INFER.VADD", "f", "VALUES", "2", "3", "4", "a", "NOQUANT"});
  EXPECT_EQ(run({"INFER.VEMB", "f", "a"}), "[3, 4]");
  EXPECT_EQ(run({"INFER.VEMB", "f", "a", "RAW"}), "[fp32, " + fp32({0.6f, 0.8f}) + ", 5]");
  run({"INFER.VADD", "b", "VALUES", "4", "1", "-1", "1", "-1", "a", "BIN"});
  EXPECT_EQ(run({"INFER.VEMB", "b", "a"}), "[1, -1, 1, -1]");
  EXPECT_NE(run({"INFER.VINFO", "b"}).find("quant-type, bin"), std::string::npos);
  run({"INFER.VADD", "q", "VALUES", "2", "0", "2", "a", "Q8", "M", "8", "EF", "50"});
  std::string raw = run({"INFER.VEMB", "q", "a", "RAW"});
  EXPECT_EQ(raw.substr(0, 4), "[q8,") << raw;
  EXPECT_NE(run({"INFER.VINFO", "q"}).find("hnsw-m, 8"), std::string::npos);
}

TEST_F(VsetCommands, VaddRefusesBadVectorsAndOptionsAndAddsNothing) {
  run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "a"});
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "2", "1", "0", "x"}), "(error) ERR Vector dimension mismatch - got 2 but set has 3");
  EXPECT_NE(run({"INFER.VADD", "s", "FP32", "abcde", "x"}).find("multiple of 4"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "FP32", "", "x"}).find("(error)"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "zero", "0", "x"}).find("not a number"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "x"}).find("(error)"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "0", "x", "y"}).find("VALUES count"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "x", "BIN"}).find("quantization mismatch"),
            std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "x", "M", "32"}).find("M value mismatch"),
            std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "x", "M", "2"}).find("M must be"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "REDUCE", "2", "VALUES", "3", "1", "0", "0", "x"}).find("REDUCE"), std::string::npos);
  EXPECT_EQ(run({"INFER.VCARD", "s"}), "1");  // nothing half-added
  EXPECT_NE(run({"INFER.VADD", "new", "VALUES", "1", "1", "x", "M", "2"}).find("invalid M"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "new", "VALUES", "0", "x"}).find("VALUES count"), std::string::npos);
  EXPECT_EQ(run({"EXISTS", "new"}), "0");  // no empty set left behind
}

TEST_F(VsetCommands, VsimRefusesBadQueriesAndOptions) {
  run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "a"});
  EXPECT_EQ(run({"INFER.VSIM", "s", "VALUES", "2", "1", "0"}), "(error) ERR Vector dimension mismatch - got 2 but set has 3");
  EXPECT_NE(run({"INFER.VSIM", "s", "ELE", "a", "FILTER", ".year >"}).find("invalid FILTER expression"), std::string::npos);
  EXPECT_NE(run({"INFER.VSIM", "s", "ELE", "a", "FILTER", "year > 3"}).find("invalid FILTER expression"), std::string::npos);
  EXPECT_NE(run({"INFER.VSIM", "s", "ELE", "a", "COUNT", "0"}).find("COUNT must be"), std::string::npos);
  EXPECT_NE(run({"INFER.VSIM", "s", "ELE", "a", "FILTER-EF", "0"}).find("FILTER-EF must be"), std::string::npos);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "nope"}), "(error) ERR element not found in set");
  EXPECT_NE(run({"INFER.VSIM", "s", "BLOB", "x", "y"}).find("invalid vector specification"), std::string::npos);
}

TEST_F(VsetCommands, UnknownOptionsAndWrongArityAreRefused) {
  run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "a"});
  // Attributes that are not JSON are kept, as Redis 8 keeps them, and FILTER never matches them.
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "a", "[1,"}), "1");
  EXPECT_EQ(run({"INFER.VGETATTR", "s", "a"}), "[1,");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "3", "0", "1", "0", "b", "SETATTR", "{bad"}), "1");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "3", "0", "0", "1", "c", "SETATTR", "{\"n\": 1}"}), "1");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "a", "COUNT", "3", "FILTER", ".n == 1 or !(.n == 1)"}), "[c]");
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "x", "BOGUS"}).find("syntax error"), std::string::npos);
  EXPECT_NE(run({"INFER.VEMB", "s", "a", "BOGUS"}).find("syntax error"), std::string::npos);
  EXPECT_NE(run({"INFER.VADD", "s", "VALUES"}).find("wrong number"), std::string::npos);
  EXPECT_NE(run({"INFER.VREM", "s"}).find("wrong number"), std::string::npos);
  EXPECT_EQ(run({"INFER.VCARD", "s"}), "3");
}

TEST_F(VsetCommands, MissingKeysAndElementsReadAsEmptyOrNil) {
  run({"INFER.VADD", "s", "VALUES", "3", "1", "0", "0", "a"});
  EXPECT_EQ(run({"INFER.VSIM", "none", "VALUES", "1", "1"}), "[]");
  EXPECT_EQ(run({"INFER.VCARD", "none"}), "0");
  EXPECT_EQ(run({"INFER.VDIM", "none"}), "(error) ERR key does not exist");
  EXPECT_EQ(run({"INFER.VEMB", "none", "a"}), "(nil)");
  EXPECT_EQ(run({"INFER.VEMB", "s", "zz"}), "(nil)");
  EXPECT_EQ(run({"INFER.VINFO", "none"}), "(nil)");
  EXPECT_EQ(run({"INFER.VGETATTR", "none", "a"}), "(nil)");
  EXPECT_EQ(run({"INFER.VSETATTR", "none", "a", "{}"}), "0");
}

TEST_F(VsetCommands, WrongKeyTypeEverywhere) {
  run({"SET", "str", "x"});
  const std::string wrong = "(error) WRONGTYPE Operation against a key holding the wrong kind of value";
  EXPECT_EQ(run({"INFER.VADD", "str", "VALUES", "1", "1", "a"}), wrong);
  EXPECT_EQ(run({"INFER.VSIM", "str", "VALUES", "1", "1"}), wrong);
  EXPECT_EQ(run({"INFER.VREM", "str", "a"}), wrong);
  EXPECT_EQ(run({"INFER.VEMB", "str", "a"}), wrong);
  EXPECT_EQ(run({"INFER.VCARD", "str"}), wrong);
  EXPECT_EQ(run({"INFER.VDIM", "str"}), wrong);
  EXPECT_EQ(run({"INFER.VINFO", "str"}), wrong);
  EXPECT_EQ(run({"INFER.VSETATTR", "str", "a", "{}"}), wrong);
  EXPECT_EQ(run({"INFER.VGETATTR", "str", "a"}), wrong);
  EXPECT_EQ(run({"INFER.EMBED", "stories", "hi", "STORE", "str", "a"}), wrong);
  run({"INFER.VADD", "s", "VALUES", "1", "1", "a"});
  EXPECT_NE(run({"GET", "s"}).find("WRONGTYPE"), std::string::npos);
  EXPECT_EQ(run({"TYPE", "s"}), "infervset");
}

TEST_F(VsetCommands, KeySpecsLetReadOnlyUsersSearchButNotWrite) {
  run({"INFER.VADD", "s", "VALUES", "1", "1", "a"});
  ASSERT_EQ(run({"ACL", "SETUSER", "reader", "on", ">pw", "%R~*", "+@all"}), "OK");
  RedisConn r = server_->connect();
  ASSERT_EQ(show(command(r.get(), {"AUTH", "reader", "pw"}).get()), "OK");
  EXPECT_EQ(show(command(r.get(), {"INFER.VSIM", "s", "ELE", "a"}).get()), "[a]");
  EXPECT_EQ(show(command(r.get(), {"INFER.VCARD", "s"}).get()), "1");
  EXPECT_NE(show(command(r.get(), {"INFER.VADD", "s", "VALUES", "1", "1", "b"}).get()).find("NOPERM"), std::string::npos);
  EXPECT_NE(show(command(r.get(), {"INFER.VREM", "s", "a"}).get()).find("NOPERM"), std::string::npos);
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.EMBED", "stories", "STORE", "STORE", "k", "e"}), "[k]");
  run({"ACL", "DELUSER", "reader"});
}

TEST_F(VsetCommands, Resp3RepliesAreMaps) {
  run({"INFER.VADD", "s", "VALUES", "2", "1", "0", "a", "SETATTR", R"({"k": 1})"});
  run({"INFER.VADD", "s", "VALUES", "2", "0", "1", "b"});
  Resp3Client c3(server_->port());
  Resp3Value v = c3.call({"INFER.VSIM", "s", "VALUES", "2", "1", "0", "WITHSCORES"});
  ASSERT_EQ(v.type, '%');
  ASSERT_EQ(v.elems.size(), 4u);
  EXPECT_EQ(v.elems[0].str, "a");
  EXPECT_EQ(v.elems[1].type, ',');
  v = c3.call({"INFER.VSIM", "s", "VALUES", "2", "1", "0", "WITHSCORES", "WITHATTRIBS"});
  ASSERT_EQ(v.type, '%');
  ASSERT_EQ(v.elems[1].type, '*');
  EXPECT_EQ(v.elems[1].elems[1].str, R"({"k": 1})");
  EXPECT_EQ(v.elems[3].elems[1].type, '_');  // b has no attributes
  v = c3.call({"INFER.VSIM", "s", "VALUES", "2", "1", "0"});
  EXPECT_EQ(v.type, '*');
  v = c3.call({"INFER.VINFO", "s"});
  EXPECT_EQ(v.type, '%');
}

TEST_F(VsetCommands, EmbedRepliesAndStores) {
  Reply blob = command(c_.get(), {"INFER.EMBED", "stories", "Once upon a time", "NORMALIZE"});
  ASSERT_EQ(blob->type, REDIS_REPLY_STRING) << show(blob.get());
  const size_t dim = blob->len / 4;
  ASSERT_GT(dim, 0u);
  std::vector<float> v(dim);
  std::memcpy(v.data(), blob->str, blob->len);
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-3);
  Reply arr = command(c_.get(), {"INFER.EMBED", "stories", "Once upon a time", "ARRAY", "NORMALIZE", "POOLING", "last"});
  ASSERT_EQ(arr->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(arr->elements, dim);
  EXPECT_EQ(run({"INFER.EMBED", "stories", "Once upon a time", "STORE", "kb", "d1", "SETATTR", R"({"n": 1})"}), "1");
  EXPECT_EQ(run({"INFER.EMBED", "stories", "Once upon a time", "STORE", "kb", "d1"}), "0");
  EXPECT_EQ(run({"INFER.VDIM", "kb"}), std::to_string(dim));
  EXPECT_EQ(run({"INFER.VGETATTR", "kb", "d1"}), R"({"n": 1})");
  EXPECT_EQ(run({"INFER.VSIM", "kb", "FP32", std::string(blob->str, blob->len), "WITHSCORES"}), "[d1, 1]");
  // Same text, same embedding: deterministic.
  EXPECT_EQ(std::string(blob->str, blob->len),
            show(command(c_.get(), {"INFER.EMBED", "stories", "Once upon a time", "NORMALIZE"}).get()));
  EXPECT_NE(run({"INFER.EMBED", "stories", "x", "POOLING", "median"}).find("POOLING must be last, mean or cls"),
            std::string::npos);
  EXPECT_NE(run({"INFER.EMBED", "nope", "x"}).find("unknown model"), std::string::npos);
  EXPECT_NE(run({"INFER.EMBED", "stories", "x", "BOGUS"}).find("unknown option"), std::string::npos);
  run({"INFER.VADD", "small", "VALUES", "2", "1", "0", "a"});
  EXPECT_NE(run({"INFER.EMBED", "stories", "x", "STORE", "small", "b"}).find("dimension mismatch"), std::string::npos);
  // Attributes that are not JSON are stored as given, as by VADD ... SETATTR (Redis 8).
  EXPECT_EQ(run({"INFER.EMBED", "stories", "x", "STORE", "kb", "b", "SETATTR", "{"}), "1");
  EXPECT_EQ(run({"INFER.VGETATTR", "kb", "b"}), "{");
  // Long texts are tokenised off the main thread; one too long for the context is refused clearly.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "The cat sat on the mat. ";
  const std::string refused = run({"INFER.EMBED", "stories", long_text});
  EXPECT_EQ(refused.rfind("(error)", 0), 0u) << refused;
  std::string medium;
  for (int i = 0; i < 220; ++i) medium += "a ";  // 440 bytes: the short path
  Reply short_blob = command(c_.get(), {"INFER.EMBED", "stories", medium});
  EXPECT_EQ(short_blob->type, REDIS_REPLY_STRING) << show(short_blob.get());
  EXPECT_NE(run({"MULTI"}).find("OK"), std::string::npos);
  run({"INFER.EMBED", "stories", "x"});
  EXPECT_NE(run({"EXEC"}).find("cannot run inside MULTI"), std::string::npos);
}

}  // namespace
}  // namespace infer::test
