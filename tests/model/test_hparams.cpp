// read_hparams: values of the real files, defaults, exact key types, and errors that name the key.
#include <gtest/gtest.h>

#include <string>

#include "gguf/writer.h"
#include "gguf_variant.h"
#include "model/hparams.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using gguf::ValueType;
using model::Arch;

std::string stories() { return models_dir() + "/stories260K.gguf"; }

// read_hparams of stories260K modified by `v`; the error text, or "" when it loads.
std::string error_of(const GgufVariant& v, const std::string& tag, model::HParams* out = nullptr) {
  const auto src = gguf::File::open(stories());
  TempGguf tmp(*src, v, tag);
  const auto f = gguf::File::open(tmp.path());
  try {
    const model::HParams hp = model::read_hparams(*f);
    if (out) *out = hp;
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(HParams, Stories260K) {
  INFER_REQUIRE_DIR(models_dir());
  const auto hp = model::read_hparams(*gguf::File::open(stories()));
  EXPECT_EQ(hp.arch, Arch::Llama);
  EXPECT_EQ(hp.arch_name, "llama");
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(hp.n_ctx_train, 2048);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_kv_head, 4);
  EXPECT_EQ(hp.head_dim, 8);
  EXPECT_EQ(hp.n_ff, 172);
  EXPECT_EQ(hp.n_rot, 8);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_EQ(hp.rope_freq_base, 10000.f);  // key absent: the default
  EXPECT_EQ(hp.rope_freq_scale, 1.f);
  EXPECT_FALSE(hp.tied_output);
  EXPECT_EQ(hp.pooling_type, -1);  // key absent
  EXPECT_EQ(hp.kv_bytes_per_token(), 5u * 2 * 32 * 2);
}

TEST(HParams, PoolingTypeIsReadWhenPresent) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.pooling_type"] = gguf::make_uint(ValueType::UINT32, 1);
  model::HParams hp;
  ASSERT_EQ(error_of(v, "pooling", &hp), "");
  EXPECT_EQ(hp.pooling_type, 1);
  v.kv["llama.pooling_type"] = gguf::make_string("mean");
  const std::string e = error_of(v, "pooling_string");
  EXPECT_NE(e.find("llama.pooling_type"), std::string::npos) << e;
}

TEST(HParams, Qwen3HeadDimComesFromKeyLength) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto hp = model::read_hparams(*gguf::File::open(reference_dir() + "/models/tiny-qwen3-f32.gguf"));
  EXPECT_EQ(hp.arch, Arch::Qwen3);
  EXPECT_EQ(hp.n_embd, 256);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.head_dim, 128);  // not n_embd / n_head = 64
  EXPECT_EQ(hp.q_dim(), 512);
  EXPECT_EQ(hp.kv_dim(), 256);
  EXPECT_EQ(hp.rope_freq_base, 1e6f);
}

TEST(HParams, Qwen2HeadsComeFromItsKeys) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto hp = model::read_hparams(*gguf::File::open(reference_dir() + "/models/tiny-qwen2-f16.gguf"));
  EXPECT_EQ(hp.arch, Arch::Qwen2);
  EXPECT_EQ(hp.n_kv_head, 2);
  EXPECT_EQ(hp.head_dim, 32);
}

TEST(HParams, WrongKeyTypeIsAnErrorNamingTheKey) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.block_count"] = gguf::make_uint(ValueType::UINT64, 5);
  const std::string e = error_of(v, "wrongtype");
  EXPECT_NE(e.find("llama.block_count"), std::string::npos) << e;
  EXPECT_NE(e.find("wrong type"), std::string::npos) << e;

  GgufVariant f;
  f.kv["llama.attention.layer_norm_rms_epsilon"] = gguf::make_float(ValueType::FLOAT64, 1e-5);
  EXPECT_NE(error_of(f, "wrongtype2").find("layer_norm_rms_epsilon: has wrong type FLOAT64, expected FLOAT32"), std::string::npos);
}

TEST(HParams, MissingRequiredKeyIsAnErrorNamingTheKey) {
  INFER_REQUIRE_DIR(models_dir());
  for (const char* key : {"llama.embedding_length", "llama.context_length", "llama.block_count",
                          "llama.attention.layer_norm_rms_epsilon", "llama.feed_forward_length"}) {
    GgufVariant v;
    v.kv[key] = std::nullopt;
    const std::string e = error_of(v, "missing");
    EXPECT_NE(e.find(std::string(key) + ": missing"), std::string::npos) << e;
  }
}

TEST(HParams, UnsupportedArchitectureIsAClearError) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["general.architecture"] = gguf::make_string("mamba");
  const std::string e = error_of(v, "arch");
  EXPECT_NE(e.find("unsupported model architecture 'mamba' (supported: llama, qwen2, qwen3, gemma3, phi3, qwen3moe, bert)"),
            std::string::npos)
      << e;
}

TEST(HParams, OptionalKeysHaveTheirDefaults) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.rope.dimension_count"] = std::nullopt;
  v.kv["llama.attention.head_count_kv"] = std::nullopt;
  model::HParams hp;
  ASSERT_EQ(error_of(v, "defaults", &hp), "");
  EXPECT_EQ(hp.n_rot, 8);      // = head_dim
  EXPECT_EQ(hp.n_kv_head, 8);  // = head_count
}

TEST(HParams, LinearRopeScalingSetsFreqScale) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.rope.scaling.factor"] = gguf::make_float(ValueType::FLOAT32, 4.0);
  model::HParams hp;
  ASSERT_EQ(error_of(v, "linear", &hp), "");
  EXPECT_EQ(hp.rope_freq_scale, 0.25f);

  v.kv["llama.rope.scaling.type"] = gguf::make_string("none");
  ASSERT_EQ(error_of(v, "none", &hp), "");
  EXPECT_EQ(hp.rope_freq_scale, 1.f);

  GgufVariant old_name;
  old_name.kv["llama.rope.scale_linear"] = gguf::make_float(ValueType::FLOAT32, 2.0);
  ASSERT_EQ(error_of(old_name, "scale_linear", &hp), "");
  EXPECT_EQ(hp.rope_freq_scale, 0.5f);
}

TEST(HParams, UnsupportedRopeScalingIsRefused) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.rope.scaling.type"] = gguf::make_string("yarn");
  EXPECT_EQ(error_of(v, "yarn"), "model metadata key llama.rope.scaling.type: RoPE scaling 'yarn' is not supported");
  v.kv["llama.rope.scaling.type"] = gguf::make_string("bogus");
  EXPECT_NE(error_of(v, "bogus").find("unknown RoPE scaling 'bogus'"), std::string::npos);
}

// LongRoPE's keys: the magnitude (attn_factor, default 1) and the original context (default the
// training context); llama may declare the type, as phi3 files may (they usually leave it out).
TEST(HParams, LongRopeKeysAreRead) {
  INFER_REQUIRE_DIR(models_dir());
  model::HParams hp;
  ASSERT_EQ(error_of(GgufVariant{}, "plain", &hp), "");
  EXPECT_EQ(hp.rope_mscale, 1.f);
  EXPECT_EQ(hp.n_ctx_orig, hp.n_ctx_train);
  GgufVariant v;
  v.kv["llama.rope.scaling.type"] = gguf::make_string("longrope");
  v.kv["llama.rope.scaling.attn_factor"] = gguf::make_float(ValueType::FLOAT32, 1.25);
  v.kv["llama.rope.scaling.original_context_length"] = gguf::make_uint(ValueType::UINT32, 64);
  ASSERT_EQ(error_of(v, "longrope", &hp), "");
  EXPECT_EQ(hp.rope_mscale, 1.25f);
  EXPECT_EQ(hp.n_ctx_orig, 64);
  EXPECT_EQ(hp.rope_freq_scale, 1.f);
  v.kv["llama.rope.scaling.attn_factor"] = gguf::make_float(ValueType::FLOAT32, 0.0);
  EXPECT_EQ(error_of(v, "attn0"), "model metadata key llama.rope.scaling.attn_factor: must be a finite positive number");
}

TEST(HParams, LongRopeIsRefusedForArchitecturesWithoutFactors) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto src = gguf::File::open(reference_dir() + "/models/tiny-qwen2-q8_0.gguf");
  GgufVariant v;
  v.kv["qwen2.rope.scaling.type"] = gguf::make_string("longrope");
  TempGguf tmp(*src, v, "qwen2-longrope");
  try {
    model::read_hparams(*gguf::File::open(tmp.path()));
    FAIL() << "qwen2 accepted longrope";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "model metadata key qwen2.rope.scaling.type: RoPE scaling 'longrope' is not supported for qwen2");
  }
}

TEST(HParams, PerLayerArraysAreAccepted) {
  INFER_REQUIRE_DIR(models_dir());
  std::vector<gguf::Value> five(5, gguf::make_int(ValueType::INT32, 4));
  GgufVariant v;
  v.kv["llama.attention.head_count_kv"] = gguf::make_array(ValueType::INT32, five);
  model::HParams hp;
  ASSERT_EQ(error_of(v, "array", &hp), "");
  EXPECT_EQ(hp.n_kv_head, 4);

  five.pop_back();
  v.kv["llama.attention.head_count_kv"] = gguf::make_array(ValueType::INT32, five);
  EXPECT_NE(error_of(v, "array-short").find("4 entries, expected block_count 5"), std::string::npos);
}

TEST(HParams, RopeDimensionMustEqualHeadDim) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.kv["llama.rope.dimension_count"] = gguf::make_uint(ValueType::UINT32, 4);
  EXPECT_NE(error_of(v, "nrot").find("llama.rope.dimension_count"), std::string::npos);
}

}  // namespace
}  // namespace infer::test
