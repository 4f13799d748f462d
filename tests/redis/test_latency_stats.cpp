// Latency percentiles per model (time in queue, to first token, per output token, end to end) in INFO
// infer and INFER.STATS, against a real redis-server: requests queued behind MAX-RUNNING 1 show their
// wait, and the percentiles are ordered.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

// "p50=1.2,p90=3,p99=4,samples=6" as a map.
std::map<std::string, double> dict_field(const std::string& value) {
  std::map<std::string, double> out;
  size_t at = 0;
  while (at < value.size()) {
    const size_t eq = value.find('=', at), comma = value.find(',', at);
    out[value.substr(at, eq - at)] = std::stod(value.substr(eq + 1, comma - eq - 1));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

TEST(LatencyStats, PercentilesPerModelInInfoAndStats) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path(), "THREADS", "1", "MAX-RUNNING", "1",
                                      "QUEUE", "8"}});
  // Six requests at once: one runs, five wait their turn.
  std::vector<RedisConn> conns;
  for (int i = 0; i < 6; ++i) {
    conns.push_back(server.connect());
    send_command(conns.back().get(), {"INFER.GENERATE", "stories", "Once upon a time", "MAXTOKENS", "24"});
  }
  for (auto& c : conns) {
    Reply r = receive(c.get());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << show(r.get());
  }
  RedisConn c = server.connect();
  std::map<std::string, std::map<std::string, double>> m;
  for (const char* metric : {"queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"}) {
    const std::string v = info_value(c.get(), "infer", std::string("infer_latency_") + metric + "_stories");
    ASSERT_FALSE(v.empty()) << metric;
    m[metric] = dict_field(v);
    EXPECT_EQ(m[metric]["samples"], 6) << v;
    EXPECT_LE(m[metric]["p50"], m[metric]["p90"]) << v;
    EXPECT_LE(m[metric]["p90"], m[metric]["p99"]) << v;
    EXPECT_GT(m[metric]["p99"], 0) << metric << ": " << v;
  }
  EXPECT_LE(m["ttft_ms"]["p99"], m["e2e_ms"]["p99"]);
  EXPECT_LE(m["queue_ms"]["p50"], m["ttft_ms"]["p50"]);
  // INFER.STATS stories: latency => {samples, queue_ms => {p50, p90, p99}, ...} (RESP2: flat pairs).
  Reply r = command(c.get(), {"INFER.STATS", "stories"});
  ASSERT_TRUE(r);
  const redisReply* latency = nullptr;
  for (size_t i = 0; i + 1 < r->elements; i += 2)
    if (std::string(r->element[i]->str, r->element[i]->len) == "latency") latency = r->element[i + 1];
  ASSERT_NE(latency, nullptr) << show(r.get());
  EXPECT_EQ(show(latency).substr(0, 12), "[samples, 6,") << show(latency);
  EXPECT_NE(show(latency).find("ttft_ms, [p50, "), std::string::npos) << show(latency);
}

}  // namespace
}  // namespace infer::test
