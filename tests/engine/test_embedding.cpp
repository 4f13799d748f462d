// Embedding requests on the real stories260K model: last and mean pooling, normalisation, and the
// claim that a mean-pooled vector does not depend on the prefix cache or on how prefill was chunked.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "engine_test_util.h"
#include "gguf/file.h"
#include "gguf/writer.h"

using namespace infer::engine;
using namespace infer::engine::test;

namespace {

// A prompt longer than two 16-token KV pages, so that the cache can hold whole pages of it.
std::vector<int32_t> long_prompt(Engine& e) {
  std::vector<int32_t> ids = e.tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day "
      "she saw a big red ball.");
  EXPECT_GE(ids.size(), 33u);
  return ids;
}

Request embed(std::vector<int32_t> ids, Pooling pooling, bool normalize) {
  Request r;
  r.prompt_ids = std::move(ids);
  r.embedding = true;
  r.pooling = pooling;
  r.normalize = normalize;
  return r;
}

std::vector<float> run_embed(Engine& e, Request r) {
  Collector c;
  submit_ok(e, std::move(r), c);
  EXPECT_TRUE(c.wait());
  EXPECT_EQ(c.result.finish, FinishReason::Stop) << c.result.error;
  EXPECT_EQ(c.result.embedding.size(), size_t(e.n_embd()));
  return c.result.embedding;
}

// stories260K with `llama.pooling_type` = `type` added, in the temp dir; removed on destruction.
struct PooledCopy {
  std::string path;
  explicit PooledCopy(uint32_t type) {
    path = (std::filesystem::temp_directory_path() /
            ("infer-engine-test-" + std::to_string(::getpid()) + "-pooling.gguf")).string();
    const auto src = infer::gguf::File::open(stories_path());
    infer::gguf::Writer w(src->alignment());
    for (const auto& [key, value] : src->metadata())
      if (key != "general.alignment") w.add_kv(key, value);
    w.add_kv("llama.pooling_type", infer::gguf::make_uint(infer::gguf::ValueType::UINT32, type));
    for (const auto& t : src->tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + (t.n_dims ? t.n_dims : 1)), t.data);
    w.write(path);
  }
  ~PooledCopy() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

double norm2(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += double(x) * x;
  return n;
}

}  // namespace

// Last pooling of the prefix [0, i] is position i's hidden state (invariant 7: a row's output does not
// depend on how its prefix was computed), so averaging those, summed in position order as the engine
// does, must reproduce the mean-pooled vector bit for bit.
TEST(Embedding, MeanIsAverageOfEveryPositionsHiddenState) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  const std::vector<int32_t> ids = long_prompt(*e);
  std::vector<double> sum(size_t(e->n_embd()), 0.0);
  for (size_t n = 1; n <= ids.size(); ++n) {
    std::vector<float> h = run_embed(*e, embed({ids.begin(), ids.begin() + long(n)}, Pooling::Last, false));
    for (size_t i = 0; i < h.size(); ++i) sum[i] += h[i];
  }
  std::vector<float> expected(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) expected[i] = float(sum[i] / double(ids.size()));

  EXPECT_EQ(run_embed(*e, embed(ids, Pooling::Mean, false)), expected);
  EXPECT_NE(run_embed(*e, embed(ids, Pooling::Last, false)), expected);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Embedding, MeanIsTheSameWithPrefixCacheWarmOrColdOrOff) {
  REQUIRE_STORIES();
  auto cold = Engine::create(small_options());
  const std::vector<int32_t> ids = long_prompt(*cold);
  const std::vector<float> reference = run_embed(*cold, embed(ids, Pooling::Mean, false));

  // Warm: a generation over the same prompt leaves its whole pages in the cache first.
  auto warm = Engine::create(small_options());
  Request gen;
  gen.prompt_ids = ids;
  gen.max_tokens = 4;
  gen.sampling.temperature = 0;
  Collector g;
  submit_ok(*warm, gen, g);
  ASSERT_TRUE(g.wait());
  ASSERT_GT(warm->stats().kv_pages_cached, 0);
  const uint64_t lookups = warm->stats().cache_lookups;
  Collector c;
  submit_ok(*warm, embed(ids, Pooling::Mean, false), c);
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.result.embedding, reference);
  EXPECT_EQ(c.result.timings.cached_tokens, 0);  // every position computed
  EXPECT_EQ(warm->stats().cache_lookups, lookups);
  // Last pooling does reuse the cache, and still gives what a cold engine gives.
  Collector last;
  submit_ok(*warm, embed(ids, Pooling::Last, false), last);
  ASSERT_TRUE(last.wait());
  EXPECT_GT(last.result.timings.cached_tokens, 0);
  EXPECT_EQ(last.result.embedding, run_embed(*cold, embed(ids, Pooling::Last, false)));

  EngineOptions o = small_options();
  o.prefix_cache = false;
  auto off = Engine::create(o);
  EXPECT_EQ(run_embed(*off, embed(ids, Pooling::Mean, false)), reference);
  EXPECT_TRUE(wait_pool_free(*cold));
  EXPECT_TRUE(wait_pool_free(*warm));
  EXPECT_TRUE(wait_pool_free(*off));
}

TEST(Embedding, MeanIsTheSameForEveryPrefillChunkSize) {
  REQUIRE_STORIES();
  auto whole = Engine::create(small_options());  // step_tokens 64: one chunk
  const std::vector<int32_t> ids = long_prompt(*whole);
  const std::vector<float> reference = run_embed(*whole, embed(ids, Pooling::Mean, false));
  for (int step_tokens : {1, 5, 16}) {
    EngineOptions o = small_options();
    o.step_tokens = step_tokens;
    auto e = Engine::create(o);
    EXPECT_EQ(run_embed(*e, embed(ids, Pooling::Mean, false)), reference) << "step_tokens " << step_tokens;
    EXPECT_TRUE(wait_pool_free(*e));
  }
}

// Several embeddings and a generation share steps: each gets its own rows' states.
TEST(Embedding, MeanInABatchWithOthersIsUnchanged) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.step_tokens = 7;
  auto e = Engine::create(o);
  const std::vector<int32_t> ids = long_prompt(*e);
  const std::vector<int32_t> shorter(ids.begin(), ids.begin() + 20);
  const std::vector<float> alone = run_embed(*e, embed(ids, Pooling::Mean, false));
  const std::vector<float> shorter_alone = run_embed(*e, embed(shorter, Pooling::Mean, false));
  Request gen;
  gen.prompt_ids = shorter;
  gen.max_tokens = 8;
  gen.sampling.temperature = 0;
  Collector a, b, g;
  submit_ok(*e, gen, g);
  submit_ok(*e, embed(ids, Pooling::Mean, false), a);
  submit_ok(*e, embed(shorter, Pooling::Mean, false), b);
  ASSERT_TRUE(a.wait());
  ASSERT_TRUE(b.wait());
  ASSERT_TRUE(g.wait());
  EXPECT_EQ(a.result.embedding, alone);
  EXPECT_EQ(b.result.embedding, shorter_alone);
  EXPECT_EQ(g.result.ids.size(), 8u);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Embedding, NormalizeScalesToUnitLengthOtherwiseRaw) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  const std::vector<int32_t> ids = long_prompt(*e);
  for (Pooling p : {Pooling::Last, Pooling::Mean}) {
    const std::vector<float> raw = run_embed(*e, embed(ids, p, false));
    const std::vector<float> unit = run_embed(*e, embed(ids, p, true));
    const double n = std::sqrt(norm2(raw));
    ASSERT_GT(std::abs(n - 1.0), 1e-3);  // the raw state is not unit length by chance
    EXPECT_NEAR(norm2(unit), 1.0, 1e-5);
    for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(unit[i], raw[i] / n, 1e-6) << i;
  }
  EXPECT_TRUE(wait_pool_free(*e));
}

// stories260K's GGUF has no pooling_type: the default is last-token pooling.
TEST(Embedding, DefaultPoolingIsLastWithoutModelMetadata) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  const std::vector<int32_t> ids = long_prompt(*e);
  EXPECT_EQ(run_embed(*e, embed(ids, Pooling::Default, true)), run_embed(*e, embed(ids, Pooling::Last, true)));
  EXPECT_TRUE(wait_pool_free(*e));
}

// A GGUF that says pooling_type = mean (1) makes mean the default; last (3) keeps last.
TEST(Embedding, DefaultPoolingFollowsModelPoolingType) {
  REQUIRE_STORIES();
  auto plain = Engine::create(small_options());
  const std::vector<int32_t> ids = long_prompt(*plain);
  const std::vector<float> mean = run_embed(*plain, embed(ids, Pooling::Mean, true));
  const std::vector<float> last = run_embed(*plain, embed(ids, Pooling::Last, true));
  for (uint32_t type : {1u, 3u}) {
    PooledCopy copy(type);
    EngineOptions o = small_options();
    o.model_path = copy.path;
    auto e = Engine::create(o);
    EXPECT_EQ(run_embed(*e, embed(ids, Pooling::Default, true)), type == 1 ? mean : last) << "pooling_type " << type;
    EXPECT_EQ(run_embed(*e, embed(ids, Pooling::Last, true)), last);  // an explicit choice wins
    EXPECT_TRUE(wait_pool_free(*e));
  }
}
