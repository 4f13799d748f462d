// Searches of one set from several threads at once (what INFER.VSIM's search threads do under the read
// lock) give exactly the sequential results: each thread keeps its own visited marks. Run under TSan too.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "vector/vector_set.h"
#include "vector_test_util.h"

using namespace infer::vector;
using namespace infer::test;

namespace {

}  // namespace

TEST(ConcurrentSearch, ThreadsGetTheSequentialResults) {
  std::mt19937 rng(41);
  VectorSet s({.dim = 16});
  for (int i = 0; i < 2000; ++i) s.add("e" + std::to_string(i), random_vec(16, rng));
  std::vector<std::vector<float>> queries;
  for (int q = 0; q < 64; ++q) queries.push_back(random_vec(16, rng));
  std::vector<std::vector<std::string>> expected;
  for (const auto& q : queries) expected.push_back(names(s.search(q, {.count = 10, .ef = 50})));

  std::vector<std::vector<std::vector<std::string>>> got(4, std::vector<std::vector<std::string>>(queries.size()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t q = 0; q < queries.size(); ++q) got[t][q] = names(s.search(queries[q], {.count = 10, .ef = 50}));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], expected) << "thread " << t;
}
