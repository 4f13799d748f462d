// The stored vectors of quant.h: encoding and decoding in each Quant, and the distances between encoded
// vectors (scalar references here, AVX2 versions in distance_avx2.cpp, picked once at run time).
#include "vector/quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "vector/distance_simd.h"

namespace infer::vector {

const char* quant_name(Quant q) {
  switch (q) {
    case Quant::F32: return "f32";
    case Quant::Q8: return "int8";
    case Quant::Bin: return "bin";
  }
  return "?";
}

const char* quant_raw_name(Quant q) {
  switch (q) {
    case Quant::F32: return "fp32";
    case Quant::Q8: return "q8";
    case Quant::Bin: return "bin";
  }
  return "?";
}

std::optional<Quant> quant_from_byte(uint8_t b) {
  if (b > 2) return std::nullopt;
  return static_cast<Quant>(b);
}

size_t encoded_size(Quant q, size_t dim) {
  switch (q) {
    case Quant::F32: return 4 * dim;
    case Quant::Q8: return 4 + dim;
    case Quant::Bin: return (dim + 7) / 8;
  }
  return 0;
}

void encode(Quant q, const float* x, size_t dim, uint8_t* out) {
  switch (q) {
    case Quant::F32:
      std::memcpy(out, x, 4 * dim);
      return;
    case Quant::Q8: {
      // Components scale to ±127 by the largest; the stored scale is 1/|q|, so the decoded vector is
      // exactly unit length. Re-adding a decoded vector (AOF rewrite) then gives back the same bytes.
      float max_abs = 0;
      for (size_t i = 0; i < dim; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
      const float inv = max_abs > 0 ? 127.0f / max_abs : 0.0f;
      auto* q8 = reinterpret_cast<int8_t*>(out + 4);
      int64_t sum_sq = 0;
      for (size_t i = 0; i < dim; ++i) {
        q8[i] = static_cast<int8_t>(std::lround(std::clamp(x[i] * inv, -127.0f, 127.0f)));
        sum_sq += int64_t(q8[i]) * q8[i];
      }
      const float scale = sum_sq > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(sum_sq))) : 0.0f;
      std::memcpy(out, &scale, 4);
      return;
    }
    case Quant::Bin:
      std::memset(out, 0, (dim + 7) / 8);
      for (size_t i = 0; i < dim; ++i)
        if (x[i] > 0) out[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
      return;
  }
}

bool plausible_encoding(Quant q, const uint8_t* in, size_t dim) {
  constexpr double kTolerance = 0.01;  // encode() is exact to float rounding; older data, subnormal norms
  switch (q) {
    case Quant::F32: {
      double sum = 0;
      for (size_t i = 0; i < dim; ++i) {
        float x;
        std::memcpy(&x, in + 4 * i, 4);
        if (!std::isfinite(x)) return false;
        sum += double(x) * x;
      }
      return sum == 0 || std::fabs(std::sqrt(sum) - 1) <= kTolerance;
    }
    case Quant::Q8: {
      float scale;
      std::memcpy(&scale, in, 4);
      const auto* q8 = reinterpret_cast<const int8_t*>(in + 4);
      int64_t sum_sq = 0;
      for (size_t i = 0; i < dim; ++i) {
        if (q8[i] == -128) return false;  // encode() clamps to ±127
        sum_sq += int64_t(q8[i]) * q8[i];
      }
      if (!std::isfinite(scale) || scale < 0) return false;
      if (sum_sq == 0 || scale == 0) return sum_sq == 0 && scale == 0;
      return std::fabs(scale * std::sqrt(static_cast<double>(sum_sq)) - 1) <= kTolerance;
    }
    case Quant::Bin:
      return true;  // any bit pattern is a vector of ±1/sqrt(dim)
  }
  return false;
}

void decode(Quant q, const uint8_t* in, size_t dim, float* out) {
  switch (q) {
    case Quant::F32:
      std::memcpy(out, in, 4 * dim);
      return;
    case Quant::Q8: {
      float scale;
      std::memcpy(&scale, in, 4);
      const auto* q8 = reinterpret_cast<const int8_t*>(in + 4);
      for (size_t i = 0; i < dim; ++i) out[i] = q8[i] * scale;
      return;
    }
    case Quant::Bin: {
      // Signs only: ±1/sqrt(dim) keeps the decoded vector unit length.
      const float v = 1.0f / std::sqrt(static_cast<float>(dim));
      for (size_t i = 0; i < dim; ++i) out[i] = (in[i / 8] >> (i % 8)) & 1 ? v : -v;
      return;
    }
  }
}

namespace reference {

float dot_f32(const float* a, const float* b, size_t dim) {
  // Four partial sums let the compiler vectorise without -ffast-math.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < dim; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim) {
  int32_t s = 0;
  for (size_t i = 0; i < dim; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

uint32_t hamming(const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  uint32_t differ = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    differ += std::popcount(x ^ y);
  }
  for (; i < n; ++i) differ += std::popcount(static_cast<uint8_t>(a[i] ^ b[i]));
  return differ;
}

}  // namespace reference

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

namespace {

// Stored vectors sit in byte buffers; F32 ones are read as floats (the buffers are 4-byte aligned).
template <float (*Dot)(const float*, const float*, size_t)>
float f32_distance(const uint8_t* a, const uint8_t* b, size_t dim) {
  return 1.0f - Dot(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b), dim);
}

template <int32_t (*Dot)(const int8_t*, const int8_t*, size_t)>
float q8_distance(const uint8_t* a, const uint8_t* b, size_t dim) {
  float sa, sb;
  std::memcpy(&sa, a, 4);
  std::memcpy(&sb, b, 4);
  const int32_t d = Dot(reinterpret_cast<const int8_t*>(a + 4), reinterpret_cast<const int8_t*>(b + 4), dim);
  return 1.0f - static_cast<float>(d) * sa * sb;
}

template <uint32_t (*Hamming)(const uint8_t*, const uint8_t*, size_t)>
float bin_distance(const uint8_t* a, const uint8_t* b, size_t dim) {
  // cos ≈ 1 - 2·hamming/dim, so 1 - cos = 2·hamming/dim.
  return 2.0f * static_cast<float>(Hamming(a, b, (dim + 7) / 8)) / static_cast<float>(dim);
}

}  // namespace

DistanceFn reference_distance_fn(Quant q) {
  switch (q) {
    case Quant::F32: return f32_distance<reference::dot_f32>;
    case Quant::Q8: return q8_distance<reference::dot_i8>;
    case Quant::Bin: return bin_distance<reference::hamming>;
  }
  return bin_distance<reference::hamming>;
}

DistanceFn distance_fn(Quant q) {
  if (!cpu_has_avx2_fma()) return reference_distance_fn(q);
  switch (q) {
    case Quant::F32: return f32_distance<avx2::dot_f32>;
    case Quant::Q8: return q8_distance<avx2::dot_i8>;
    case Quant::Bin: return bin_distance<avx2::hamming>;
  }
  return bin_distance<avx2::hamming>;
}

float distance(Quant q, const uint8_t* a, const uint8_t* b, size_t dim) { return distance_fn(q)(a, b, dim); }

double normalize(float* x, size_t dim) {
  // In double throughout: the norm of finite floats can exceed the float range (3 × 3e38 components).
  double sum = 0;
  for (size_t i = 0; i < dim; ++i) sum += double(x[i]) * x[i];
  const double norm = std::sqrt(sum);
  if (norm > 0)
    for (size_t i = 0; i < dim; ++i) x[i] = static_cast<float>(x[i] / norm);
  return norm;
}

}  // namespace infer::vector
