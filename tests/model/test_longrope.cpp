// LongRoPE binding (spec/architectures.md §2.1, §4.5): both factor tensors bound, the per-sequence
// context choosing between them once at load as llama.cpp does, and errors naming the defect.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf_variant.h"
#include "model/model.h"
#include "model/synth.h"

namespace infer::test {
namespace {

using model::Arch;

// A tiny random phi3 (context 1024, 16 rotary pairs) or llama with factors trained at 256 tokens.
class LongRope : public ::testing::Test {
 protected:
  std::string write(Arch arch) {
    path_ = (std::filesystem::temp_directory_path() /
             ("infer-longrope-" + std::to_string(::getpid()) + "-" + model::arch_name(arch) + ".gguf"))
                .string();
    model::SynthOptions o;
    o.arch = arch;
    o.threads = 1;
    o.longrope_orig_ctx = 256;
    model::write_synth(o, path_);
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  std::string path_;
};

std::unique_ptr<model::Model> load(const std::string& path, int context) {
  model::LoadOptions lo;
  lo.mmap = true;
  lo.context = context;
  return model::Model::load(path, lo);
}

std::string load_error(const gguf::File& src, const GgufVariant& v, const std::string& tag) {
  TempGguf tmp(src, v, tag);
  try {
    model::Model::load(tmp.path());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// llama.cpp rounds the per-sequence context up to a multiple of 256, then takes the long factors when
// it exceeds rope.scaling.original_context_length; 0 means the training context.
TEST_F(LongRope, ContextPicksShortOrLongFactorsAsLlamaCppDoes) {
  for (Arch arch : {Arch::Phi3, Arch::Llama}) {
    const std::string path = write(arch);
    struct Case {
      int context;
      bool want_long;
    };
    for (const Case c : {Case{1, false}, Case{200, false}, Case{256, false}, Case{257, true}, Case{512, true},
                         Case{0, true}}) {
      const auto m = load(path, c.context);
      const gguf::File& f = m->file();
      const void* want = f.tensor(c.want_long ? "rope_factors_long.weight" : "rope_factors_short.weight")->data;
      EXPECT_EQ(m->rope_long(), c.want_long) << model::arch_name(arch) << " context " << c.context;
      EXPECT_EQ(static_cast<const void*>(m->rope_factors()), want) << model::arch_name(arch) << " " << c.context;
      const model::HParams& hp = m->hparams();
      EXPECT_EQ(hp.n_ctx_orig, 256);
      // the converter's magnitude for the tiny shapes' contexts (phi3 1024, llama 4096)
      EXPECT_FLOAT_EQ(hp.rope_mscale, float(std::sqrt(1 + std::log(hp.n_ctx_train / 256.0) / std::log(256.0))));
    }
  }
}

TEST_F(LongRope, OneFactorTensorAloneIsAnError) {
  const auto src = gguf::File::open(write(Arch::Phi3));
  GgufVariant v;
  v.drop_tensors.insert("rope_factors_short.weight");
  EXPECT_EQ(load_error(*src, v, "no-short"),
            "tensor rope_factors_short.weight: missing: LongRoPE needs both factor tensors, and only "
            "rope_factors_long.weight is present");
  GgufVariant w;
  w.drop_tensors.insert("rope_factors_long.weight");
  EXPECT_EQ(load_error(*src, w, "no-long"),
            "tensor rope_factors_long.weight: missing: LongRoPE needs both factor tensors, and only "
            "rope_factors_short.weight is present");
}

TEST_F(LongRope, FactorsOfTheWrongLengthAreAnError) {
  const auto src = gguf::File::open(write(Arch::Phi3));
  const std::vector<float> ones(17, 1.f);  // n_rot/2 is 16
  GgufVariant v;
  v.put_tensors.push_back({"rope_factors_long.weight", gguf::TensorType::F32, {17}, ones.data()});
  EXPECT_EQ(load_error(*src, v, "long-17"), "tensor rope_factors_long.weight: has shape [17], expected [16]");
}

// Without factors a phi3 file keeps plain RoPE whatever the context.
TEST_F(LongRope, NoFactorsMeansPlainRope) {
  const auto src = gguf::File::open(write(Arch::Phi3));
  GgufVariant v;
  v.drop_tensors = {"rope_factors_long.weight", "rope_factors_short.weight"};
  TempGguf tmp(*src, v, "no-factors");
  const auto m = load(tmp.path(), 1024);
  EXPECT_EQ(m->rope_factors(), nullptr);
  EXPECT_FALSE(m->rope_long());
}

// What `infer synth --longrope-orig-ctx` writes: short factors a little above 1, long ones rising to
// n_ctx / n_ctx_orig, the converter's magnitude, and the original context.
TEST_F(LongRope, SynthWritesFactorsAndKeys) {
  const auto f = gguf::File::open(write(Arch::Phi3));
  const auto* lng = reinterpret_cast<const float*>(f->tensor("rope_factors_long.weight")->data);
  const auto* shrt = reinterpret_cast<const float*>(f->tensor("rope_factors_short.weight")->data);
  for (int i = 0; i < 16; ++i) {
    EXPECT_GE(shrt[i], 1.f);
    EXPECT_LT(shrt[i], 1.3f);
  }
  EXPECT_NEAR(lng[0], 1.f, 0.3f);
  EXPECT_NEAR(lng[15], 4.f, 1.2f);
  EXPECT_EQ(f->find("phi3.rope.scaling.original_context_length")->as_int(), 256);
  EXPECT_FLOAT_EQ(float(f->find("phi3.rope.scaling.attn_factor")->as_float()), 1.1180340f);
  EXPECT_EQ(f->find("phi3.rope.scaling.type"), nullptr);  // phi3's converter leaves it out
}

TEST(LongRopeSynth, ImpossibleOptionsAreRefused) {
  const std::string path = std::filesystem::temp_directory_path() / "infer-longrope-refused.gguf";
  model::SynthOptions o;
  o.arch = Arch::Qwen2;
  o.longrope_orig_ctx = 256;
  EXPECT_THROW(model::write_synth(o, path), std::invalid_argument);
  o.arch = Arch::Phi3;
  o.longrope_orig_ctx = 1024;  // the tiny phi3's whole context
  EXPECT_THROW(model::write_synth(o, path), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace infer::test
