// INFER.TOKENIZE / INFER.DETOKENIZE, token blobs and raw arrays in keys, and replication of stored
// blobs as plain SETs to a replica that has no module at all.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

class TokensTest : public SharedServerTest<TokensTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }
};

std::string raw_array(const std::vector<uint32_t>& ids) {
  std::string s(ids.size() * 4, '\0');
  std::memcpy(s.data(), ids.data(), s.size());
  return s;
}

TEST_F(TokensTest, TokenizeAndDetokenizeRoundTrip) {
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time"}), "[1, 403, 407, 261, 378]");
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time", "NOBOS"}), "[403, 407, 261, 378]");
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "1", "403", "407", "261", "378"}), "Once upon a time");
}

TEST_F(TokensTest, StoreWritesBlobThatReadsBack) {
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:1"}), "5");
  Reply blob = command(c_.get(), {"GET", "doc:1"});
  ASSERT_EQ(blob->type, REDIS_REPLY_STRING);
  ASSERT_EQ(blob->len, 28u + 5 * 4);
  EXPECT_EQ(std::string(blob->str, 4), std::string(4, '\xff'));
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "KEY", "doc:1"}), "Once upon a time");
}

TEST_F(TokensTest, RawArraysAccepted) {
  command(c_.get(), {"SET", "raw:1", raw_array({1, 403, 407, 261, 378})});
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "KEY", "raw:1"}), "Once upon a time");
  command(c_.get(), {"SET", "raw:bad", raw_array({1, 403, 512})});
  EXPECT_NE(run({"INFER.DETOKENIZE", "stories", "KEY", "raw:bad"}).find("token id 512"), std::string::npos);
  command(c_.get(), {"SET", "raw:odd", "abcde"});
  EXPECT_NE(run({"INFER.DETOKENIZE", "stories", "KEY", "raw:odd"}).find("(error) ERR token key 'raw:odd'"),
            std::string::npos);
}

TEST_F(TokensTest, BlobForAnotherVocabularyIsRefused) {
  run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:fp"});
  Reply blob = command(c_.get(), {"GET", "doc:fp"});
  std::string b(blob->str, blob->len);
  b[16] ^= 0x5a;  // inside the fingerprint
  command(c_.get(), {"SET", "doc:fp", b});
  std::string r = run({"INFER.DETOKENIZE", "stories", "KEY", "doc:fp"});
  EXPECT_NE(r.find("another vocabulary"), std::string::npos) << r;
  r = run({"INFER.GENERATE", "stories", "TOKENS", "doc:fp", "MAXTOKENS", "2"});
  EXPECT_NE(r.find("another vocabulary"), std::string::npos) << r;
}

TEST_F(TokensTest, ErrorsAreClear) {
  run({"DEL", "nokey"});
  command(c_.get(), {"RPUSH", "alist", "x"});
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories"}), "(error) ERR wrong number of arguments for 'infer.tokenize' command");
  EXPECT_EQ(run({"INFER.TOKENIZE", "nope", "x"}), "(error) ERR unknown model 'nope' (see INFER.MODELS)");
  EXPECT_NE(run({"INFER.TOKENIZE", "stories", "x", "LOUD"}).find("unknown option 'LOUD'"), std::string::npos);
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "x", "STORE"}), "(error) ERR STORE needs a key");
  EXPECT_NE(run({"INFER.DETOKENIZE", "stories", "abc"}).find("token id must be an integer in [0, 511]"),
            std::string::npos);
  EXPECT_NE(run({"INFER.DETOKENIZE", "stories", "512"}).find("[0, 511]"), std::string::npos);
  EXPECT_NE(run({"INFER.DETOKENIZE", "stories", "-1"}).find("[0, 511]"), std::string::npos);
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "KEY", "nokey"}), "(error) ERR token key 'nokey' does not exist");
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "KEY", "alist"}),
            "(error) WRONGTYPE token key 'alist' does not hold a string");
  EXPECT_EQ(run({"INFER.DETOKENIZE", "stories", "KEY", "a", "b"}), "(error) ERR KEY takes exactly one key");
  EXPECT_EQ(run({"PING"}), "PONG");
}

bool wait_for(const std::function<bool()>& ok, int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Replicas (and the AOF) get plain SET / XADD: a replica without the module reproduces the data.
TEST(Replication, StoredBlobsAndStreamsReachAReplicaWithoutTheModule) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer master({.module_args = {"MODEL", "stories", stories_model_path()}});
  RedisServer replica({.server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())},
                       .load_module = false});
  RedisConn m = master.connect(), r = replica.connect();
  ASSERT_TRUE(wait_for([&] { return show(command(r.get(), {"INFO", "replication"}).get()).find(
                                        "master_link_status:up") != std::string::npos; },
                       10000));
  EXPECT_EQ(show(command(m.get(), {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:r"}).get()), "5");
  std::string text = show(command(m.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "12", "TEMP",
                                            "0", "STREAM", "out:r"}).get());
  std::string master_blob = show(command(m.get(), {"GET", "doc:r"}).get());
  EXPECT_TRUE(wait_for([&] { return show(command(r.get(), {"GET", "doc:r"}).get()) == master_blob; }, 10000));
  std::string master_stream = show(command(m.get(), {"XRANGE", "out:r", "-", "+"}).get());
  EXPECT_TRUE(wait_for([&] { return show(command(r.get(), {"XRANGE", "out:r", "-", "+"}).get()) == master_stream; },
                       10000))
      << master_stream << "\nreplica: " << show(command(r.get(), {"XRANGE", "out:r", "-", "+"}).get());
  EXPECT_NE(master_stream.find("finish"), std::string::npos);
}

// With the AOF on and a reader blocked on the stream, streamed entries reach the AOF (the server once
// asserted in handleClientsBlockedOnKeys because a flush left its propagation queued), and reloading
// the AOF gives the same stream and blobs.
TEST(Replication, StreamsWithAofOnAndABlockedReaderReloadIdentically) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path(), "STREAM-MAXLEN", "5"},
                      .server_args = {"--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "no",
                                      "--enable-debug-command", "yes"}});
  RedisConn c = server.connect(), reader = server.connect();
  redisAppendCommand(reader.get(), "XREAD BLOCK 20000 STREAMS out:aof $");
  int done = 0;
  while (!done) ASSERT_EQ(redisBufferWrite(reader.get(), &done), REDIS_OK);
  ASSERT_TRUE(wait_for([&] { return show(command(c.get(), {"INFO", "clients"}).get()).find("blocked_clients:1") !=
                                    std::string::npos; },
                       10000));
  for (int i = 0; i < 3; ++i) {
    const std::string text = show(command(c.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "60",
                                                     "TEMP", "0", "STREAM", "out:aof"}).get());
    ASSERT_EQ(text.rfind("(error)", 0), std::string::npos) << text;
  }
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(reader.get(), &raw), REDIS_OK);
  Reply woke(static_cast<redisReply*>(raw));
  EXPECT_NE(show(woke.get()).find("out:aof"), std::string::npos);
  EXPECT_EQ(show(command(c.get(), {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:aof"}).get()), "5");
  const std::string stream = show(command(c.get(), {"XRANGE", "out:aof", "-", "+"}).get());
  const std::string blob = show(command(c.get(), {"GET", "doc:aof"}).get());
  EXPECT_NE(stream.find("finish"), std::string::npos);
  EXPECT_EQ(show(command(c.get(), {"DEBUG", "LOADAOF"}).get()), "OK");
  EXPECT_EQ(show(command(c.get(), {"XRANGE", "out:aof", "-", "+"}).get()), stream);
  EXPECT_EQ(show(command(c.get(), {"GET", "doc:aof"}).get()), blob);
  EXPECT_TRUE(server.alive()) << server.log();
}

}  // namespace
}  // namespace infer::test
