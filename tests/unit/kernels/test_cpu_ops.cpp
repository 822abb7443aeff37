// The CPU backend object (kernels/cpu/cpu_ops.cpp): memory, forwarding, and the small ops
// without a vector file (embed §4.1, argmax D10, add, hc_mean, the linears of §3.3).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "kernels/ops.h"
#include "base/scalar_formats.h"
#include "model/codecs.h"
#include "base/error.h"
#include "tests/test_views.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("cpu ops: buffers are zero-filled; fill, copy, upload and download move exact values") {
  auto ops = make_cpu_ops();
  CHECK(std::string(ops->name()) == "cpu");
  FBuf a = ops->alloc(37);
  IBuf b = ops->alloc_i32(5);
  REQUIRE(a.size() == 37);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a.data()[i] == 0.0f);
  for (size_t i = 0; i < b.size(); ++i) CHECK(b.data()[i] == 0);
  const std::vector<float> host = random_uniform(37, 1, -1.0f, 1.0f);
  ops->upload(a.data(), host.data(), host.size());
  FBuf c = ops->alloc(37);
  ops->copy(c.data(), a.data(), 37);
  std::vector<float> back(37);
  ops->download(back.data(), c.data(), 37);
  CHECK(back == host);
  ops->fill(c.data(), 2.5f, 37);
  ops->add(c.data(), a.data(), 37);  // y += x
  for (size_t i = 0; i < 37; ++i) CHECK(c.data()[i] == 2.5f + host[i]);
  const int32_t ids[5] = {3, -1, 7, 0, 9};
  ops->upload_i32(b.data(), ids, 5);
  int32_t ids_back[5];
  ops->download_i32(ids_back, b.data(), 5);
  CHECK(std::equal(ids, ids + 5, ids_back));
  ops->fill_i32(b.data(), -1, 5);
  CHECK(b.data()[4] == -1);
}

TEST_CASE("argmax: largest value, ties to the lowest index, -1 for a row with a NaN (D10)") {
  auto ops = make_cpu_ops();
  const float logits[3 * 5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f,     // tie at 1 and 3 -> 1
                               -3.0f, -2.0f, -2.0f, -5.0f, -9.0f,  // all negative, tie -> 1
                               1.0f, NAN, 7.0f, 0.0f, 0.0f};       // NaN -> -1
  int32_t out[3];
  ops->argmax(logits, 3, 5, out);
  CHECK(out[0] == 1);
  CHECK(out[1] == 1);
  CHECK(out[2] == -1);
}

TEST_CASE("embed: every HC stream holds the exact widened BF16 row of the token (§4.1)") {
  const int vocab = 6, hidden = 4, hc = 3;
  const std::vector<float> master = random_uniform(vocab * hidden, 2, -4.0f, 4.0f);
  std::vector<uint16_t> bf16(master.size());
  for (size_t i = 0; i < master.size(); ++i) bf16[i] = f32_to_bf16(master[i]);
  TensorView table;
  table.name = "embed.weight";
  table.dtype = DType::BF16;
  table.shape = {vocab, hidden};
  table.data = reinterpret_cast<const uint8_t*>(bf16.data());
  table.nbytes = bf16.size() * 2;
  auto ops = make_cpu_ops();
  const int32_t ids[2] = {5, 0};
  std::vector<float> h(2 * hc * hidden);
  ops->embed(table, ids, 2, hc, h.data());
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < hc; ++c)
      for (int d = 0; d < hidden; ++d)
        CHECK(h[(t * hc + c) * hidden + d] == bf16_round(master[ids[t] * hidden + d]));
  const int32_t bad[1] = {vocab};
  CHECK_THROWS_AS(ops->embed(table, bad, 1, hc, h.data()), Error);
}

TEST_CASE("hc_mean: out[t*stride + d] = mean over streams, rows placed at the stride") {
  auto ops = make_cpu_ops();
  const int s = 2, hc = 4, hidden = 3, stride = 5;
  const std::vector<float> h = random_uniform(s * hc * hidden, 3, -1.0f, 1.0f);
  std::vector<float> out(s * stride, -7.0f);
  ops->hc_mean(h.data(), s, hc, hidden, out.data(), stride);
  for (int t = 0; t < s; ++t) {
    for (int d = 0; d < hidden; ++d) {
      double sum = 0.0;
      for (int c = 0; c < hc; ++c) sum += h[(t * hc + c) * hidden + d];
      CHECK(out[t * stride + d] == static_cast<float>(sum / hc));  // f64 sum, one rounding
    }
    for (int d = hidden; d < stride; ++d) CHECK(out[t * stride + d] == -7.0f);  // untouched
  }
}

TEST_CASE("linear_island: f64 accumulation rounded once equals an f64 dot rounded to f32") {
  const int out_n = 5, in_n = 300, rows = 2;
  const std::vector<float> w = random_uniform(out_n * in_n, 4, -1.0f, 1.0f);
  const std::vector<float> x = random_uniform(rows * in_n, 5, -1.0f, 1.0f);
  auto ops = make_cpu_ops();
  std::vector<float> y(rows * out_n);
  ops->linear_island(f32_view("gate.weight", {out_n, in_n}, w), x.data(), rows, y.data());
  for (int r = 0; r < rows; ++r)
    for (int n = 0; n < out_n; ++n) {
      double acc = 0.0;
      for (int k = 0; k < in_n; ++k) acc += double(x[r * in_n + k]) * w[n * in_n + k];
      // Products of two f32 are exact in f64; 300 f64 additions stay far below f32's ulp.
      CHECK(y[r * out_n + n] == static_cast<float>(acc));
    }
}

TEST_CASE("linear_fp8 and linear_bf16 (L-bf16): bf16(x) . W with f32 accumulation") {
  const int out_n = 130, in_n = 256, rows = 2;  // two 128-row scale blocks, two K blocks
  const std::vector<float> master = random_uniform(out_n * in_n, 6, -0.5f, 0.5f);
  const Fp8Encoded enc = encode_fp8_linear(master.data(), out_n, in_n);
  Fp8Linear lin;
  lin.weight.name = "layers.0.attn.wq_a.weight";
  lin.weight.dtype = DType::F8_E4M3;
  lin.weight.shape = {out_n, in_n};
  lin.weight.data = enc.codes.data();
  lin.weight.nbytes = enc.codes.size();
  lin.scale.name = "layers.0.attn.wq_a.scale";
  lin.scale.dtype = DType::F8_E8M0;
  lin.scale.shape = {2, 2};
  lin.scale.data = enc.scales.data();
  lin.scale.nbytes = enc.scales.size();
  // The same exact weights as a bf16-valued F32 view for linear_bf16.
  std::vector<float> dense(out_n * in_n);
  for (int n = 0; n < out_n; ++n)
    for (int k = 0; k < in_n; ++k) dense[n * in_n + k] = fp8_linear_at(lin, n, k);
  const std::vector<float> x = random_uniform(rows * in_n, 7, -3.0f, 3.0f);

  auto ops = make_cpu_ops();
  for (bool act_bf16 : {true, false}) {
    CAPTURE(act_bf16);
    std::vector<float> y8(rows * out_n), yb(rows * out_n);
    ops->linear_fp8(lin, x.data(), rows, act_bf16, y8.data());
    ops->linear_bf16(f32_view("weights_proj", {out_n, in_n}, dense), x.data(), rows, act_bf16,
                     yb.data());
    CHECK(y8 == yb);  // same law, same exact weights, same order
    for (int r = 0; r < rows; ++r)
      for (int n = 0; n < out_n; ++n) {
        double acc = 0.0, mag = 0.0;
        for (int k = 0; k < in_n; ++k) {
          const float a = act_bf16 ? bf16_round(x[r * in_n + k]) : x[r * in_n + k];
          acc += double(a) * dense[n * in_n + k];
          mag += std::fabs(double(a) * dense[n * in_n + k]);
        }
        // f32 accumulation of 256 terms: |err| <= 256 * 2^-24 * sum|terms| (+ product rounding).
        CHECK(std::fabs(y8[r * out_n + n] - acc) <= 257 * 0x1p-24 * mag);
      }
  }
  // With bf16 activations the products are exact, so the result differs from f32 x.
  std::vector<float> y_bf(rows * out_n), y_f32(rows * out_n);
  ops->linear_fp8(lin, x.data(), rows, true, y_bf.data());
  ops->linear_fp8(lin, x.data(), rows, false, y_f32.data());
  CHECK(y_bf != y_f32);
}

// Ops::on_line: the CPU runs ops in the order issued (lines change nothing), but a line
// outside [0, kOpLines) is refused by name on every backend.
TEST_CASE("on_line: lines 0..kOpLines-1 are accepted, others refused by name") {
  auto ops = make_cpu_ops();
  for (int line = 0; line < Ops::kOpLines; ++line) CHECK_NOTHROW(ops->on_line(line));
  CHECK_NOTHROW(ops->join_lines());
  CHECK_THROWS_WITH_AS(ops->on_line(Ops::kOpLines), doctest::Contains("line 4 outside [0, 4)"), Error);
  CHECK_THROWS_WITH_AS(ops->on_line(-1), doctest::Contains("line -1"), Error);
}
