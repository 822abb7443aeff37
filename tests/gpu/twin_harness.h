// Shared harness of the CPU/CUDA twin tests (llama.cpp test-backend-ops style): seeded
// random non-zero inputs uploaded to both backends, stored weights built in memory, and a
// comparison that reports normalized error with the worst index.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iomanip>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/codecs.h"
#include "base/error.h"

namespace dsv4::twin {

constexpr int kCpu = 0, kGpu = 1;

// Both backends; the CUDA one on device 0.
struct Backends {
  std::unique_ptr<Ops> cpu = make_cpu_ops();
  std::unique_ptr<Ops> gpu = make_cuda_ops(0);
  Ops& at(int side) { return side == kCpu ? *cpu : *gpu; }
};

// The same n floats (or int32s) on both backends.
template <class T>
struct Pair {
  DeviceBuffer<T> buf[2];
  size_t n = 0;
  T* operator[](int side) const { return buf[side].data(); }
};
using PairF = Pair<float>;
using PairI = Pair<int32_t>;

inline PairF put(Backends& b, const std::vector<float>& host) {
  PairF p;
  p.n = host.size();
  for (int s : {kCpu, kGpu}) {
    p.buf[s] = b.at(s).alloc(host.size());
    b.at(s).upload(p.buf[s].data(), host.data(), host.size());
  }
  return p;
}
inline PairF zeros(Backends& b, size_t n) { return put(b, std::vector<float>(n, 0.0f)); }
inline PairI put_i32(Backends& b, const std::vector<int32_t>& host) {
  PairI p;
  p.n = host.size();
  for (int s : {kCpu, kGpu}) {
    p.buf[s] = b.at(s).alloc_i32(host.size());
    b.at(s).upload_i32(p.buf[s].data(), host.data(), host.size());
  }
  return p;
}
inline std::vector<float> get(Backends& b, const PairF& p, int side) {
  std::vector<float> host(p.n);
  b.at(side).synchronize();
  b.at(side).download(host.data(), p[side], p.n);
  return host;
}
inline std::vector<int32_t> get_i32(Backends& b, const PairI& p, int side) {
  std::vector<int32_t> host(p.n);
  b.at(side).synchronize();
  b.at(side).download_i32(host.data(), p[side], p.n);
  return host;
}

// Seeded generator; values never all zero.
struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  float normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(gen); }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  std::vector<float> normals(size_t n, float sd = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(sd);
    return v;
  }
};

// Stored tensors owned for the whole test (CudaOps keys residency by storage and address).
class Store {
 public:
  TensorView f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    auto& bytes = hold(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return view(name, DType::F32, std::move(shape), bytes);
  }
  // Values rounded to bf16 first; returns the view, `v` becomes the exact stored values.
  TensorView bf16(const std::string& name, std::vector<int64_t> shape, std::vector<float>& v) {
    auto& bytes = hold(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
      v[i] = bf16_to_f32(b);
    }
    return view(name, DType::BF16, std::move(shape), bytes);
  }
  // FP8 block-scaled [out, in]: random finite e4m3 codes, e8m0 scales around 2^-9.
  Fp8Linear fp8(const std::string& name, int64_t out, int64_t in, Rng& rng) {
    Fp8Linear w;
    auto& codes = hold(static_cast<size_t>(out * in));
    for (auto& c : codes) c = random_e4m3(rng);
    const int64_t gr = (out + 127) / 128, gc = (in + 127) / 128;
    auto& scales = hold(static_cast<size_t>(gr * gc));
    for (auto& s : scales) s = static_cast<uint8_t>(127 - 9 + rng.uniform_int(-1, 1));
    w.weight = view(name + ".weight", DType::F8_E4M3, {out, in}, codes);
    w.scale = view(name + ".scale", DType::F8_E8M0, {gr, gc}, scales);
    return w;
  }
  // FP4 expert projection [rows, cols]: random nibbles; MXFP4 e8m0 or NVFP4 e4m3 scales
  // (with a power-of-two weight_scale_2) around 2^-5.
  Fp4Linear fp4(const std::string& name, ExpertRecipe recipe, int64_t rows, int64_t cols, Rng& rng) {
    Fp4Linear w;
    w.recipe = recipe;
    w.rows = rows;
    w.cols = cols;
    const bool mx = recipe == ExpertRecipe::mxfp4;
    auto& packed = hold(static_cast<size_t>(rows * cols / 2));
    for (auto& b : packed) b = static_cast<uint8_t>(rng.uniform_int(0, 255));
    auto& scales = hold(static_cast<size_t>(rows * cols / w.group()));
    for (auto& s : scales)
      s = mx ? static_cast<uint8_t>(127 - 5 + rng.uniform_int(-1, 1))
             : encode_e4m3(std::ldexp(1.0f + 0.125f * rng.uniform_int(0, 7), rng.uniform_int(0, 2)));
    w.scale_2 = mx ? 1.0f : std::ldexp(1.0f, -6);
    w.weight = view(name + ".weight", mx ? DType::I8 : DType::U8, {rows, cols / 2}, packed);
    w.scale = view(name + (mx ? ".scale" : ".weight_scale"), mx ? DType::F8_E8M0 : DType::F8_E4M3,
                   {rows, cols / w.group()}, scales);
    return w;
  }

 private:
  static uint8_t random_e4m3(Rng& rng) {
    for (;;) {
      const auto c = static_cast<uint8_t>(rng.uniform_int(0, 255));
      if ((c & 0x7F) != 0x7F) return c;  // not NaN
    }
  }
  std::vector<uint8_t>& hold(size_t n) {
    bytes_.emplace_back(n > 0 ? n : 1);
    return bytes_.back();
  }
  static TensorView view(const std::string& name, DType dt, std::vector<int64_t> shape,
                         const std::vector<uint8_t>& bytes) {
    TensorView t;
    t.name = name;
    t.dtype = dt;
    t.shape = std::move(shape);
    t.data = bytes.data();
    t.nbytes = static_cast<size_t>(t.numel()) * dtype_size(dt);
    t.storage = next_storage_id();
    return t;
  }
  std::deque<std::vector<uint8_t>> bytes_;  // stable addresses
};

// Normalized error of `got` (CUDA) against `ref` (CPU reference).
struct Diff {
  double rel_l2 = 0;    // ||got - ref|| / ||ref||
  double max_abs = 0;   // max |got - ref|
  double max_norm = 0;  // max_abs / max |ref|
  size_t worst = 0;
  float ref_at_worst = 0, got_at_worst = 0;
  size_t nan_mismatch = 0;
};

inline Diff diff(const std::vector<float>& ref, const std::vector<float>& got) {
  Diff d;
  REQUIRE(ref.size() == got.size());
  double num = 0, den = 0, ref_max = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i]) != std::isnan(got[i])) ++d.nan_mismatch;
    if (std::isnan(ref[i]) || std::isnan(got[i])) continue;
    const double e = std::fabs(double(got[i]) - double(ref[i]));
    num += e * e;
    den += double(ref[i]) * ref[i];
    ref_max = std::max(ref_max, std::fabs(double(ref[i])));
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst = i;
    }
  }
  d.ref_at_worst = ref.empty() ? 0 : ref[d.worst];
  d.got_at_worst = got.empty() ? 0 : got[d.worst];
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  d.max_norm = ref_max > 0 ? d.max_abs / ref_max : d.max_abs;
  return d;
}

// Checks got against ref: relative L2 <= rel_l2 and max |err| / max |ref| <= max_norm;
// bounds of 0 demand bit equality (by value). Prints the numbers either way.
inline void check_close(const std::string& what, const std::vector<float>& ref,
                        const std::vector<float>& got, double rel_l2, double max_norm) {
  const Diff d = diff(ref, got);
  std::ostringstream os;
  os << what << ": n=" << ref.size() << std::scientific << std::setprecision(3)
     << " rel_l2=" << d.rel_l2 << " max_abs=" << d.max_abs << " max_norm=" << d.max_norm
     << std::setprecision(9) << " worst=" << d.worst << " (cpu " << d.ref_at_worst << ", cuda "
     << d.got_at_worst << ") nan_mismatch=" << d.nan_mismatch << " bounds rel_l2<="
     << std::setprecision(1) << rel_l2 << " max_norm<=" << max_norm;
  const std::string report = os.str();
  MESSAGE(report);
  INFO(report);
  CHECK(d.nan_mismatch == 0);
  CHECK(d.rel_l2 <= rel_l2);
  CHECK(d.max_norm <= max_norm);
}

// Bitwise equality of two CUDA results (row-count independence, SPECDECODE.md §6.3).
template <class T>
void check_bitwise(const std::string& what, const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  size_t first = a.size();
  for (size_t i = 0; i < a.size() && first == a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) first = i;
  INFO(what << ": first differing element " << first << " of " << a.size());
  CHECK(first == a.size());
}

}  // namespace dsv4::twin
