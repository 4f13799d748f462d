// Removal (and insertion) keep every node reachable: graphs at M 2..16, emptied in insertion order and in
// random orders, are walked from the entry point after each removal (every node on every level must be
// reached), and at M 4 and above a search with a beam as wide as the graph finds each remaining node
// from its own vector.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "vector/hnsw.h"
#include "vector/vector_set.h"
#include "vector_test_util.h"

using namespace infer::vector;
using namespace infer::test;

namespace {

std::vector<uint8_t> encoded(const std::vector<float>& v, Quant q) {
  std::vector<float> unit = v;
  normalize(unit.data(), unit.size());
  std::vector<uint8_t> out(encoded_size(q, unit.size()));
  encode(q, unit.data(), unit.size(), out.data());
  return out;
}

// Every node reachable on every level (the walk a search can take: Hnsw::unreachable); with
// `search_all`, each found by a search for its own vector with a beam as wide as the graph. Sets take
// M from 4; below that a level-0 graph of 4 or 6 links per node is too sparse for every greedy start
// to reach every node, and only the walk is checked.
// `label` maps ids to the caller's names, for the messages.
void expect_sound(const Hnsw& g, const std::vector<int>& label, bool search_all, const std::string& what) {
  for (int lv = 0; lv <= g.max_level(); ++lv) {
    const auto lost = g.unreachable(lv);
    ASSERT_TRUE(lost.empty()) << what << ": " << lost.size() << " unreachable on level " << lv << ", e.g. node "
                              << label[lost[0]];
  }
  if (!search_all) return;
  for (uint32_t id = 0; id < g.slots(); ++id) {
    const auto hits = g.search(g.vector(id), g.size(), g.size());
    const bool found = std::any_of(hits.begin(), hits.end(), [id](const Hnsw::Hit& h) { return h.id == id; });
    ASSERT_TRUE(found) << what << ": a full-width search does not find node " << label[id];
  }
}

void build_and_empty(uint32_t m, size_t n, size_t dim, bool random_order, uint32_t seed) {
  std::mt19937 rng(seed);
  Hnsw g({.quant = Quant::Q8, .dim = static_cast<uint32_t>(dim), .m = m, .ef_construction = 100});
  std::vector<int> label;  // by id
  for (size_t i = 0; i < n; ++i) {
    const auto e = encoded(random_vec(dim, rng), Quant::Q8);
    ASSERT_EQ(g.insert(e.data(), i), label.size());
    label.push_back(static_cast<int>(i));
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (random_order) std::shuffle(order.begin(), order.end(), rng);
  const std::string run = "M " + std::to_string(m) + (random_order ? " random order" : " insertion order") +
                          ", dim " + std::to_string(dim);
  expect_sound(g, label, m >= 4, run);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto id = static_cast<uint32_t>(std::find(label.begin(), label.end(), order[k]) - label.begin());
    ASSERT_LT(id, label.size());
    if (const auto moved = g.remove(id)) label[id] = label[*moved];
    label.pop_back();
    ASSERT_EQ(g.size(), label.size());
    expect_sound(g, label, m >= 4 && (k % 16 == 0 || label.size() < 24),
                 run + ", after removing " + std::to_string(order[k]));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace

TEST(HnswRemoval, EveryNodeStaysReachableAtEveryMInInsertionOrder) {
  for (uint32_t m = 2; m <= 16; ++m) {
    build_and_empty(m, 300, 4, false, 100 + m);
    build_and_empty(m, 300, 16, false, 200 + m);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(HnswRemoval, EveryNodeStaysReachableAtEveryMInRandomOrders) {
  for (uint32_t m = 2; m <= 16; ++m) {
    build_and_empty(m, 300, 4, true, 300 + m);
    build_and_empty(m, 300, 16, true, 400 + m);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The shape through the set: M 4, 80 elements removed in insertion order, each remaining one
// found by VSIM ELE with a wide beam. The seeds and dimensions are ones where the removal without
// repair lost an element (found by scanning 800 such sets: 5 lost one).
TEST(HnswRemoval, SearchByElementFindsItselfAfterEveryRemoval) {
  for (const auto& [seed, dim] : {std::pair{9u, 8u}, {120u, 8u}, {159u, 8u}, {181u, 4u}, {191u, 4u}}) {
    const uint32_t m = 4;
    std::mt19937 rng(seed);
    VectorSet s({.dim = dim, .m = m});
    const int n = 80;
    for (int i = 0; i < n; ++i) s.add("item:" + std::to_string(i), random_vec(dim, rng));
    for (int r = 0; r < n - 1; ++r) {
      ASSERT_TRUE(s.remove("item:" + std::to_string(r)));
      for (int i = r + 1; i < n; ++i) {
        const std::string name = "item:" + std::to_string(i);
        const auto hits = names(s.search_element(name, {.count = 3, .ef = 500}));
        ASSERT_NE(std::find(hits.begin(), hits.end(), name), hits.end()) << "seed " << seed << ", after removing item:" << r;
      }
      ASSERT_EQ(s.search(random_vec(dim, rng), {.count = 1000, .ef = 1000}).size(), s.size()) << "seed " << seed << " r " << r;
    }
  }
}

// Inserts of the widest float vectors (65,536-d, 256 KiB each) run out of their distance budget
// (Hnsw::kInsertBytes) in a set of a few hundred: the search stops early, selection takes the nearest
// and full nodes swap links without measuring them. The graph must stay sound, each node found at the
// ordinary beam by its own vector, and after removals too.
TEST(HnswRemoval, InsertsPastTheDistanceBudgetKeepTheGraphSound) {
  const size_t dim = 65536, n = 300;
  std::mt19937 rng(7);
  Hnsw g({.quant = Quant::F32, .dim = static_cast<uint32_t>(dim), .m = 16, .ef_construction = 200});
  std::vector<int> label;
  for (size_t i = 0; i < n; ++i) {
    const auto e = encoded(random_vec(dim, rng), Quant::F32);
    ASSERT_EQ(g.insert(e.data(), i), label.size());
    label.push_back(static_cast<int>(i));
  }
  expect_sound(g, label, false, "65,536-d F32");
  size_t found = 0;
  for (uint32_t id = 0; id < g.slots(); ++id) {
    const auto hits = g.search(g.vector(id), 1, 200);
    found += !hits.empty() && hits[0].id == id;
  }
  EXPECT_EQ(found, g.slots()) << "nodes found first by their own vector at EF 200";
  for (int k = 0; k < 100; ++k) {
    const uint32_t id = static_cast<uint32_t>(rng() % g.slots());
    if (const auto moved = g.remove(id)) label[id] = label[*moved];
    label.pop_back();
  }
  expect_sound(g, label, false, "65,536-d F32 after 100 removals");
}
