#include "kernels/cpu/rope.h"

#include "base/error.h"

namespace dsv4 {

void cpu_rope(float* v, int rows, int heads, int dim, const RopeTable& t,
              const int32_t* positions, bool inverse) {
  const int rd = t.rope_dim;
  DSV4_CHECK(rd > 0 && rd <= dim, "rope_dim=", rd, " dim=", dim);
  for (int r = 0; r < rows; ++r) {
    const int64_t p = positions[r];
    if (p < 0 || p >= t.positions)
      throw Error(cat("rope: position ", p, " (row ", r, ") outside the table of ", t.positions,
                      " positions"));
    const float* fc = t.fc.data() + p * rd;  // [rd/2 pairs of (cos, sin)]
    for (int h = 0; h < heads; ++h) {
      float* x = v + (static_cast<int64_t>(r) * heads + h) * dim + (dim - rd);
      for (int i = 0; i < rd / 2; ++i) {
        const float c = fc[2 * i];
        const float s = inverse ? -fc[2 * i + 1] : fc[2 * i + 1];
        const float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;  // f32 complex multiply (§4.7, class E)
        x[2 * i + 1] = a * s + b * c;
      }
    }
  }
}

}  // namespace dsv4
