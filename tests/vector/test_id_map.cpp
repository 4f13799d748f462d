// IdMap (src/vector/id_map.h): a map from names to ids like std::map through random operations, that
// splits into shards past kSplitAt so that no growth rehashes more than a shard's names.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "vector/id_map.h"

namespace infer::vector {
namespace {

TEST(IdMap, BehavesLikeAMapThroughRandomOperationsAcrossTheSplit) {
  IdMap m;
  std::map<std::string, uint32_t> truth;
  std::mt19937 rng(3);
  for (int step = 0; step < 300000; ++step) {
    const std::string name = "e" + std::to_string(rng() % 120000);
    switch (rng() % 4) {
      case 0:
      case 1: {
        const uint32_t id = rng();
        m.set(name, id);
        truth[name] = id;
        break;
      }
      case 2:
        EXPECT_EQ(m.erase(name), truth.erase(name) == 1);
        break;
      default: {
        auto it = truth.find(name);
        EXPECT_EQ(m.get(name), it == truth.end() ? std::nullopt : std::optional<uint32_t>(it->second));
      }
    }
    ASSERT_EQ(m.size(), truth.size());
  }
  for (const auto& [k, v] : truth) ASSERT_EQ(m.get(k), v);
  EXPECT_FALSE(m.contains("absent"));
}

TEST(IdMap, SplitsOnceAndKeepsShardsSmall) {
  IdMap m;
  for (uint32_t i = 0; i + 1 < IdMap::kSplitAt; ++i) m.set("n" + std::to_string(i), i);
  EXPECT_EQ(m.shards(), 1u);
  for (uint32_t i = IdMap::kSplitAt - 1; i < 4 * IdMap::kSplitAt; ++i) m.set("n" + std::to_string(i), i);
  EXPECT_EQ(m.shards(), IdMap::kShards);
  // 262,144 names over 256 shards: each near 1,024, none near the whole table.
  EXPECT_LT(m.largest_shard(), 2 * 4 * IdMap::kSplitAt / IdMap::kShards);
  for (uint32_t i = 0; i < 4 * IdMap::kSplitAt; i += 997) ASSERT_EQ(m.get("n" + std::to_string(i)), i);
  EXPECT_GT(m.memory_bytes(), m.size() * 32);
}

}  // namespace
}  // namespace infer::vector
