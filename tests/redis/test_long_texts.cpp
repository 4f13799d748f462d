// Long texts against a real redis-server (issue 49): a text tokenised on the main thread (INFER.TOKENIZE
// inside MULTI/EXEC or a script, INFER.RAG's question) is bounded by infer.inline-max-bytes; a prompt
// that cannot fit the context is refused before it is tokenised; one long text being tokenised does not
// delay another client's short request; no handler holds the main thread for a long argument.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;

class LongTextsTest : public SharedServerTest<LongTextsTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  // Milliseconds `argv` took to answer, with its reply in *out.
  double timed(redisContext* c, const std::vector<std::string>& argv, std::string* out) {
    const auto t0 = Clock::now();
    *out = show(command(c, argv).get());
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
};

// Prose of `bytes` bytes: what the stories tokeniser is slowest on (about 4 MB/s on a loaded core).
std::string prose(size_t bytes) {
  static const std::string kSentence =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
  std::string s;
  s.reserve(bytes + kSentence.size());
  while (s.size() < bytes) s += kSentence;
  s.resize(bytes);
  return s;
}

constexpr size_t kHuge = 20u << 20;  // seconds to tokenise whole; refused or queued, never waited for
// Generous bounds for a loaded 2-core machine; the work they stand for takes seconds when it is done.
constexpr double kQuickMs = kSanitizerBuild ? 5000 : 1000;

TEST_F(LongTextsTest, InlineTokenizeIsBoundedByInlineMaxBytes) {
  ASSERT_EQ(run({"CONFIG", "GET", "infer.inline-max-bytes"}), "[infer.inline-max-bytes, 8192]");
  const std::string fits = prose(8192), over = prose(8193);
  const std::string expected = run({"INFER.TOKENIZE", "stories", fits});
  ASSERT_EQ(expected.find("(error)"), std::string::npos) << expected;

  // Up to the limit inline works as before, in MULTI and in a script.
  ASSERT_EQ(run({"MULTI"}), "OK");
  run({"INFER.TOKENIZE", "stories", fits});
  EXPECT_EQ(run({"EXEC"}), "[" + expected + "]");
  const std::string script = "return redis.call('INFER.TOKENIZE', 'stories', ARGV[1])";
  EXPECT_EQ(run({"EVAL", script, "0", fits}), expected);

  // One byte over: refused, saying what to do.
  ASSERT_EQ(run({"MULTI"}), "OK");
  run({"INFER.TOKENIZE", "stories", over});
  const std::string in_multi = run({"EXEC"});
  EXPECT_NE(in_multi.find("ERR text of 8193 bytes is over infer.inline-max-bytes (8192)"), std::string::npos)
      << in_multi;
  EXPECT_NE(in_multi.find("run it outside them, or raise infer.inline-max-bytes"), std::string::npos) << in_multi;
  const std::string in_eval = run({"EVAL", script, "0", over});
  EXPECT_NE(in_eval.find("over infer.inline-max-bytes"), std::string::npos) << in_eval;
  // Outside MULTI/EVAL the same text is tokenised off the main thread.
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", over}).find("(error)"), std::string::npos);

  // A huge text in a script is refused at once instead of holding the main thread for seconds.
  std::string reply;
  EXPECT_LT(timed(c_.get(), {"EVAL", script, "0", prose(kHuge)}, &reply), kQuickMs);
  EXPECT_NE(reply.find("over infer.inline-max-bytes"), std::string::npos) << reply;

  // Raising the config allows longer inline texts.
  ASSERT_EQ(run({"CONFIG", "SET", "infer.inline-max-bytes", "16kb"}), "OK");
  EXPECT_EQ(run({"EVAL", script, "0", over}).find("(error)"), std::string::npos);
  ASSERT_EQ(run({"CONFIG", "SET", "infer.inline-max-bytes", "8192"}), "OK");
}

TEST_F(LongTextsTest, RagQuestionIsBoundedByInlineMaxBytes) {
  // The question is tokenised on the main thread: refused by length before anything else runs.
  const std::string over = prose(8193);
  const std::string q = run({"INFER.RAG", "stories", "kb", "VALUES", "2", "1", "0", "QUESTION", over});
  EXPECT_NE(q.find("QUESTION of 8193 bytes is over infer.inline-max-bytes (8192)"), std::string::npos) << q;
  const std::string query = run({"INFER.RAG", "stories", "kb", "QUERY", over});
  EXPECT_NE(query.find("QUERY text (the question without QUESTION) of 8193 bytes is over"), std::string::npos) << query;
  // A long QUERY with a short QUESTION passes that check: the query is embedded off the main thread
  // (where stories refuses this one for its context).
  const std::string ok = run({"INFER.RAG", "stories", "kb", "QUERY", over, "QUESTION", "Who?", "MAXTOKENS", "2"});
  EXPECT_EQ(ok, "(error) ERR prompt of 2731 tokens does not fit the context of 2048 tokens");
}

TEST_F(LongTextsTest, DetokenizeTakesAtMostTheContextInIds) {
  // Decoded on the main thread, like DETOKENIZE KEY: bounded by the context (2048) as keys are.
  std::vector<std::string> argv = {"INFER.DETOKENIZE", "stories"};
  argv.resize(2 + 2048, "403");
  const std::string fits = run(argv);
  EXPECT_EQ(fits.rfind("Once Once", 0), 0u) << fits.substr(0, 100);
  argv.push_back("403");
  EXPECT_EQ(run(argv),
            "(error) ERR 2049 ids are more than the model's context of 2048 tokens (ids are decoded on the main "
            "thread); detokenise them in parts");
}

TEST_F(LongTextsTest, PromptsThatCannotFitAreRefusedBeforeTokenising) {
  const std::string huge = prose(kHuge);
  std::string reply;
  // The whole text would take seconds to tokenise; its length alone shows it cannot fit.
  EXPECT_LT(timed(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", huge, "MAXTOKENS", "4"}, &reply), kQuickMs);
  EXPECT_NE(reply.find("ERR prompt of at least "), std::string::npos) << reply;
  EXPECT_NE(reply.find(" tokens does not fit the context of 2048 tokens with room to generate"), std::string::npos)
      << reply;
  // The same for a PROMPT suffix after TOKENS, in Engine::refuse_generation_length's words.
  ASSERT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "lt:doc"}), "5");
  EXPECT_LT(
      timed(c_.get(), {"INFER.GENERATE", "stories", "TOKENS", "lt:doc", "PROMPT", huge, "MAXTOKENS", "4"}, &reply),
      kQuickMs);
  EXPECT_NE(reply.find("ERR prompt of at least "), std::string::npos) << reply;
  EXPECT_NE(reply.find(" tokens plus MAXTOKENS 4 exceeds the context of 2048"), std::string::npos) << reply;
  // And for an embedding.
  EXPECT_LT(timed(c_.get(), {"INFER.EMBED", "stories", huge}, &reply), kQuickMs);
  EXPECT_NE(reply.find("ERR prompt of at least "), std::string::npos) << reply;

  // A prompt that fits still tokenises exactly as before: same prompt_tokens as INFER.TOKENIZE.
  const std::string fits = prose(6000);
  Reply ids = command(c_.get(), {"INFER.TOKENIZE", "stories", fits});
  ASSERT_EQ(ids->type, REDIS_REPLY_ARRAY);
  Reply r = command(c_.get(), {"INFER.GENERATE", "stories", fits, "MAXTOKENS", "2", "WITHSTATS"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  EXPECT_EQ(r->element[5]->integer, static_cast<long long>(ids->elements));
}

TEST_F(LongTextsTest, LongTextsDoNotDelayShortRequests) {
  RedisConn long_client = server_->connect(120000), huge_prompt_client = server_->connect(120000);
  // Tokenising this takes one to two seconds (INFER.TOKENIZE has no context bound), and the huge prompt
  // would take several: another client's short requests must not wait for either.
  send_command(long_client.get(), {"INFER.TOKENIZE", "stories", prose(6u << 20), "STORE", "lt:long"});
  send_command(huge_prompt_client.get(), {"INFER.GENERATE", "stories", "PROMPT", prose(kHuge), "MAXTOKENS", "4"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both are being worked on
  std::string reply;
  const double generate_ms =
      timed(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once upon", "MAXTOKENS", "4", "TEMP", "0"}, &reply);
  EXPECT_EQ(reply.find("(error)"), std::string::npos) << reply;
  const double tokenize_ms = timed(c_.get(), {"INFER.TOKENIZE", "stories", prose(2000)}, &reply);
  EXPECT_EQ(reply.find("(error)"), std::string::npos);
  const double embed_ms = timed(c_.get(), {"INFER.EMBED", "stories", prose(1000)}, &reply);
  EXPECT_EQ(reply.find("(error)"), std::string::npos);
  const auto t0 = Clock::now();
  Reply huge_reply = receive(huge_prompt_client.get());
  ASSERT_TRUE(huge_reply);
  EXPECT_NE(show(huge_reply.get()).find("does not fit the context"), std::string::npos) << show(huge_reply.get());
  Reply long_reply = receive(long_client.get());
  const double long_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(long_reply);
  EXPECT_EQ(long_reply->type, REDIS_REPLY_INTEGER) << show(long_reply.get());
  std::printf("short GENERATE %.1f ms, TOKENIZE %.1f ms, EMBED %.1f ms while a 6 MB text was tokenised "
              "(%.0f ms more)\n", generate_ms, tokenize_ms, embed_ms, long_ms);
  EXPECT_LT(generate_ms, kQuickMs);
  EXPECT_LT(tokenize_ms, kQuickMs);
  EXPECT_LT(embed_ms, kQuickMs);
}

// Last in the suite: every long argument above was handled without a long main-thread stall.
TEST_F(LongTextsTest, LongArgumentsDoNotHoldTheMainThread) {
  const std::string huge = prose(kHuge);
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"INFER.GENERATE", "stories", huge, "MAXTOKENS", "4"},
           {"INFER.GENERATE", "stories", "CHAT", "user", huge},
           {"INFER.EMBED", "stories", huge}})
    command(c_.get(), argv);
  const long long stall_us = info_number(c_.get(), "infer", "infer_max_main_thread_stall_us");
  std::printf("max_main_thread_stall_us %lld\n", stall_us);
  EXPECT_GE(stall_us, 0);
  EXPECT_LT(stall_us, kSanitizerBuild ? 500000 : 50000) << run({"INFER.STATS"});
}

}  // namespace
}  // namespace infer::test
