// CUDA weight memory: synthetic tensors generated directly in device memory (issue 11),
// one thread per independent unit of CHECKPOINT.md §3.8 (an island element, a 128x128
// FP8 block, an FP4 group, a tid2eid row), with the rules of model/synthetic_values.h, so
// the bytes equal the host generator's (tests/gpu/test_weight_memory_twin.cpp). No host
// copy of the weights is made; the load-time value checks run on the device too.
#include <cuda_runtime.h>

#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"
#include "model/synthetic_values.h"
#include "model/value_checks.h"

namespace dsv4 {

namespace {

using namespace synth;

constexpr int kThreads = 256;
constexpr int kMaxExperts = 1024;  // tid2eid rows shuffle in a per-thread array

struct Recipe {  // the device-side copy of a SynthTensor's numbers
  uint64_t state;
  double lo, hi;
  int64_t rows, cols, experts, k;  // k: tid2eid columns
  bool bf16;
};

Recipe recipe_of(const SynthTensor& t) {
  Recipe r{t.state, t.lo, t.hi, t.rows, t.cols, t.experts, 0, t.dtype == DType::BF16};
  if (t.kind == SynthKind::tid2eid) r.k = t.shape.at(1);
  return r;
}

__device__ float master(const Recipe& r, int64_t row, int64_t col) {
  return master_at(r.state, static_cast<uint64_t>(row * r.cols + col), r.lo, r.hi);
}

__global__ void island_kernel(Recipe r, uint8_t* out) {
  const int64_t n = r.rows * r.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = master_at(r.state, static_cast<uint64_t>(i), r.lo, r.hi);
    if (r.bf16) reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(f32_bits(bf16_round(v)) >> 16);
    else reinterpret_cast<float*>(out)[i] = v;
  }
}

// One block per 128x128 tile: the tile's amax (exact in any order), then its codes.
__global__ void fp8_kernel(Recipe r, uint8_t* codes, uint8_t* scales) {
  __shared__ float warp_max[kThreads / 32];
  const int64_t r0 = int64_t{blockIdx.y} * kFp8Block, c0 = int64_t{blockIdx.x} * kFp8Block;
  const int64_t r1 = r0 + kFp8Block < r.rows ? r0 + kFp8Block : r.rows;
  const int64_t c1 = c0 + kFp8Block < r.cols ? c0 + kFp8Block : r.cols;
  const int64_t w = c1 - c0, n = (r1 - r0) * w;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) amax = fmaxf(amax, fabsf(master(r, r0 + i / w, c0 + i % w)));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int i = 0; i < kThreads / 32; ++i) amax = fmaxf(amax, warp_max[i]);
  const int k = fp8_block_exponent(amax);
  if (scales && threadIdx.x == 0) scales[int64_t{blockIdx.y} * gridDim.x + blockIdx.x] = e8m0_code(k);
  if (codes)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t row = r0 + i / w, col = c0 + i % w;
      codes[row * r.cols + col] = fp8_code(master(r, row, col), k);
    }
}

// One thread per 32-element group: its E8M0 scale and 16 packed bytes.
__global__ void mxfp4_kernel(Recipe r, uint8_t* packed, uint8_t* scales) {
  const int64_t groups = r.cols / kMxGroup, n = r.rows * groups;
  for (int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; g < n; g += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = g / groups, col0 = (g % groups) * kMxGroup;
    float x[kMxGroup], amax = 0.0f;
    for (int i = 0; i < kMxGroup; ++i) amax = fmaxf(amax, fabsf(x[i] = master(r, row, col0 + i)));
    const int k = mxfp4_group_exponent(amax);
    if (scales) scales[g] = e8m0_code(k);
    if (packed)
      for (int i = 0; i < kMxGroup; i += 2)
        packed[(row * r.cols + col0 + i) / 2] =
            static_cast<uint8_t>(mxfp4_nibble(x[i], k) | (mxfp4_nibble(x[i + 1], k) << 4));
  }
}

// max |master| over the tensor as f32 bits: non-negative floats order as unsigned ints,
// so atomicMax gives the exact maximum whatever the order.
__global__ void amax_kernel(Recipe r, unsigned* amax_bits) {
  const int64_t n = r.rows * r.cols;
  float amax = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    amax = fmaxf(amax, fabsf(master_at(r.state, static_cast<uint64_t>(i), r.lo, r.hi)));
  atomicMax(amax_bits, f32_bits(amax));
}

// One thread per 16-element group: its E4M3 block scale and 8 packed bytes.
__global__ void nvfp4_kernel(Recipe r, const unsigned* amax_bits, uint8_t* packed, uint8_t* scales) {
  const double s2 = nvfp4_scale_2(f32_from_bits(*amax_bits));
  const int64_t groups = r.cols / kNvGroup, n = r.rows * groups;
  for (int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; g < n; g += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = g / groups, col0 = (g % groups) * kNvGroup;
    float x[kNvGroup], amax = 0.0f;
    for (int i = 0; i < kNvGroup; ++i) amax = fmaxf(amax, fabsf(x[i] = master(r, row, col0 + i)));
    const uint8_t code = nvfp4_block_code(amax, s2);
    if (scales) scales[g] = code;
    if (packed)
      for (int i = 0; i < kNvGroup; i += 2)
        packed[(row * r.cols + col0 + i) / 2] = static_cast<uint8_t>(
            nvfp4_nibble(x[i], code, s2) | (nvfp4_nibble(x[i + 1], code, s2) << 4));
  }
}

__global__ void scalar_kernel(const unsigned* amax_bits, float* out) {
  *out = amax_bits ? static_cast<float>(nvfp4_scale_2(f32_from_bits(*amax_bits))) : 1.0f;
}

// One thread per row: Fisher-Yates over 0..E-1 with draws v*(E-1) .. (v+1)*(E-1)-1.
__global__ void tid2eid_kernel(Recipe r, int64_t vocab, int64_t* out) {
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vocab; v += int64_t{gridDim.x} * blockDim.x) {
    uint16_t perm[kMaxExperts];
    for (int i = 0; i < r.experts; ++i) perm[i] = static_cast<uint16_t>(i);
    uint64_t draw = static_cast<uint64_t>(v * (r.experts - 1));
    for (int64_t i = r.experts - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(unit_at(r.state, draw++) * static_cast<double>(i + 1));
      const uint16_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    for (int64_t j = 0; j < r.k; ++j) out[v * r.k + j] = perm[j];
  }
}

// The lowest element index that fails value_fault (atomicMin: exact in any order).
__global__ void fault_kernel(DType dtype, bool block_scale, const uint8_t* p, int64_t n, int width,
                             unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if (value_fault(dtype, p + i * width, block_scale) != ValueFault::none)
      atomicMin(first, static_cast<unsigned long long>(i));
}

unsigned grid_for(int64_t n) { return cuda::blocks_for(n, kThreads); }

class CudaWeightMemory final : public WeightMemory {
 public:
  explicit CudaWeightMemory(int device) : device_(device) {
    activate();
    DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DSV4_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(unsigned long long)));
  }
  ~CudaWeightMemory() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    for (void* p : blocks_) cudaFree(p);
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return cat("cuda device ", device_); }
  bool device() const override { return true; }

  TensorView generate(const SynthTensor& t) override {
    activate();
    const size_t nbytes = t.bytes();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes > 0 ? nbytes : 1);
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error(cat("cuda device ", device_, ": cannot allocate ", nbytes, " B for tensor ", t.name,
                      " after ", bytes_, " B of generated weights (", free_b, " B free of ", total_b,
                      "): the placement does not fit this GPU"));
    }
    blocks_.push_back(p);
    auto* out = static_cast<uint8_t*>(p);
    launch(t, out);
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
    bytes_ += nbytes;
    TensorView v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = out;
    v.nbytes = nbytes;
    v.storage = next_storage_id();
    v.on_device = true;
    return v;
  }

  void read(const TensorView& v, size_t offset, size_t n, void* host) const override {
    DSV4_CHECK(offset + n <= v.nbytes, "read of ", v.name, " past its ", v.nbytes, " bytes");
    activate();
    if (n == 0) return;
    DSV4_CUDA_CHECK(cudaMemcpyAsync(host, v.data + offset, n, cudaMemcpyDeviceToHost, stream_));
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  FaultAt first_fault(const TensorView& v, bool block_scale) const override {
    if (!has_value_checks(v.dtype) || v.nbytes == 0) return {};
    activate();
    const int width = static_cast<int>(dtype_size(v.dtype));
    const int64_t n = static_cast<int64_t>(v.nbytes) / width;
    const unsigned long long none = ~0ull;
    DSV4_CUDA_CHECK(cudaMemcpyAsync(scratch_, &none, sizeof none, cudaMemcpyHostToDevice, stream_));
    fault_kernel<<<grid_for(n), kThreads, 0, stream_>>>(v.dtype, block_scale, v.data, n, width,
                                                         static_cast<unsigned long long*>(scratch_));
    DSV4_CUDA_LAUNCH_CHECK();
    unsigned long long first = none;
    DSV4_CUDA_CHECK(cudaMemcpyAsync(&first, scratch_, sizeof first, cudaMemcpyDeviceToHost, stream_));
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (first == none) return {};
    uint8_t e[8];
    read(v, static_cast<size_t>(first) * width, width, e);
    return {value_fault(v.dtype, e, block_scale), static_cast<int64_t>(first)};
  }

  uint64_t bytes() const override { return bytes_; }
  uint64_t free_bytes() const override {
    activate();
    size_t free_b = 0, total_b = 0;
    DSV4_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return free_b;
  }

 private:
  void activate() const { DSV4_CUDA_CHECK(cudaSetDevice(device_)); }

  void launch(const SynthTensor& t, uint8_t* out) {
    const Recipe r = recipe_of(t);
    const int64_t fp8_grid_r = (t.rows + kFp8Block - 1) / kFp8Block, fp8_grid_c = (t.cols + kFp8Block - 1) / kFp8Block;
    const dim3 fp8_grid(static_cast<unsigned>(fp8_grid_c), static_cast<unsigned>(fp8_grid_r));
    unsigned* amax = static_cast<unsigned*>(scratch_);
    const bool nv = t.kind == SynthKind::nv_packed || t.kind == SynthKind::nv_scales || t.kind == SynthKind::nv_scale_2;
    if (nv) {
      DSV4_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(unsigned), stream_));
      amax_kernel<<<grid_for(t.rows * t.cols), kThreads, 0, stream_>>>(r, amax);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    switch (t.kind) {
      case SynthKind::island:
        island_kernel<<<grid_for(t.rows * t.cols), kThreads, 0, stream_>>>(r, out);
        break;
      case SynthKind::fp8_codes: fp8_kernel<<<fp8_grid, kThreads, 0, stream_>>>(r, out, nullptr); break;
      case SynthKind::fp8_scales: fp8_kernel<<<fp8_grid, kThreads, 0, stream_>>>(r, nullptr, out); break;
      case SynthKind::mx_packed:
        mxfp4_kernel<<<grid_for(t.rows * t.cols / kMxGroup), kThreads, 0, stream_>>>(r, out, nullptr);
        break;
      case SynthKind::mx_scales:
        mxfp4_kernel<<<grid_for(t.rows * t.cols / kMxGroup), kThreads, 0, stream_>>>(r, nullptr, out);
        break;
      case SynthKind::nv_packed:
        nvfp4_kernel<<<grid_for(t.rows * t.cols / kNvGroup), kThreads, 0, stream_>>>(r, amax, out, nullptr);
        break;
      case SynthKind::nv_scales:
        nvfp4_kernel<<<grid_for(t.rows * t.cols / kNvGroup), kThreads, 0, stream_>>>(r, amax, nullptr, out);
        break;
      case SynthKind::nv_scale_2: scalar_kernel<<<1, 1, 0, stream_>>>(amax, reinterpret_cast<float*>(out)); break;
      case SynthKind::one: scalar_kernel<<<1, 1, 0, stream_>>>(nullptr, reinterpret_cast<float*>(out)); break;
      case SynthKind::tid2eid:
        if (t.experts < 1 || t.experts > kMaxExperts)
          throw Error(cat("tensor ", t.name, ": tid2eid over ", t.experts, " experts exceeds the CUDA generator's ",
                          kMaxExperts));
        tid2eid_kernel<<<grid_for(t.shape.at(0)), kThreads, 0, stream_>>>(r, t.shape.at(0), reinterpret_cast<int64_t*>(out));
        break;
    }
    DSV4_CUDA_LAUNCH_CHECK();
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // the NVFP4 amax / the fault index
  std::vector<void*> blocks_;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<WeightMemory> CudaOps::make_weight_memory() {
  return std::make_unique<CudaWeightMemory>(device_);
}

}  // namespace dsv4
