// ACL: key specs (and the getkeys answer of INFER.GENERATE) let Redis check every key argument, so a
// user limited to read access on doc:* cannot generate from other keys or write anywhere.
#include <gtest/gtest.h>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

TEST(Acl, RestrictedUserOnlyReachesPermittedKeys) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path()}});
  RedisConn admin = server.connect();
  auto as_admin = [&](const std::vector<std::string>& a) { return show(command(admin.get(), a).get()); };
  ASSERT_EQ(as_admin({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:1"}), "5");
  ASSERT_EQ(as_admin({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "secret:1"}), "5");
  // Module commands have no ACL category in Redis 7.0: they are granted by name.
  ASSERT_EQ(as_admin({"ACL", "SETUSER", "reader", "on", ">pw", "%R~doc:*", "+infer.generate", "+infer.tokenize",
                      "+infer.detokenize", "+ping"}),
            "OK");
  ASSERT_EQ(as_admin({"ACL", "SETUSER", "writer", "on", ">pw", "%R~doc:*", "%RW~out:*", "+infer.generate",
                      "+infer.tokenize", "+xrange"}),
            "OK");

  RedisConn reader = server.connect();
  auto as_reader = [&](const std::vector<std::string>& a) { return show(command(reader.get(), a).get()); };
  ASSERT_EQ(as_reader({"AUTH", "reader", "pw"}), "OK");
  std::string ok = as_reader({"INFER.GENERATE", "stories", "TOKENS", "doc:1", "MAXTOKENS", "5", "TEMP", "0"});
  EXPECT_EQ(ok.find("(error)"), std::string::npos) << ok;
  EXPECT_EQ(as_reader({"INFER.DETOKENIZE", "stories", "KEY", "doc:1"}), "Once upon a time");
  for (const auto& denied : std::vector<std::vector<std::string>>{
           {"INFER.GENERATE", "stories", "TOKENS", "secret:1", "MAXTOKENS", "5"},
           {"INFER.GENERATE", "stories", "TOKENS", "doc:1", "secret:1", "MAXTOKENS", "5"},
           {"INFER.GENERATE", "stories", "TOKENS", "doc:1", "STREAM", "doc:out"},
           {"INFER.GENERATE", "stories", "PROMPT", "x", "STREAM", "out:1"},
           {"INFER.DETOKENIZE", "stories", "KEY", "secret:1"},
           {"INFER.TOKENIZE", "stories", "x", "STORE", "doc:2"},
           {"INFER.LOAD", "m", "stories260K.gguf"},
           {"INFER.UNLOAD", "stories"},
       }) {
    std::string r = as_reader(denied);
    EXPECT_EQ(r.rfind("(error) NOPERM", 0), 0u) << denied[0] << " " << denied[3] << " → " << r;
  }
  // Plain tokenize without a key needs no key permission.
  EXPECT_EQ(as_reader({"INFER.TOKENIZE", "stories", "Once"}), "[1, 403]");

  RedisConn writer = server.connect();
  auto as_writer = [&](const std::vector<std::string>& a) { return show(command(writer.get(), a).get()); };
  ASSERT_EQ(as_writer({"AUTH", "writer", "pw"}), "OK");
  std::string r = as_writer({"INFER.GENERATE", "stories", "TOKENS", "doc:1", "MAXTOKENS", "5", "STREAM", "out:w"});
  EXPECT_EQ(r.find("(error)"), std::string::npos) << r;
  EXPECT_NE(as_writer({"XRANGE", "out:w", "-", "+"}).find("finish"), std::string::npos);
  EXPECT_EQ(as_writer({"INFER.TOKENIZE", "stories", "Once", "STORE", "out:t"}), "2");
  EXPECT_EQ(as_writer({"INFER.TOKENIZE", "stories", "x", "STORE", "doc:t"}).rfind("(error) NOPERM", 0), 0u);
}

}  // namespace
}  // namespace infer::test
