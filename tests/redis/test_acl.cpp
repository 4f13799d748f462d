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

// Redis 7.0 puts module commands in no ACL category, so `-@admin` would not take INFER.LOAD/UNLOAD
// away: they ask for what MODULE LOAD needs themselves, also inside MULTI and scripts.
TEST(Acl, LoadingAndUnloadingModelsNeedsWhatModuleLoadNeeds) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL-DIR", stories_model_dir(), "MODEL", "stories", stories_model_path()}});
  RedisConn admin = server.connect();
  auto as_admin = [&](const std::vector<std::string>& a) { return show(command(admin.get(), a).get()); };
  ASSERT_EQ(as_admin({"ACL", "SETUSER", "ops", "on", ">pw", "~*", "+@all", "-@admin"}), "OK");
  ASSERT_EQ(as_admin({"ACL", "SETUSER", "root", "on", ">pw", "~*", "+@all"}), "OK");
  ASSERT_EQ(as_admin({"ACL", "SETUSER", "loader", "on", ">pw", "+infer.load", "+infer.unload", "+module|load"}),
            "OK");
  auto as = [&](const char* user) {
    RedisConn c = server.connect();
    EXPECT_EQ(show(command(c.get(), {"AUTH", user, "pw"}).get()), "OK");
    return c;
  };

  RedisConn ops = as("ops");
  auto as_ops = [&](const std::vector<std::string>& a) { return show(command(ops.get(), a).get()); };
  const std::string denied = "(error) NOPERM this user has no permissions to run the '";
  EXPECT_EQ(as_ops({"INFER.LOAD", "m", "stories.gguf"}),
            denied + "infer.load' command: it needs what MODULE LOAD needs (e.g. +@admin or +module|load)");
  EXPECT_EQ(as_ops({"INFER.UNLOAD", "stories"}),
            denied + "infer.unload' command: it needs what MODULE LOAD needs (e.g. +@admin or +module|load)");
  EXPECT_EQ(as_ops({"MULTI"}), "OK");
  EXPECT_EQ(as_ops({"INFER.UNLOAD", "stories"}), "QUEUED");
  EXPECT_TRUE(as_ops({"EXEC"}).starts_with("[(error) NOPERM")) << "inside MULTI";
  EXPECT_TRUE(as_ops({"EVAL", "return redis.call('INFER.UNLOAD', 'stories')", "0"}).find("NOPERM") !=
              std::string::npos);
  EXPECT_EQ(as_admin({"INFER.MODELS"}), "[stories]");
  const std::string log = as_admin({"ACL", "LOG", "1"});
  EXPECT_TRUE(log.find("infer.unload") != std::string::npos && log.find("ops") != std::string::npos) << log;

  RedisConn root = as("root");
  EXPECT_EQ(show(command(root.get(), {"INFER.LOAD", "r", "stories.gguf"}).get()), "OK");
  EXPECT_EQ(show(command(root.get(), {"INFER.UNLOAD", "r"}).get()), "OK");
  RedisConn loader = as("loader");
  EXPECT_EQ(show(command(loader.get(), {"INFER.LOAD", "l", "stories.gguf"}).get()), "OK");
  EXPECT_EQ(show(command(loader.get(), {"INFER.UNLOAD", "l"}).get()), "OK");
  // The default user (+@all) keeps every right, inside MULTI and scripts too.
  EXPECT_EQ(as_admin({"INFER.LOAD", "d", "stories.gguf"}), "OK");
  EXPECT_EQ(as_admin({"EVAL", "return redis.call('INFER.UNLOAD', 'd')", "0"}), "OK");
  EXPECT_EQ(as_admin({"INFER.MODELS"}), "[stories]");
}

}  // namespace
}  // namespace infer::test
