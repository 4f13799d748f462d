// Overload: 100 clients at once against a queue of 8. Every request either completes or gets an
// immediate -BUSY with a retry hint; Redis keeps answering PING; the counters add up.
#include <gtest/gtest.h>

#include <chrono>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

long long info_field(redisContext* c, const std::string& field) {
  std::string info = show(command(c, {"INFO", "infer"}).get());
  size_t p = info.find("infer_" + field + ":");
  return p == std::string::npos ? -1 : std::stoll(info.substr(p + field.size() + 7));
}

TEST(Overload, HundredClientsCompleteOrGetBusy) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path(), "QUEUE", "8", "MAX-RUNNING", "4"},
                      .server_args = {"--maxclients", "1000"}});
  RedisConn admin = server.connect();
  constexpr int kClients = 100;
  std::vector<RedisConn> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(server.connect());
  for (auto& c : clients) {
    redisAppendCommand(c.get(), "INFER.GENERATE stories PROMPT %s MAXTOKENS 64 SEED 1", "Once upon a time");
    int done = 0;
    while (!done) ASSERT_EQ(redisBufferWrite(c.get(), &done), REDIS_OK);
  }
  // The server stays responsive while the queue is full.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(show(command(admin.get(), {"PING"}).get()), "PONG");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));

  int completed = 0, busy = 0;
  std::string first_text;
  for (auto& c : clients) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK);
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_STRING) {
      ++completed;
      std::string text(r->str, r->len);
      if (first_text.empty()) first_text = text;
      EXPECT_EQ(text, first_text);  // same seed: same output under load (invariant 7)
    } else {
      ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << show(r.get());
      std::string e(r->str, r->len);
      EXPECT_EQ(e.rfind("BUSY ", 0), 0u) << e;
      EXPECT_NE(e.find("retry in"), std::string::npos) << e;
      ++busy;
    }
  }
  EXPECT_EQ(completed + busy, kClients);
  EXPECT_GE(completed, 8);
  EXPECT_GT(busy, 0);
  EXPECT_EQ(info_field(admin.get(), "completed"), completed);
  EXPECT_EQ(info_field(admin.get(), "rejected"), busy);
  EXPECT_EQ(info_field(admin.get(), "busy_replies"), busy);
  EXPECT_EQ(info_field(admin.get(), "generate_requests"), completed);
  EXPECT_EQ(info_field(admin.get(), "queued"), 0);
  EXPECT_EQ(info_field(admin.get(), "running"), 0);
  EXPECT_EQ(info_field(admin.get(), "tokens_generated"), 64LL * completed);
  EXPECT_TRUE(server.alive());
}

}  // namespace
}  // namespace infer::test
