// The prefill GEMMs (issue 13; MODEL.md §3.3 L-bf16: "Prefill uses cuBLASLt"): the L-bf16
// linears of a prefill's many rows on tensor cores, bf16 x bf16 with f32 accumulation and
// f32 output, through cuBLASLt.
//
// Numerics (kernels/ops.h *_gemm; law 2's tolerance, not R-I3):
// - weight: an FP8 weight is dequantized per call into a grow-only bf16 scratch,
//   e4m3(code) x e8m0(scale): 4 significant bits times a power of two, exact in bf16's 8
//   (§3.3: every e4m3 x 2^k value V4-Flash uses is bf16-exact); a BF16 weight is used in
//   place, an F32 one is bf16-exact by the op's contract (ops.h linear_bf16).
// - activation, dense_act bf16 (act_bf16): x rounded to bf16 (RNE), as the GEMV does:
//   every product is then exact in f32, only the summation order differs from the GEMV
//   (a relative change of about sqrt(k) 2^-24 per output).
// - activation, dense_act f32: x = hi + mid + lo, each term the bf16 rounding of what the
//   earlier ones leave (x - bf16(x) is exact in f32), so 3 x 8 significant bits carry all
//   of f32's 24: the three GEMMs (accumulating into y, beta = 1) sum exact products of x
//   itself, again differing only in order. A two-term split would leave 2^-16 relative of
//   x, above the 1e-5 logits agreement that mode exists for (MODEL.md numeric options).
// Determinism: the algorithm is the heuristic's first choice for the shape, cached per
// shape, with split-K reductions limited to the workspace schemes (no in-place reduction
// through the output), so one shape gives the same bits in every run and process.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/gemm_prefill.cuh"
#include "kernels/cuda/prefill_convert.cuh"
#include "kernels/cuda/weight_checks.h"

namespace dsv4 {
namespace cuda {

constexpr size_t kLtWorkspace = size_t{32} << 20;  // cuBLASLt's split-K / scheduling scratch
constexpr int kConvertThreads = 256;

GemmProblem linear_problem(const uint16_t* w, const float* x, int64_t k_in, int64_t n_out, int rows,
                           bool act_bf16, float* y, const std::string& name) {
  GemmProblem p;
  p.w = w;
  p.a.x = x;
  p.a.x_stride = k_in;
  p.a.y = y;
  p.a.y_stride = n_out;
  p.a.k_in = k_in;
  p.a.n_out = n_out;
  p.a.rows = rows;
  p.a.act_bf16 = act_bf16;
  p.name = name;
  return p;
}

namespace {

void lt_check(cublasStatus_t s, const char* call, const std::string& name) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(cat("backend cuda: prefill GEMM of '", name, "': ", call, " failed: ",
                    cublasLtGetStatusString(s)));
}

// The largest power of two <= 256 dividing the address and every byte stride of a matrix
// (cuBLASLt's MIN_ALIGNMENT preferences: an algorithm needing more is excluded).
uint32_t alignment(const void* p, std::initializer_list<int64_t> strides) {
  uint64_t bits = reinterpret_cast<uint64_t>(p) | 256;
  for (int64_t s : strides) bits |= static_cast<uint64_t>(s);
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// The three matrix layouts and the operation of one problem, released at scope end.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~Descriptors() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void set_batch(cublasLtMatrixLayout_t l, int batches, int64_t stride, const std::string& name) {
  if (batches == 1) return;
  lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                            sizeof(batches)),
           "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", name);
  lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof(stride)),
           "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", name);
}

// Column-major view of the row-major problem: y^T [n_out, rows] = W [k_in, n_out]^T (op T)
// x [k_in, rows] (op N): A = w (ld k_in), B = the bf16 x (ld x_stride), D = y (ld y_stride).
void describe(const GemmProblem& p, Descriptors& ds) {
  const std::string& nm = p.name;
  lt_check(cublasLtMatmulDescCreate(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", nm);
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
           "cublasLtMatmulDescSetAttribute(TRANSA)", nm);
  lt_check(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)),
           "cublasLtMatmulDescSetAttribute(TRANSB)", nm);
  lt_check(cublasLtMatrixLayoutCreate(&ds.a, CUDA_R_16BF, p.a.k_in, p.a.n_out, p.a.k_in), "cublasLtMatrixLayoutCreate(A)", nm);
  lt_check(cublasLtMatrixLayoutCreate(&ds.b, CUDA_R_16BF, p.a.k_in, p.a.rows, p.a.x_stride), "cublasLtMatrixLayoutCreate(B)", nm);
  lt_check(cublasLtMatrixLayoutCreate(&ds.d, CUDA_R_32F, p.a.n_out, p.a.rows, p.a.y_stride), "cublasLtMatrixLayoutCreate(D)", nm);
  set_batch(ds.a, p.batches, p.a.n_out * p.a.k_in, nm);
  set_batch(ds.b, p.batches, p.a.x_group, nm);
  set_batch(ds.d, p.batches, p.a.y_group, nm);
}

// x [n] f32 -> `terms` bf16 planes [terms][n]: plane t = bf16(what planes < t leave of x).
// V consecutive elements a thread: 4 (ConvertKernel::chunks: one float4 load, 8-byte
// stores) or 1 (elements); each element's arithmetic is the same either way.
template <int V>
__global__ void split_bf16_kernel(const float* x, int64_t n, int terms, uint16_t* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n / V;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float rest[V];
    if constexpr (V == 4) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      rest[0] = v.x, rest[1] = v.y, rest[2] = v.z, rest[3] = v.w;
    } else {
      rest[0] = x[i];
    }
    for (int t = 0; t < terms; ++t) {
      uint16_t h[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float b = bf16_round(rest[j]);
        h[j] = static_cast<uint16_t>(f32_bits(b) >> 16);
        rest[j] -= b;  // exact: the rounding error of RNE to fewer bits is an f32
      }
      uint16_t* dst = out + t * n + i * V;
      if constexpr (V == 4)
        *reinterpret_cast<uint2*>(dst) = make_uint2(h[0] | (uint32_t{h[1]} << 16), h[2] | (uint32_t{h[3]} << 16));
      else
        dst[0] = h[0];
    }
  }
}

// FP8 [rows, cols] -> bf16 [rows, cols]: Fp8W::at is the exact f32 value, bf16-exact (above).
// ConvertKernel::elements: any layout (codes not in whole 16-byte chunks).
__global__ void fp8_to_bf16_kernel(Fp8W w, int64_t rows, uint16_t* out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w.cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    out[r * w.cols + c] = static_cast<uint16_t>(f32_bits(bf16_round(w.at(r, c))) >> 16);
}

// The same conversion a 16-byte chunk of codes a thread (ConvertKernel::chunks; issue 13:
// one-byte loads and two-byte stores do not reach the memory's rate): the GEMV's decoder
// (linear.cuh Fp8Chunks: the hardware e4m3 -> f16 conversion, exact) times the chunk's
// block scale, the f32 product Fp8W::at forms, then bf16-rounded as above: the same bf16
// for every code but the NaN ones (NaN either way, another payload). Two 16-byte stores.
__global__ void fp8_to_bf16_chunks_kernel(Fp8Chunks w, int64_t rows, uint16_t* out) {
  const int64_t per_row = w.w.cols / Fp8Chunks::kVec, chunks = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c0 = (i % per_row) * Fp8Chunks::kVec;
    float v[Fp8Chunks::kVec];
    w.decode(w.raw(r, c0), v);
    const float scale = w.scale(r, c0);
    uint32_t pair[Fp8Chunks::kVec / 2];
#pragma unroll
    for (int j = 0; j < Fp8Chunks::kVec / 2; ++j)
      pair[j] = (f32_bits(bf16_round(v[2 * j] * scale)) >> 16) |
                (f32_bits(bf16_round(v[2 * j + 1] * scale)) & 0xFFFF0000u);
    uint4* dst = reinterpret_cast<uint4*>(out + r * w.w.cols + c0);
    dst[0] = make_uint4(pair[0], pair[1], pair[2], pair[3]);
    dst[1] = make_uint4(pair[4], pair[5], pair[6], pair[7]);
  }
}

// Blocks of a grid-stride conversion over n items: at least one, at most 2^16.
int convert_blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kConvertThreads - 1) / kConvertThreads, 1, 1 << 16));
}

}  // namespace

ConvertKernel fp8_convert_kernel_for(const uint8_t* codes, int64_t cols, const uint16_t* out) {
  return aligned16(codes) && aligned16(out) && cols % Fp8Chunks::kVec == 0 ? ConvertKernel::chunks
                                                                           : ConvertKernel::elements;
}

ConvertKernel split_kernel_for(const float* x, int64_t n, const uint16_t* out) {
  return aligned16(x) && n % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0 ? ConvertKernel::chunks
                                                                                  : ConvertKernel::elements;
}

void fp8_to_bf16(ConvertKernel kernel, const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                 uint16_t* out, cudaStream_t stream) {
  const Fp8W w{codes, scales, cols, (cols + 127) / 128};
  if (kernel == ConvertKernel::chunks) {
    DSV4_CHECK(fp8_convert_kernel_for(codes, cols, out) == ConvertKernel::chunks, "fp8_to_bf16 chunks: layout");
    fp8_to_bf16_chunks_kernel<<<convert_blocks(rows * cols / Fp8Chunks::kVec), kConvertThreads, 0, stream>>>(
        Fp8Chunks{w}, rows, out);
  } else {
    const dim3 grid(static_cast<unsigned>((cols + kConvertThreads - 1) / kConvertThreads),
                    static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
    fp8_to_bf16_kernel<<<grid, kConvertThreads, 0, stream>>>(w, rows, out);
  }
  DSV4_CUDA_LAUNCH_CHECK();
}

void split_bf16(ConvertKernel kernel, const float* x, int64_t n, int terms, uint16_t* out, cudaStream_t stream) {
  if (kernel == ConvertKernel::chunks) {
    DSV4_CHECK(split_kernel_for(x, n, out) == ConvertKernel::chunks, "split_bf16 chunks: layout");
    split_bf16_kernel<4><<<convert_blocks(n / 4), kConvertThreads, 0, stream>>>(x, n, terms, out);
  } else {
    split_bf16_kernel<1><<<convert_blocks(n), kConvertThreads, 0, stream>>>(x, n, terms, out);
  }
  DSV4_CUDA_LAUNCH_CHECK();
}

// cuBLASLt's handle and the algorithm of every shape met so far.
class LtGemm {
 public:
  LtGemm() { lt_check(cublasLtCreate(&handle_), "cublasLtCreate", "(handle)"); }
  ~LtGemm() { cublasLtDestroy(handle_); }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Whether cuBLASLt has an algorithm for problem p with the bf16 x at xb (chosen on
  // first sight of the shape and kept).
  bool supports(const GemmProblem& p, const uint16_t* xb) { return algo(p, xb) != nullptr; }

  // y = (beta ? y : 0) + W x_bf16 for problem p, on `stream` (supports(p, xb) holds).
  void run(const GemmProblem& p, const uint16_t* xb, float beta, void* ws, cudaStream_t stream) {
    const cublasLtMatmulAlgo_t* chosen = algo(p, xb);
    DSV4_CHECK(chosen != nullptr, "prefill GEMM of '", p.name, "' run without an algorithm");
    Descriptors ds;
    describe(p, ds);
    const float alpha = 1.0f;
    lt_check(cublasLtMatmul(handle_, ds.op, &alpha, p.w, ds.a, xb, ds.b, &beta, p.a.y, ds.d, p.a.y, ds.d,
                            chosen, ws, kLtWorkspace, stream),
             "cublasLtMatmul", p.name);
  }

 private:
  using Key = std::array<int64_t, 11>;

  const cublasLtMatmulAlgo_t* algo(const GemmProblem& p, const uint16_t* xb) {
    const std::array<uint32_t, 3> align = {alignment(p.w, {p.a.k_in * 2, p.a.n_out * p.a.k_in * 2}),
                                           alignment(xb, {p.a.x_stride * 2, p.a.x_group * 2}),
                                           alignment(p.a.y, {p.a.y_stride * 4, p.a.y_group * 4})};
    const Key key = {p.a.k_in, p.a.n_out, p.a.rows, p.batches, p.a.x_stride, p.a.x_group,
                     p.a.y_stride, p.a.y_group, align[0], align[1], align[2]};
    auto it = algos_.find(key);
    if (it == algos_.end()) {
      Descriptors ds;
      describe(p, ds);
      it = algos_.emplace(key, choose(p, ds, align)).first;
    }
    return it->second ? &*it->second : nullptr;
  }

  // The heuristic's first algorithm; none when it has none for these alignments.
  std::optional<cublasLtMatmulAlgo_t> choose(const GemmProblem& p, const Descriptors& ds,
                                             const std::array<uint32_t, 3>& align) {
    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", p.name);
    const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                          decltype(&cublasLtMatmulPreferenceDestroy)>
        owned(pref, cublasLtMatmulPreferenceDestroy);
    const size_t ws = kLtWorkspace;
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                             CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
             "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", p.name);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof(schemes)),
             "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)", p.name);
    // C is D (beta = 1 accumulates the f32 split's terms in place).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[4] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}};
    for (const auto& [attr, bytes] : aligns)
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)),
               "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", p.name);
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(handle_, ds.op, ds.a, ds.b, ds.d, ds.d, pref, 1, &result, &found),
             "cublasLtMatmulAlgoGetHeuristic", p.name);
    if (found == 0) return std::nullopt;
    return result.algo;
  }

  cublasLtHandle_t handle_ = nullptr;
  std::map<Key, std::optional<cublasLtMatmulAlgo_t>> algos_;
};

}  // namespace cuda

const uint16_t* CudaOps::bf16_fp8_weight(const Fp8Linear& w) {
  const cuda::Fp8W d = fp8(w);
  const int64_t rows = w.out(), cols = w.in();
  auto* out = static_cast<uint16_t*>(scratch(Slot::gemm_w, static_cast<size_t>(rows * cols) * 2));
  cuda::fp8_to_bf16(cuda::fp8_convert_kernel_for(d.codes, cols, out), d.codes, d.scales, rows, cols, out, stream_);
  return out;
}

const uint16_t* CudaOps::bf16_weight(const TensorView& w) {
  const cuda::DenseW d = dense(w, w.dim(1));
  if (d.bf16) return static_cast<const uint16_t*>(d.p);
  const int64_t n = w.numel();
  auto* out = static_cast<uint16_t*>(scratch(Slot::gemm_w, static_cast<size_t>(n) * 2));
  const auto* x = static_cast<const float*>(d.p);
  cuda::split_bf16(cuda::split_kernel_for(x, n, out), x, n, 1, out, stream_);
  return out;
}

void CudaOps::gemm(cuda::GemmProblem p) {
  if (p.a.rows <= 0) return;
  activate();
  if (!lt_) lt_ = std::make_shared<cuda::LtGemm>();
  const int terms = p.a.act_bf16 ? 1 : 3;
  const int64_t n = static_cast<int64_t>(p.a.rows) * p.a.x_stride;
  auto* xb = static_cast<uint16_t*>(scratch(Slot::gemm_x, static_cast<size_t>(terms * n) * 2));
  bool tensor_cores = true;
  for (int t = 0; t < terms; ++t) tensor_cores = tensor_cores && lt_->supports(p, xb + t * n);
  if (!tensor_cores) {  // strides cuBLASLt has no kernel for: the same product by the GEMV
    gemv(cuda::DenseW{p.w, true, p.a.k_in}, p.a, p.batches);
    return;
  }
  void* ws = scratch(Slot::gemm_ws, cuda::kLtWorkspace);
  cuda::split_bf16(cuda::split_kernel_for(p.a.x, n, xb), p.a.x, n, terms, xb, stream_);
  for (int t = 0; t < terms; ++t) lt_->run(p, xb + t * n, t == 0 ? 0.0f : 1.0f, ws, stream_);
}

void CudaOps::linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool act_bf16, float* y) {
  gemm(cuda::linear_problem(bf16_fp8_weight(w), x, w.in(), w.out(), rows, act_bf16, y, w.weight.name));
}

void CudaOps::linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool act_bf16, float* y) {
  cuda::require_2d(w, "linear_bf16_gemm");
  gemm(cuda::linear_problem(bf16_weight(w), x, w.dim(1), w.dim(0), rows, act_bf16, y, w.name));
}

void CudaOps::linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) {
  if (w.dtype != DType::BF16) return linear_island(w, x, rows, y);
  linear_bf16_gemm(w, x, rows, /*act_bf16=*/false, y);
}

// §4.21 steps 2-3 as one batched GEMM: batch g = group g's wo_a rows [g*Or, (g+1)*Or)
// against o columns [g*cols, (g+1)*cols) into og columns [g*Or, (g+1)*Or).
void CudaOps::grouped_wo_a_gemm(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                                bool act_bf16, float* og) {
  const int64_t out = wo_a.out(), cols = wo_a.in();
  const int64_t o_rank = cuda::wo_a_group_rows(wo_a, groups, "grouped_wo_a_gemm");  // Or
  cuda::GemmProblem p = cuda::linear_problem(bf16_fp8_weight(wo_a), o, cols, o_rank, rows, act_bf16, og,
                                             wo_a.weight.name);
  p.a.x_stride = cols * groups;
  p.a.x_group = cols;
  p.a.y_stride = out;
  p.a.y_group = o_rank;
  p.a.w_group = o_rank;
  p.batches = groups;
  gemm(p);
}

}  // namespace dsv4
