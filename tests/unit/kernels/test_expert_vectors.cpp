// Routed and shared experts (MODEL.md §4.23-§4.24, D4, D16) against expert_swiglu.json,
// the NVFP4 twin of the MXFP4 expert (CHECKPOINT.md §3.8 rule 8), and the MoE sum order.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "kernels/cpu/moe.h"
#include "kernels/cpu/quant.h"
#include "model/codecs.h"
#include "tests/test_views.h"
#include "cpu_threads_env.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

Fp8Linear fp8_view(const std::string& name, int64_t rows, int64_t cols, const Fp8Encoded& enc) {
  Fp8Linear w;
  w.weight = byte_view(name + ".weight", DType::F8_E4M3, {rows, cols}, enc.codes);
  w.scale = byte_view(name + ".scale", DType::F8_E8M0, {(rows + 127) / 128, (cols + 127) / 128},
                      enc.scales);
  return w;
}

// MXFP4 bytes from one e2m1 nibble per element (even column = low nibble, §3.5).
Fp4Encoded pack_mxfp4(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales,
                      int64_t rows, int64_t cols) {
  Fp4Encoded enc;
  enc.packed.assign(static_cast<size_t>(rows * cols / 2), 0);
  for (int64_t i = 0; i < rows * cols; ++i)
    enc.packed[i / 2] |= static_cast<uint8_t>(codes[i] << ((i % 2) * 4));
  enc.scales = scales;
  return enc;
}

// A block holding given experts and a shared expert of FP8 weights (owned by the caller).
struct MoeFixture {
  std::vector<Fp4Encoded> encoded;  // 3 per expert
  Fp8Encoded shared[3];
  BlockWeights block;
};

void set_shared(MoeFixture& f, int hidden, int inter) {
  f.block.shared_w1 = fp8_view("ffn.shared_experts.w1", inter, hidden, f.shared[0]);
  f.block.shared_w3 = fp8_view("ffn.shared_experts.w3", inter, hidden, f.shared[1]);
  f.block.shared_w2 = fp8_view("ffn.shared_experts.w2", hidden, inter, f.shared[2]);
}

Numerics arm(ExpertArm a) {
  Numerics n;
  n.expert_arm = a;
  return n;
}

// E random experts [F, H] / [H, F] (MXFP4, or its lossless NVFP4 recast) and a random FP8
// shared expert of the same widths, seeded from `seed`.
void fill_random_moe(MoeFixture& f, ExpertRecipe recipe, int E, int H, int F, uint32_t seed) {
  for (int e = 0; e < E; ++e)
    for (int i = 0; i < 3; ++i) {
      const std::vector<float> master = random_uniform(static_cast<size_t>(H) * F, seed + 3 * e + i, -1, 1);
      const int64_t rows = i == 2 ? H : F, cols = i == 2 ? F : H;
      Fp4Encoded mx = encode_mxfp4(master.data(), rows, cols);
      f.encoded.push_back(recipe == ExpertRecipe::mxfp4 ? std::move(mx) : mxfp4_to_nvfp4(mx, rows, cols));
    }
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> master = random_uniform(static_cast<size_t>(H) * F, seed + 100 + i, -0.5f, 0.5f);
    f.shared[i] = encode_fp8_linear(master.data(), i == 2 ? H : F, i == 2 ? F : H);
  }
  set_shared(f, H, F);
  for (int e = 0; e < E; ++e) {
    const std::string n = "ffn.experts." + std::to_string(e);
    ExpertWeights w;
    w.w1 = fp4_view(n + ".w1", recipe, F, H, f.encoded[3 * e]);
    w.w3 = fp4_view(n + ".w3", recipe, F, H, f.encoded[3 * e + 1]);
    w.w2 = fp4_view(n + ".w2", recipe, H, F, f.encoded[3 * e + 2]);
    f.block.experts.push_back(w);
  }
}

}  // namespace

TEST_CASE("routed expert, both arms: clamp u both sides and g from above, wt before w2 (MXFP4 vectors)") {
  for (const VectorCase& c : load_cases("expert_swiglu.json", "routed_expert")) {
    if (!c.inputs.contains("w1_codes")) continue;  // the bf16-weight cases are below
    SUBCASE(c.name.c_str()) {
      const int H = c.param<int>("hidden"), F = c.param<int>("inter");
      const float limit = c.param<float>("swiglu_limit");
      const float wt = c.input("routing_weight").f32()[0];
      const std::vector<float> x = c.input("x").f32();
      MoeFixture f;
      const int64_t shapes[3][2] = {{F, H}, {F, H}, {H, F}};
      const char* names[3] = {"w1", "w3", "w2"};
      for (int i = 0; i < 3; ++i)
        f.encoded.push_back(pack_mxfp4(c.input(std::string(names[i]) + "_codes").u8(),
                                       c.input(std::string(names[i]) + "_scale").u8(),
                                       shapes[i][0], shapes[i][1]));
      // Shared expert of zero weights: contributes exactly +0, so out = the routed expert.
      for (int i = 0; i < 3; ++i) {
        const std::vector<float> zero(static_cast<size_t>(shapes[i][0] * shapes[i][1]), 0.0f);
        f.shared[i] = encode_fp8_linear(zero.data(), shapes[i][0], shapes[i][1]);
      }
      set_shared(f, H, F);
      auto experts_of = [&](ExpertRecipe recipe, const std::vector<Fp4Encoded>& enc) {
        ExpertWeights e;
        e.w1 = fp4_view("ffn.experts.0.w1", recipe, F, H, enc[0]);
        e.w3 = fp4_view("ffn.experts.0.w3", recipe, F, H, enc[1]);
        e.w2 = fp4_view("ffn.experts.0.w2", recipe, H, F, enc[2]);
        return std::vector<ExpertWeights>{e};
      };
      f.block.experts = experts_of(ExpertRecipe::mxfp4, f.encoded);
      const int32_t sel[] = {0};
      CpuWeightCache cache;
      auto moe = [&](ExpertArm a) {
        std::vector<float> out(H);
        cpu_moe(cache, f.block, x.data(), 1, sel, &wt, 1, limit, arm(a), out.data());
        return out;
      };
      const std::vector<float> bf16_out = moe(ExpertArm::bf16), native_out = moe(ExpertArm::native);
      // f64 expected vs f32 accumulation: bounds (and exact codes) from the vector file.
      compare_key(c, "bf16_arm.out", bf16_out);
      compare_key(c, "native_arm.out", native_out);

      // Intermediates through the per-expert functions on the decoded weights.
      const ExpertWeights& e = f.block.experts[0];
      const float *w1 = cache.expert(e.w1), *w3 = cache.expert(e.w3), *w2 = cache.expert(e.w2);
      SwigluTrace tr;
      std::vector<float> out(H);
      cpu_expert_lbf16(w1, w3, w2, H, F, x.data(), wt, limit, true, out.data(), &tr);
      compare_key(c, "bf16_arm.g", tr.g);
      compare_key(c, "bf16_arm.u", tr.u);
      compare_key(c, "bf16_arm.h", tr.h);
      std::vector<uint8_t> codes(H);
      std::vector<float> scale(H / 128), x_q(H), x_s(H / 128);
      cpu_act_quant_fp8(x.data(), H, codes.data(), scale.data());
      compare_key(c, "native_arm.x_codes", codes);
      compare_key(c, "native_arm.x_scale", scale);
      cpu_act_quant_fp8_values(x.data(), H, x_q.data(), x_s.data());
      cpu_expert_native(w1, w3, w2, H, F, x_q.data(), x_s.data(), wt, limit, out.data(), &tr);
      compare_key(c, "native_arm.g", tr.g);
      compare_key(c, "native_arm.u", tr.u);
      compare_key(c, "native_arm.h", tr.h);
      std::vector<uint8_t> h_codes(F);
      std::vector<float> h_scale(F / 128);
      cpu_act_quant_fp8(tr.h.data(), F, h_codes.data(), h_scale.data());
      compare_key(c, "native_arm.h_codes", h_codes);
      compare_key(c, "native_arm.h_scale", h_scale);

      // The lossless NVFP4 recast (rule 8) gives identical bits in both arms.
      std::vector<Fp4Encoded> nv;
      for (int i = 0; i < 3; ++i)
        nv.push_back(mxfp4_to_nvfp4(f.encoded[i], shapes[i][0], shapes[i][1]));
      f.block.experts = experts_of(ExpertRecipe::nvfp4, nv);
      CHECK(moe(ExpertArm::bf16) == bf16_out);
      CHECK(moe(ExpertArm::native) == native_out);
    }
  }
}

TEST_CASE("bf16 expert arm on bf16 weights: swiglu_limit 10 clamps, limit <= 0 disables (D16)") {
  for (const VectorCase& c : load_cases("expert_swiglu.json", "routed_expert")) {
    if (!c.inputs.contains("w1")) continue;
    SUBCASE(c.name.c_str()) {
      const int H = c.param<int>("hidden"), F = c.param<int>("inter");
      SwigluTrace tr;
      std::vector<float> out(H);
      cpu_expert_lbf16(c.input("w1").f32().data(), c.input("w3").f32().data(),
                       c.input("w2").f32().data(), H, F, c.input("x").f32().data(),
                       c.input("routing_weight").f32()[0], c.param<float>("swiglu_limit"), true,
                       out.data(), &tr);
      // f64 expected vs f32 L-bf16 chains: bounds from the vector file.
      compare_key(c, "g", tr.g);
      compare_key(c, "u", tr.u);
      compare_key(c, "h", tr.h);
      compare_key(c, "out", out);
    }
  }
}

TEST_CASE("moe: experts summed in ascending id from 0 whatever the slot order, shared expert added last") {
  const int H = 128, F = 128, E = 4, k = 3;
  MoeFixture f;
  fill_random_moe(f, ExpertRecipe::mxfp4, E, H, F, 100);
  const std::vector<float> x = random_uniform(H, 7, -3, 3);
  const int32_t sel_a[k] = {3, 0, 2}, sel_b[k] = {0, 2, 3};
  const float wt_a[k] = {0.5f, 0.25f, 0.75f}, wt_b[k] = {0.25f, 0.75f, 0.5f};
  for (const ExpertArm a : {ExpertArm::native, ExpertArm::bf16}) {
    CAPTURE(static_cast<int>(a));
    CpuWeightCache cache;
    const Numerics num = arm(a);
    std::vector<float> out_a(H), out_b(H);
    cpu_moe(cache, f.block, x.data(), 1, sel_a, wt_a, k, 10.0f, num, out_a.data());
    cpu_moe(cache, f.block, x.data(), 1, sel_b, wt_b, k, 10.0f, num, out_b.data());
    CHECK(std::memcmp(out_a.data(), out_b.data(), H * sizeof(float)) == 0);
    // Direct composition: ((0 + e0) + e2) + e3, then + shared.
    std::vector<float> x_q(H), x_s(1), one(H), expect(H, 0.0f);
    cpu_act_quant_fp8_values(x.data(), H, x_q.data(), x_s.data());
    for (int j = 0; j < k; ++j) {
      const ExpertWeights& w = f.block.experts[sel_b[j]];
      const float *w1 = cache.expert(w.w1), *w3 = cache.expert(w.w3), *w2 = cache.expert(w.w2);
      if (a == ExpertArm::native)
        cpu_expert_native(w1, w3, w2, H, F, x_q.data(), x_s.data(), wt_b[j], 10.0f, one.data());
      else
        cpu_expert_lbf16(w1, w3, w2, H, F, x.data(), wt_b[j], 10.0f, true, one.data());
      for (int i = 0; i < H; ++i) expect[i] += one[i];
    }
    cpu_expert_lbf16(cache.dense(f.block.shared_w1), cache.dense(f.block.shared_w3),
                     cache.dense(f.block.shared_w2), H, F, x.data(), 1.0f, 10.0f, true, one.data());
    for (int i = 0; i < H; ++i) expect[i] += one[i];
    CHECK(std::memcmp(out_b.data(), expect.data(), H * sizeof(float)) == 0);
  }
}

// kernels/cpu/parallel_rows.h: threads split the rows (and, with threads to spare, each
// row's projections); every output bit-identical to the one-thread run. H 2048, inter 512:
// 1 or 5 rows, so both the row split and the nested split of a projection's outputs run.
TEST_CASE("moe: the threaded rows equal the one-thread run bit for bit, both arms and recipes") {
  const int H = 2048, F = 512, E = 5, k = 3;
  for (const ExpertRecipe recipe : {ExpertRecipe::mxfp4, ExpertRecipe::nvfp4}) {
    CAPTURE(static_cast<int>(recipe));
    MoeFixture f;
    fill_random_moe(f, recipe, E, H, F, 300);
    const int rows = 5;
    const std::vector<float> x = random_uniform(static_cast<size_t>(rows) * H, 8, -3, 3);
    const std::vector<int32_t> sel = {4, 0, 2, 1, 3, 0, 2, 0, 4, 3, 1, 2, 0, 4, 1};
    const std::vector<float> wt = random_uniform(sel.size(), 9, 0.1f, 1.0f);
    for (const ExpertArm a : {ExpertArm::native, ExpertArm::bf16}) {
      for (const int n : {1, rows}) {
        CAPTURE(static_cast<int>(a));
        CAPTURE(n);
        auto moe = [&] {  // a fresh cache: the expert weights decode on the threads too
          CpuWeightCache cache;
          std::vector<float> out(static_cast<size_t>(n) * H);
          cpu_moe(cache, f.block, x.data(), n, sel.data(), wt.data(), k, 10.0f, arm(a), out.data());
          return out;
        };
        const std::vector<float> serial = with_cpu_threads(1, moe);
        for (const int threads : {3, 8}) {
          CAPTURE(threads);
          const std::vector<float> got = with_cpu_threads(threads, moe);
          CHECK(std::memcmp(got.data(), serial.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
    // A projection that fails to decode on a worker thread: its error reaches the caller.
    f.block.experts[3].w2.weight.dtype = DType::F32;
    CpuWeightCache cache;
    std::vector<float> out(static_cast<size_t>(rows) * H);
    CHECK_THROWS_WITH_AS(with_cpu_threads(8, [&] {
                           cpu_moe(cache, f.block, x.data(), rows, sel.data(), wt.data(), k, 10.0f,
                                   arm(ExpertArm::native), out.data());
                           return 0;
                         }),
                         doctest::Contains("ffn.experts.3.w2.weight"), Error);
  }
}
