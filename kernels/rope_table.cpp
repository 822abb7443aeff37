// MODEL.md §4.6 with decision D8: pw_i = fl32(base^(2i/rd)) correctly rounded (via f64
// pow), freq_i = fl32(1 / pw_i), the YaRN blend in f32, angle = fl32(fl32(p) * freq_i),
// cos/sin evaluated in f64 and rounded to f32.
#include "kernels/rope_table.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace dsv4 {

namespace {

// YaRN correction dimension (f64, as the reference's Python scalars).
double correction_dim(double rotations, int rope_dim, double base, double original_len) {
  return rope_dim * std::log(original_len / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

RopeTable make_rope_table(double base, int rope_dim, int64_t positions, const YarnConfig* yarn) {
  DSV4_CHECK(rope_dim > 0 && rope_dim % 2 == 0, "rope_dim=", rope_dim);
  const int half = rope_dim / 2;
  RopeTable t;
  t.rope_dim = rope_dim;
  t.positions = positions;
  t.freq.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(rope_dim);  // fl32(2i)/rd
    const float pw = static_cast<float>(std::pow(base, static_cast<double>(e)));
    t.freq[static_cast<size_t>(i)] = 1.0f / pw;
  }
  if (yarn && yarn->original_max_position_embeddings > 0) {
    const double lo_d = correction_dim(yarn->beta_fast, rope_dim, base,
                                       static_cast<double>(yarn->original_max_position_embeddings));
    const double hi_d = correction_dim(yarn->beta_slow, rope_dim, base,
                                       static_cast<double>(yarn->original_max_position_embeddings));
    double low = std::max(std::floor(lo_d), 0.0);
    double high = std::min(std::ceil(hi_d), static_cast<double>(rope_dim - 1));
    if (low == high) high += 0.001;
    const float factor = static_cast<float>(yarn->factor);
    for (int i = 0; i < half; ++i) {
      float ramp = (static_cast<float>(i) - static_cast<float>(low)) /
                   static_cast<float>(high - low);
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      const float f = t.freq[static_cast<size_t>(i)];
      t.freq[static_cast<size_t>(i)] = (f / factor) * (1.0f - smooth) + f * smooth;
    }
  }
  t.fc.resize(static_cast<size_t>(positions) * static_cast<size_t>(rope_dim));
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * t.freq[static_cast<size_t>(i)];
      const size_t o = static_cast<size_t>(p) * static_cast<size_t>(rope_dim) + 2u * static_cast<size_t>(i);
      t.fc[o] = static_cast<float>(std::cos(static_cast<double>(angle)));
      t.fc[o + 1] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return t;
}

RopeTable make_plain_rope(const ModelConfig& c, int64_t positions) {
  return make_rope_table(c.rope_theta, c.qk_rope_head_dim, positions, nullptr);
}

RopeTable make_yarn_rope(const ModelConfig& c, int64_t positions) {
  return make_rope_table(c.compress_rope_theta, c.qk_rope_head_dim, positions, &c.rope_scaling);
}

}  // namespace dsv4
