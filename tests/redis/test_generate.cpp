// INFER.GENERATE through a real redis-server: prompts, token keys, options, WITHSTATS in RESP2 and
// RESP3, STREAM, MULTI/Lua refusal, timeout, disconnect, key deletion while running, bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

class GenerateTest : public SharedServerTest<GenerateTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  long long stat(const std::string& field) {
    std::string info = run({"INFO", "infer"});
    size_t p = info.find("infer_" + field + ":");
    return p == std::string::npos ? -1 : std::stoll(info.substr(p + field.size() + 7));
  }
};

const std::vector<std::string> kGreedy = {"MAXTOKENS", "24", "TEMP", "0"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(GenerateTest, GreedyPromptIsDeterministic) {
  std::string a = run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time"}, kGreedy));
  EXPECT_EQ(a, ", there was a little girl named Lily. She loved to play outside in the p");
  EXPECT_EQ(run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time"}, kGreedy)), a);
  // Shorthand: the text right after the model name is the prompt.
  EXPECT_EQ(run(cat({"INFER.GENERATE", "stories", "Once upon a time"}, kGreedy)), a);
}

TEST_F(GenerateTest, SeededSamplingIsReproducible) {
  std::vector<std::string> cmd = {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "30", "TEMP", "0.9",
                                  "TOPK", "20", "TOPP", "0.9", "MINP", "0.01", "REPEAT-PENALTY", "1.1", "SEED", "42"};
  EXPECT_EQ(run(cmd), run(cmd));
}

TEST_F(GenerateTest, TokenKeysGiveTheSameAnswerAsThePrompt) {
  run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:a"});
  std::string from_prompt = run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time"}, kGreedy));
  EXPECT_EQ(run(cat({"INFER.GENERATE", "stories", "TOKENS", "doc:a"}, kGreedy)), from_prompt);
  // Several keys are concatenated: a blob followed by a raw uint32 array.
  run({"INFER.TOKENIZE", "stories", "Once upon", "STORE", "doc:b1"});
  uint32_t rest[] = {261, 378};
  command(c_.get(), {"SET", "doc:b2", std::string(reinterpret_cast<char*>(rest), sizeof rest)});
  EXPECT_EQ(run(cat({"INFER.GENERATE", "stories", "TOKENS", "doc:b1", "doc:b2"}, kGreedy)), from_prompt);
  // A PROMPT after TOKENS is a suffix.
  std::string r = run(cat({"INFER.GENERATE", "stories", "TOKENS", "doc:a", "PROMPT", ", there was"}, kGreedy));
  EXPECT_EQ(r.find("(error)"), std::string::npos) << r;
}

// Texts over kSyncTokenizeBytes (256) are tokenised off the main thread (MULTI forces the inline
// path): same results, for prompts and for PROMPT suffixes after TOKENS.
TEST_F(GenerateTest, LongTextsGoThroughTheBackgroundThread) {
  std::string text;
  while (text.size() < 5000) text += "Once upon a time there was a little dog. ";
  Reply bg = command(c_.get(), {"INFER.TOKENIZE", "stories", text});
  ASSERT_EQ(bg->type, REDIS_REPLY_ARRAY) << show(bg.get());
  ASSERT_EQ(run({"MULTI"}), "OK");
  run({"INFER.TOKENIZE", "stories", text});
  Reply inl = command(c_.get(), {"EXEC"});
  ASSERT_EQ(inl->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(show(bg.get()), show(inl->element[0]));
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", text, "STORE", "doc:long"}), std::to_string(bg->elements));
  Reply r = command(c_.get(), {"INFER.GENERATE", "stories", text, "MAXTOKENS", "8", "TEMP", "0", "WITHSTATS"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  EXPECT_EQ(r->element[5]->integer, static_cast<long long>(bg->elements));  // prompt_tokens
  const std::string from_text(r->element[1]->str, r->element[1]->len);
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "TOKENS", "doc:long", "MAXTOKENS", "8", "TEMP", "0"}), from_text);
  // TOKENS (BOS + first sentence) followed by a long suffix that is tokenised in the background.
  const std::string first = "Once upon a time there was a little dog.";
  run({"INFER.TOKENIZE", "stories", first, "STORE", "doc:first"});
  const std::string suffix = text.substr(first.size());
  ASSERT_GT(suffix.size(), 256u);
  Reply split = command(c_.get(), {"INFER.GENERATE", "stories", "TOKENS", "doc:first", "PROMPT", suffix, "MAXTOKENS",
                                   "8", "TEMP", "0", "WITHSTATS"});
  ASSERT_EQ(split->type, REDIS_REPLY_ARRAY) << show(split.get());
  Reply suffix_ids = command(c_.get(), {"INFER.TOKENIZE", "stories", suffix, "NOBOS"});
  EXPECT_EQ(split->element[5]->integer,
            static_cast<long long>(command(c_.get(), {"INFER.TOKENIZE", "stories", first})->elements + suffix_ids->elements));
  // A background suffix that overflows the context is refused with the same clear error.
  std::string huge;
  while (huge.size() < 20000) huge += " and the dog ran";
  EXPECT_NE(run({"INFER.GENERATE", "stories", "TOKENS", "doc:first", "PROMPT", huge, "MAXTOKENS", "8"}).find(
                "exceeds the context"),
            std::string::npos);
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(GenerateTest, WithStatsInResp2AndResp3) {
  Reply r = command(c_.get(), cat({"INFER.GENERATE", "stories", "PROMPT", "Once", "WITHSTATS"}, kGreedy));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(r->elements, 22u);  // RESP2: a map is a flat array
  EXPECT_EQ(std::string(r->element[0]->str), "text");
  EXPECT_EQ(std::string(r->element[2]->str), "finish");
  EXPECT_EQ(std::string(r->element[3]->str), "length");
  EXPECT_EQ(std::string(r->element[8]->str), "generated_tokens");
  EXPECT_EQ(r->element[9]->integer, 24);

  Resp3Client c3(server_->port());
  Resp3Value v = c3.call(cat({"INFER.GENERATE", "stories", "PROMPT", "Once", "WITHSTATS"}, kGreedy));
  ASSERT_EQ(v.type, '%');
  ASSERT_EQ(v.elems.size(), 22u);
  EXPECT_EQ(v.elems[1].str, std::string(r->element[1]->str, r->element[1]->len));
  EXPECT_EQ(v.elems[12].str, "queue_ms");
  EXPECT_EQ(v.elems[13].type, ',');  // a RESP3 double
  Resp3Value plain = c3.call(cat({"INFER.GENERATE", "stories", "PROMPT", "Once"}, kGreedy));
  EXPECT_EQ(plain.type, '$');
  Resp3Value stats = c3.call({"INFER.STATS"});
  EXPECT_EQ(stats.type, '%');
  Resp3Value info = c3.call({"INFER.INFO", "stories"});
  EXPECT_EQ(info.type, '%');
}

TEST_F(GenerateTest, StreamReceivesTheTextAndAFinishEntry) {
  run({"DEL", "out:1"});
  std::string text = run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "STREAM", "out:1"}, kGreedy));
  Reply entries = command(c_.get(), {"XRANGE", "out:1", "-", "+"});
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY);
  ASSERT_GE(entries->elements, 2u);
  std::string streamed;
  for (size_t i = 0; i + 1 < entries->elements; ++i) {
    redisReply* fields = entries->element[i]->element[1];
    ASSERT_EQ(std::string(fields->element[0]->str), "text");
    streamed += std::string(fields->element[1]->str, fields->element[1]->len);
  }
  EXPECT_EQ(streamed, text);
  redisReply* last = entries->element[entries->elements - 1]->element[1];
  EXPECT_EQ(show(last), "[finish, length, tokens, 24]");
  // The stream must be a stream.
  run({"SET", "notastream", "x"});
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "x", "STREAM", "notastream"}),
            "(error) WRONGTYPE STREAM key holds a value that is not a stream");
}

TEST_F(GenerateTest, StreamWakesBlockedReaders) {
  run({"DEL", "out:live"});
  RedisConn reader = server_->connect();
  redisAppendCommand(reader.get(), "XREAD BLOCK 10000 STREAMS out:live $");
  int done = 0;
  while (!done) ASSERT_EQ(redisBufferWrite(reader.get(), &done), REDIS_OK);
  // Wait until the reader is blocked, then generate into the stream.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (run({"INFO", "clients"}).find("blocked_clients:1") == std::string::npos &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::yield();
  run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once", "STREAM", "out:live"}, kGreedy));
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(reader.get(), &raw), REDIS_OK);
  Reply r(static_cast<redisReply*>(raw));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  EXPECT_NE(show(r.get()).find("out:live"), std::string::npos);
}

// Stream entries notify keyspace subscribers like a client's XADD, and with a small STREAM-MAXLEN the
// stream is trimmed (approximately, whole nodes) instead of growing without bound.
TEST_F(GenerateTest, StreamNotifiesAndIsTrimmed) {
  run({"DEL", "out:events"});
  ASSERT_EQ(run({"CONFIG", "SET", "notify-keyspace-events", "Et"}), "OK");
  RedisConn sub = server_->connect();
  Reply subscribed = command(sub.get(), {"SUBSCRIBE", "__keyevent@0__:xadd"});
  ASSERT_EQ(subscribed->type, REDIS_REPLY_ARRAY);
  run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "8", "TEMP", "0", "STREAM", "out:events"});
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(sub.get(), &raw), REDIS_OK);
  Reply event(static_cast<redisReply*>(raw));
  EXPECT_EQ(show(event.get()), "[message, __keyevent@0__:xadd, out:events]");
  ASSERT_EQ(run({"CONFIG", "SET", "notify-keyspace-events", ""}), "OK");

  run({"DEL", "out:capped"});
  ASSERT_EQ(run({"CONFIG", "SET", "infer.stream-maxlen", "1"}), "OK");
  for (int i = 0; i < 70; ++i)
    run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0", "STREAM", "out:capped"});
  ASSERT_EQ(run({"CONFIG", "SET", "infer.stream-maxlen", "10000"}), "OK");
  // 70 requests wrote at least 140 entries (text and finish each); a stream node holds at most 100, so
  // approximate trimming to 1 keeps at most 100 + 1 (untrimmed there would be 140 or more).
  const long long len = command(c_.get(), {"XLEN", "out:capped"})->integer;
  EXPECT_GE(len, 1);
  EXPECT_LE(len, 101);
}

TEST_F(GenerateTest, RefusedInsideMultiAndLua) {
  EXPECT_EQ(run({"MULTI"}), "OK");
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once"}), "QUEUED");
  std::string r = run({"EXEC"});
  EXPECT_NE(r.find("cannot run inside MULTI/EXEC"), std::string::npos) << r;
  r = run({"EVAL", "return redis.call('INFER.GENERATE', 'stories', 'PROMPT', 'Once')", "0"});
  EXPECT_NE(r.find("(error)"), std::string::npos) << r;
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(GenerateTest, TimeoutRepliesErrorAndCancels) {
  long long before = stat("client_timeouts");
  std::string r = run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2000", "TIMEOUT", "1"});
  if (r == "(no reply)") ADD_FAILURE() << server_->log();
  EXPECT_EQ(r, "(error) TIMEOUT generation did not finish within 1 ms");
  EXPECT_EQ(stat("client_timeouts"), before + 1);
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(GenerateTest, ClientUnblockCancels) {
  RedisConn other = server_->connect();
  long long id = command(other.get(), {"CLIENT", "ID"})->integer;
  long long accepted = stat("generate_requests");
  redisAppendCommand(other.get(), "INFER.GENERATE stories PROMPT Once MAXTOKENS 2000 TEMP 0");
  int done = 0;
  while (!done) ASSERT_EQ(redisBufferWrite(other.get(), &done), REDIS_OK);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (stat("generate_requests") == accepted && std::chrono::steady_clock::now() < end) std::this_thread::yield();
  std::string unblocked = run({"CLIENT", "UNBLOCK", std::to_string(id)});
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(other.get(), &raw), REDIS_OK);
  Reply r(static_cast<redisReply*>(raw));
  if (unblocked == "1")
    EXPECT_EQ(show(r.get()), "(error) UNBLOCKED client unblocked; generation cancelled");
  else  // it finished first
    EXPECT_EQ(r->type, REDIS_REPLY_STRING) << show(r.get());
  EXPECT_EQ(show(command(other.get(), {"PING"}).get()), "PONG");
}

TEST_F(GenerateTest, DisconnectCancels) {
  long long before = stat("client_disconnects");
  {
    RedisConn gone = server_->connect();
    redisAppendCommand(gone.get(), "INFER.GENERATE stories PROMPT Once MAXTOKENS 2000 TEMP 0");
    int done = 0;
    while (!done) ASSERT_EQ(redisBufferWrite(gone.get(), &done), REDIS_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }  // closes the connection while the request runs
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (stat("client_disconnects") == before && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(stat("client_disconnects"), before + 1);
  EXPECT_EQ(run({"PING"}), "PONG");
}

// Eviction/defrag safety: the handler copied the ids, so deleting, overwriting and purging the memory
// under running requests changes nothing. Active defrag runs too where the server supports it (Debian's
// redis-server, built on the system jemalloc, refuses it with the message checked below).
TEST_F(GenerateTest, DeletingOrOverwritingTokenKeysWhileRunningChangesNothing) {
  const std::string defrag = run({"CONFIG", "SET", "activedefrag", "yes"});
  if (defrag != "OK") {
    EXPECT_NE(defrag.find("Active defragmentation cannot be enabled"), std::string::npos) << defrag;
  } else {
    run({"CONFIG", "SET", "active-defrag-ignore-bytes", "1"});
    run({"CONFIG", "SET", "active-defrag-threshold-lower", "0"});
  }
  run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:vol"});
  std::vector<std::string> cmd = {"INFER.GENERATE", "stories", "TOKENS", "doc:vol", "MAXTOKENS", "200", "TEMP", "0"};
  std::string expected = run(cmd);
  std::vector<RedisConn> clients;
  for (int i = 0; i < 6; ++i) {
    long long accepted = stat("generate_requests");
    clients.push_back(server_->connect());
    redisAppendCommand(clients.back().get(), "INFER.GENERATE stories TOKENS doc:vol MAXTOKENS 200 TEMP 0");
    int done = 0;
    while (!done) ASSERT_EQ(redisBufferWrite(clients.back().get(), &done), REDIS_OK);
    // Wait until the handler has copied the key and queued the request.
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (stat("generate_requests") == accepted && std::chrono::steady_clock::now() < end)
      std::this_thread::yield();
    // Alternate between deleting and overwriting the key under the running requests.
    if (i % 2) run({"DEL", "doc:vol"});
    else run({"SET", "doc:vol", std::string(4000, 'x')});
    EXPECT_EQ(run({"MEMORY", "PURGE"}), "OK");
    run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:vol"});
  }
  for (auto& c : clients) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK);
    Reply r(static_cast<redisReply*>(raw));
    EXPECT_EQ(show(r.get()), expected);
  }
  if (defrag == "OK") run({"CONFIG", "SET", "activedefrag", "no"});
}

TEST_F(GenerateTest, BadInputGivesClearErrors) {
  run({"SET", "str", "abc"});
  run({"DEL", "missing"});
  command(c_.get(), {"RPUSH", "list", "x"});
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const Case cases[] = {
      {{"stories"}, "ERR wrong number of arguments"},
      {{"stories", "PROMPT"}, "ERR PROMPT needs a value"},
      {{"nope", "PROMPT", "x"}, "ERR unknown model 'nope' (see INFER.MODELS)"},
      {{"stories", "PROMPT", "x", "BOGUS"}, "ERR unknown option 'BOGUS'"},
      {{"stories", "MAXTOKENS", "5", "TEMP", "0"}, "ERR one of PROMPT text, TOKENS key"},
      {{"stories", "PROMPT", "x", "PROMPT", "y"}, "ERR PROMPT given twice"},
      {{"stories", "PROMPT", "x", "MAXTOKENS", "ten"}, "ERR MAXTOKENS must be an integer in [1, 4096]"},
      {{"stories", "PROMPT", "x", "MAXTOKENS", "0"}, "ERR MAXTOKENS must be an integer"},
      {{"stories", "PROMPT", "x", "MAXTOKENS", "99999"}, "ERR MAXTOKENS must be an integer"},
      {{"stories", "PROMPT", "x", "TEMP", "-1"}, "ERR TEMP must be a number in [0, 100]"},
      {{"stories", "PROMPT", "x", "TEMP", "nan"}, "ERR TEMP must be a number"},
      {{"stories", "PROMPT", "x", "TOPP", "1.5"}, "ERR TOPP must be a number in (0, 1]"},
      {{"stories", "PROMPT", "x", "TOPK", "-3"}, "ERR TOPK must be an integer"},
      {{"stories", "PROMPT", "x", "SEED", "-3"}, "ERR SEED must be an integer"},
      {{"stories", "PROMPT", "x", "TIMEOUT", "soon"}, "ERR TIMEOUT must be an integer"},
      {{"stories", "PROMPT", "x", "STOP", ""}, "ERR STOP string must not be empty"},
      {{"stories", "PROMPT", "x", "TEMP"}, "ERR TEMP needs a value"},
      {{"stories", "TOKENS", "PROMPT", "x"}, "ERR TOKENS needs at least one key"},
      {{"stories", "TOKENS", "missing"}, "ERR token key 'missing' does not exist"},
      {{"stories", "TOKENS", "list"}, "WRONGTYPE token key 'list' does not hold a string"},
      {{"stories", "TOKENS", "str"}, "ERR token key 'str': token data: 3 bytes"},
      {{"stories", "PROMPT", "x", "TOKENS", "str"}, "ERR TOKENS must come before PROMPT"},
      {{"stories", "CHAT", "user", "hello"}, "ERR CHAT: the model has no chat template (tokenizer.chat_template); name a built-in format"},
      {{"stories", "CHAT", "user"}, "ERR CHAT needs role/text pairs"},
      {{"stories", "PROMPT", "x", "STREAM", "s", "STREAM", "t"}, "ERR STREAM given twice"},
      // The option ranges are the sampler's and the configs' (TOPP 0 and REPEAT-PENALTY 0 were accepted
      // here and refused after blocking; TIMEOUT took less than infer.timeout-ms).
      {{"stories", "PROMPT", "x", "TOPP", "0"}, "ERR TOPP must be a number in (0, 1]"},
      {{"stories", "PROMPT", "x", "REPEAT-PENALTY", "0"}, "ERR REPEAT-PENALTY must be a number in (0, 100]"},
      {{"stories", "PROMPT", "x", "TIMEOUT", "2147483648"}, "ERR TIMEOUT must be an integer in [0, 2147483647]"},
      {{"stories", "PROMPT", "x", "MAXTOKENS", "5", "MAXTOKENS", "6"}, "ERR MAXTOKENS given twice"},
      {{"stories", "PROMPT", "x", "TEMP", "0", "TEMP", "1"}, "ERR TEMP given twice"},
      {{"stories", "PROMPT", "x", "WITHSTATS", "WITHSTATS"}, "ERR WITHSTATS given twice"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {"INFER.GENERATE"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::string r = run(argv);
    EXPECT_EQ(r.rfind("(error) " + c.error, 0), 0u) << c.args.back() << " → " << r;
  }
  // STOP is the one option that repeats; a long TIMEOUT (the config's largest) is accepted.
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "3", "STOP", "x", "STOP", "y", "TIMEOUT",
                 "2147483647"})
                .rfind("(error)", 0),
            std::string::npos);
  // Prompt plus MAXTOKENS beyond the context.
  run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "doc:ctx"});
  EXPECT_NE(run({"INFER.GENERATE", "stories", "TOKENS", "doc:ctx", "MAXTOKENS", "4096"}).find("exceeds the context"),
            std::string::npos);
  EXPECT_EQ(run({"PING"}), "PONG");
}

}  // namespace
}  // namespace infer::test
