#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "vector/serialize.h"
#include "vector/vector_set.h"
#include "vector_test_util.h"

using namespace infer::vector;
using namespace infer::test;

namespace {

// Recall@k of the graph search against the exact scan, averaged over `queries` random queries.
double recall(const VectorSet& set, size_t dim, int queries, size_t k, size_t ef, std::mt19937& rng) {
  size_t found = 0;
  for (int i = 0; i < queries; ++i) {
    auto q = random_vec(dim, rng);
    SearchOptions approx{.count = k, .ef = ef};
    SearchOptions exact{.count = k, .truth = true};
    auto a = names(set.search(q, approx));
    auto e = names(set.search(q, exact));
    std::set<std::string> truth(e.begin(), e.end());
    for (const auto& n : a) found += truth.count(n);
  }
  return double(found) / double(queries * k);
}
}  // namespace

TEST(VectorSet, AddReportsNewVersusUpdated) {
  VectorSet s({.dim = 3});
  EXPECT_TRUE(s.add("a", {1, 0, 0}));
  EXPECT_FALSE(s.add("a", {0, 1, 0}));
  EXPECT_EQ(s.size(), 1u);
  auto e = s.embedding("a");
  ASSERT_TRUE(e);
  EXPECT_NEAR((*e)[1], 1.0f, 0.01f);
}

TEST(VectorSet, EmbeddingUndoesNormalisation) {
  VectorSet s({.dim = 4, .quant = Quant::F32});
  s.add("x", {3, 4, 0, 0});
  auto e = s.embedding("x");
  ASSERT_TRUE(e);
  EXPECT_FLOAT_EQ((*e)[0], 3.0f);
  EXPECT_FLOAT_EQ((*e)[1], 4.0f);
  auto raw = s.raw("x");
  ASSERT_TRUE(raw);
  EXPECT_FLOAT_EQ(raw->norm, 5.0f);
  EXPECT_EQ(raw->bytes.size(), 16u);
}

TEST(VectorSet, RejectsWrongDimension) {
  VectorSet s({.dim = 3});
  EXPECT_THROW(s.add("a", {1, 2}), VectorSetError);
  EXPECT_EQ(s.size(), 0u);  // nothing changed
  EXPECT_THROW(s.search({1, 2}, {}), VectorSetError);
  EXPECT_THROW(s.search_element("nope", {}), VectorSetError);
  EXPECT_THROW(VectorSet({.dim = 0}), VectorSetError);
  EXPECT_THROW(VectorSet({.dim = 3, .m = 2}), VectorSetError);
}

TEST(VectorSet, AttributesSetGetAndRemove) {
  VectorSet s({.dim = 2});
  s.add("a", {1, 0}, std::string(R"({"k": 1})"));
  EXPECT_EQ(*s.attributes("a"), R"({"k": 1})");
  EXPECT_EQ(s.attributes_count(), 1u);
  s.add("a", {0, 1});  // re-add without SETATTR keeps them
  EXPECT_EQ(*s.attributes("a"), R"({"k": 1})");
  EXPECT_TRUE(s.set_attributes("a", ""));
  EXPECT_EQ(*s.attributes("a"), "");
  EXPECT_EQ(s.attributes_count(), 0u);
  EXPECT_FALSE(s.set_attributes("b", "{}"));
  EXPECT_FALSE(s.attributes("b"));
  // Any text is kept (Redis 8 keeps it); FILTER reads only JSON objects.
  EXPECT_TRUE(s.set_attributes("a", "{"));
  EXPECT_EQ(*s.attributes("a"), "{");
}

TEST(VectorSet, PreparedAddBuildsTheGraphAPlainAddBuilds) {
  // The same inserts into two sets, one through prepare_add/add_prepared (VADD ... CAS), with removals
  // between some preparations and their commits: every node ends with the same links.
  std::mt19937 rng(9);
  VectorSet plain({.dim = 8}), cas({.dim = 8});
  std::vector<std::vector<float>> vs;
  for (int i = 0; i < 400; ++i) vs.push_back(random_vec(8, rng));
  for (int i = 0; i < 400; ++i) {
    const std::string name = "e" + std::to_string(i);
    const auto prepared = cas.prepare_add(vs[i]);
    if (i % 3 == 0 && i > 10) {  // the set changes before the commit
      const std::string gone = "e" + std::to_string(i - 7);
      plain.remove(gone);
      cas.remove(gone);
    }
    plain.add(name, vs[i]);
    ASSERT_TRUE(cas.add_prepared(name, prepared, std::nullopt));
  }
  ASSERT_EQ(plain.size(), cas.size());
  for (int i = 0; i < 400; ++i) {
    const std::string name = "e" + std::to_string(i);
    const auto a = plain.neighbours(name), b = cas.neighbours(name);
    ASSERT_EQ(a.has_value(), b.has_value()) << name;
    if (!a) continue;
    ASSERT_EQ(a->size(), b->size()) << name;
    for (size_t l = 0; l < a->size(); ++l) {
      ASSERT_EQ((*a)[l].size(), (*b)[l].size()) << name;
      for (size_t k = 0; k < (*a)[l].size(); ++k) EXPECT_EQ(*(*a)[l][k].first, *(*b)[l][k].first) << name;
    }
  }
  EXPECT_FALSE(cas.add_prepared("e399", cas.prepare_add(vs[0]), std::nullopt));  // exists: nothing changes
  EXPECT_EQ(cas.size(), plain.size());
}

TEST(VectorSet, FilteredSearchReturnsOnlyMatches) {
  std::mt19937 rng(5);
  VectorSet s({.dim = 16});
  for (int i = 0; i < 500; ++i)
    s.add("e" + std::to_string(i), random_vec(16, rng), "{\"n\": " + std::to_string(i) + "}");
  auto f = Filter::parse(".n % 10 == 3");
  SearchOptions opt{.count = 5, .filter = &f};
  auto hits = s.search(random_vec(16, rng), opt);
  ASSERT_EQ(hits.size(), 5u);
  for (const auto& h : hits) EXPECT_EQ(h.name->back(), '3') << *h.name;
  opt.truth = true;
  auto exact = s.search(random_vec(16, rng), opt);
  for (const auto& h : exact) EXPECT_EQ(h.name->back(), '3');
  // Scores are sorted, best first.
  for (size_t i = 1; i < hits.size(); ++i) EXPECT_GE(hits[i - 1].score, hits[i].score);
}

TEST(VectorSet, SearchByElementFindsItselfFirst) {
  std::mt19937 rng(6);
  VectorSet s({.dim = 8, .quant = Quant::F32});
  for (int i = 0; i < 100; ++i) s.add("e" + std::to_string(i), random_vec(8, rng));
  auto hits = s.search_element("e42", {.count = 3});
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(*hits[0].name, "e42");
  EXPECT_NEAR(hits[0].score, 1.0f, 1e-5);
}

TEST(VectorSet, RemoveReallyRemovesAndKeepsGraphSearchable) {
  std::mt19937 rng(7);
  const size_t dim = 32;
  VectorSet s({.dim = dim});
  for (int i = 0; i < 2000; ++i) s.add("e" + std::to_string(i), random_vec(dim, rng));
  const size_t before = s.memory_bytes();
  for (int i = 0; i < 2000; i += 2) ASSERT_TRUE(s.remove("e" + std::to_string(i)));
  EXPECT_FALSE(s.remove("e0"));
  EXPECT_EQ(s.size(), 1000u);
  EXPECT_LT(s.memory_bytes(), before * 3 / 4);
  // No link anywhere still points at a removed node.
  const Hnsw& g = s.index();
  for (uint32_t id = 0; id < g.slots(); ++id) {
    if (!g.contains(id)) continue;
    for (int lv = 0; lv <= g.level(id); ++lv)
      for (uint32_t t : g.links(id, lv)) ASSERT_TRUE(g.contains(t));
  }
  // Removed names never come back from a search, and what remains is still found well.
  for (int q = 0; q < 20; ++q)
    for (const auto& h : s.search(random_vec(dim, rng), {.count = 10}))
      EXPECT_EQ(std::stoi(h.name->substr(1)) % 2, 1);
  EXPECT_GE(recall(s, dim, 50, 10, 200, rng), 0.95);
  // Emptying the set frees every slot.
  for (int i = 1; i < 2000; i += 2) s.remove("e" + std::to_string(i));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.max_node_id(), 0u);
  EXPECT_TRUE(s.search(random_vec(dim, rng), {}).empty());
}

TEST(VectorSet, RecallAt10AtLeast95PercentOn5000Random64dVectors) {
  std::mt19937 rng(8);
  const size_t dim = 64;
  VectorSet s({.dim = dim});
  for (int i = 0; i < 5000; ++i) s.add("e" + std::to_string(i), random_vec(dim, rng));
  const double r = recall(s, dim, 100, 10, 200, rng);
  std::printf("recall@10 (5000 x 64d, Q8, M 16, EF 200) = %.3f\n", r);
  EXPECT_GE(r, 0.95);
}

TEST(Serialize, RoundTripKeepsEverything) {
  std::mt19937 rng(9);
  for (Quant q : {Quant::F32, Quant::Q8, Quant::Bin}) {
    VectorSet s({.dim = 24, .quant = q, .m = 8});
    for (int i = 0; i < 300; ++i)
      s.add("e" + std::to_string(i), random_vec(24, rng), i % 3 ? std::string() : "{\"i\": " + std::to_string(i) + "}");
    for (int i = 0; i < 300; i += 7) s.remove("e" + std::to_string(i));  // holes in the id space
    const std::string bytes = to_bytes(s);
    auto t = from_bytes(bytes);
    ASSERT_EQ(t->size(), s.size());
    EXPECT_EQ(t->attributes_count(), s.attributes_count());
    EXPECT_EQ(t->config().quant, q);
    EXPECT_EQ(t->config().m, 8u);
    EXPECT_EQ(to_bytes(*t), bytes);  // same graph, same bytes
    s.for_each([&](const std::string& name, const std::vector<float>& v, const std::string& attrs) {
      EXPECT_EQ(*t->embedding(name), v);
      EXPECT_EQ(*t->attributes(name), attrs);
    });
    auto query = random_vec(24, rng);
    EXPECT_EQ(names(t->search(query, {})), names(s.search(query, {})));
    // The same later inserts keep both answering alike (ids differ: the loaded set has no holes).
    auto v = random_vec(24, rng);
    s.add("new", v);
    t->add("new", v);
    for (int i = 0; i < 5; ++i) {
      auto q2 = random_vec(24, rng);
      EXPECT_EQ(names(t->search(q2, {})), names(s.search(q2, {})));
    }
  }
}

TEST(Serialize, RejectsCorruptInput) {
  std::mt19937 rng(10);
  VectorSet s({.dim = 8});
  for (int i = 0; i < 50; ++i) s.add("e" + std::to_string(i), random_vec(8, rng));
  const std::string bytes = to_bytes(s);
  EXPECT_THROW(from_bytes(bytes.substr(0, bytes.size() - 3)), VectorSetError);
  EXPECT_THROW(from_bytes(bytes + "x"), VectorSetError);
  EXPECT_THROW(from_bytes(""), VectorSetError);
  std::string bad_version = bytes;
  bad_version[0] = 9;
  EXPECT_THROW(from_bytes(bad_version), VectorSetError);
  // Flipping any single byte either still loads a valid set or throws; it never crashes.
  for (size_t i = 4; i < bytes.size(); i += 3) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x5a);
    try {
      from_bytes(b);
    } catch (const VectorSetError&) {
    }
  }
  VectorSet empty({.dim = 5});
  EXPECT_EQ(from_bytes(to_bytes(empty))->size(), 0u);
}
