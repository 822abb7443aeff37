// CudaOps construction, memory, residency and the elementwise ops (add, embed).
#include "kernels/cuda/cuda_ops.h"

#include <cstring>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

using cuda::blocks_for;
using cuda::grid_rows;

namespace {

constexpr int kThreads = 256;
// The pinned upload ring: a decode step uploads tens of KB (positions, index rows, hash
// routes), so 16 MB wraps (one stream wait) about once every few hundred steps.
constexpr size_t kUploadRing = size_t{16} << 20;
constexpr size_t kUploadAlign = 64;

__global__ void fill_kernel(float* dst, float value, size_t n) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = value;
}
__global__ void fill_i32_kernel(int32_t* dst, int32_t value, size_t n) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = value;
}
__global__ void add_kernel(float* y, const float* x, size_t n) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    y[i] += x[i];
}

// §4.1: h[t, c, :] = table[ids[t], :] for c < hc (exact bf16 -> f32 widening); an id
// outside [0, vocab) gives a NaN row (embed_dev cannot refuse it by name, kernels/ops.h).
__global__ void embed_kernel(cuda::DenseW table, const int32_t* ids, int s, int hc, int hidden,
                             int64_t vocab, float* h) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (int t = blockIdx.y; t < s; t += gridDim.y) {
    const int64_t id = ids[t];
    const bool known = id >= 0 && id < vocab;
    const int64_t src = known ? id * hidden : 0;
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < hidden; d += gridDim.x * blockDim.x) {
      const float v = known ? table.at(src + d) : NAN;
      for (int c = 0; c < hc; ++c) h[(static_cast<int64_t>(t) * hc + c) * hidden + d] = v;
    }
  }
}

}  // namespace

CudaOps::CudaOps(int device, bool step_graphs, bool pdl)
    : device_(device), step_graphs_on_(step_graphs), pdl_(pdl) {
  activate();
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  main_ = stream_;
  for (int k = 1; k < kOpLines; ++k) {
    DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&lines_[k], cudaStreamNonBlocking));
    DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&line_fork_[k], cudaEventDisableTiming));
    DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&line_done_[k], cudaEventDisableTiming));
  }
  DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&split_stream_, cudaStreamNonBlocking));
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&split_fork_, cudaEventDisableTiming));
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&split_done_, cudaEventDisableTiming));
  DSV4_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ring_), kUploadRing, cudaHostAllocDefault));
  const size_t ticket_bytes = sizeof(unsigned) * kOpLines * static_cast<int>(Ticket::count);
  DSV4_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&tickets_), ticket_bytes));
  DSV4_CUDA_CHECK(cudaMemset(tickets_, 0, ticket_bytes));
}

CudaOps::~CudaOps() {
  // Destructors cannot throw: release what we own and ignore late errors.
  cudaSetDevice(device_);
  for (cudaStream_t s : lines_)
    if (s) cudaStreamSynchronize(s);
  if (main_) cudaStreamSynchronize(main_);
  if (split_stream_) cudaStreamSynchronize(split_stream_);
  graphs_ = StepGraphs<GraphExec>{};  // the graphs go before the memory they point to
  for (auto& [key, r] : weights_) cudaFree(r.ptr);
  for (auto& [key, r] : ropes_) cudaFree(r.ptr);
  for (auto& [key, e] : experts_) cudaFree(e.table.ptr);
  for (auto& [key, r] : hash_tables_) cudaFree(r.ptr);
  for (auto& line : scratch_)
    for (auto& s : line) cudaFree(s.ptr);
  if (ring_) cudaFreeHost(ring_);
  if (tickets_) cudaFree(tickets_);
  if (split_done_) cudaEventDestroy(split_done_);
  if (split_fork_) cudaEventDestroy(split_fork_);
  if (split_stream_) cudaStreamDestroy(split_stream_);
  for (int k = 1; k < kOpLines; ++k) {
    if (line_done_[k]) cudaEventDestroy(line_done_[k]);
    if (line_fork_[k]) cudaEventDestroy(line_fork_[k]);
    if (lines_[k]) cudaStreamDestroy(lines_[k]);
  }
  if (main_) cudaStreamDestroy(main_);
}

// Every op activates before it launches, so two CudaOps of one thread each launch with
// their own PDL setting (cuda::set_pdl is per thread).
void CudaOps::activate() const {
  DSV4_CUDA_CHECK(cudaSetDevice(device_));
  cuda::set_pdl(pdl_);
}

// Fork: line k waits for main_'s work so far (an event, so a capture takes the line in as
// a parallel branch); join: main_ waits for every open line's work.
void CudaOps::on_line(int line) {
  require_op_line(line);
  activate();
  line_ = line;
  if (line == 0) {
    stream_ = main_;
    return;
  }
  DSV4_CUDA_CHECK(cudaEventRecord(line_fork_[line], main_));
  DSV4_CUDA_CHECK(cudaStreamWaitEvent(lines_[line], line_fork_[line], 0));
  stream_ = lines_[line];
  lines_open_ |= 1u << line;
}

void CudaOps::join_lines() {
  for (int k = 1; k < kOpLines; ++k)
    if (lines_open_ & (1u << k)) {
      DSV4_CUDA_CHECK(cudaEventRecord(line_done_[k], lines_[k]));
      DSV4_CUDA_CHECK(cudaStreamWaitEvent(main_, line_done_[k], 0));
    }
  leave_lines();
}

void CudaOps::leave_lines() {
  lines_open_ = 0;
  line_ = 0;
  stream_ = main_;
}

void CudaOps::join_split() {
  if (!split_pending_) return;
  DSV4_CUDA_CHECK(cudaStreamWaitEvent(stream_, split_done_, 0));
  split_pending_ = false;
}

// ---- memory ----
// Buffers are zeroed on the compute stream: a plain cudaMemset runs on the legacy default
// stream, which a non-blocking stream does not wait for, so a kernel on stream_ could
// write the buffer before the zeroing landed on it (issue 10's nondeterminism).

// Every allocation and free moves the step-graph generation (kernels/step_graphs.h).
void* CudaOps::alloc_zeroed(size_t bytes) {
  refuse_in_capture("alloc", bytes);
  activate();
  join_lines();
  void* p = nullptr;
  if (bytes > 0) {
    DSV4_CUDA_CHECK(cudaMalloc(&p, bytes));
    DSV4_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    memory_moved();
  }
  return p;
}

std::function<void(void*)> CudaOps::releaser() const {
  return [dev = device_, generation = generation_](void* q) {
    cudaSetDevice(dev);
    cudaFree(q);
    ++*generation;
  };
}

FBuf CudaOps::alloc(size_t n) {
  return FBuf(static_cast<float*>(alloc_zeroed(n * sizeof(float))), n, releaser());
}

IBuf CudaOps::alloc_i32(size_t n) {
  return IBuf(static_cast<int32_t*>(alloc_zeroed(n * sizeof(int32_t))), n, releaser());
}

void CudaOps::fill(float* dst, float value, size_t n) {
  if (n == 0) return;
  activate();
  cuda::launch(fill_kernel, blocks_for(static_cast<int64_t>(n), kThreads), kThreads, 0, stream_, dst, value, n);
}

void CudaOps::fill_i32(int32_t* dst, int32_t value, size_t n) {
  if (n == 0) return;
  activate();
  cuda::launch(fill_i32_kernel, blocks_for(static_cast<int64_t>(n), kThreads), kThreads, 0, stream_, dst, value, n);
}

void CudaOps::copy(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  activate();
  join_split();
  DSV4_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void CudaOps::upload_bytes(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  refuse_in_capture("upload", bytes);  // a replay would copy the ring slot's later bytes
  activate();
  join_lines();  // the ring's wrap waits for main_ alone
  if (bytes > kUploadRing) {  // larger than the ring (load-time tables): a staged pageable copy
    DSV4_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  if (ring_used_ + bytes > kUploadRing) {  // wrap: every copy out of the ring has landed
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ring_used_ = 0;
  }
  uint8_t* slot = ring_ + ring_used_;
  std::memcpy(slot, host, bytes);
  ring_used_ += (bytes + kUploadAlign - 1) / kUploadAlign * kUploadAlign;
  DSV4_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaOps::upload(float* dst, const float* host, size_t n) { upload_bytes(dst, host, n * sizeof(float)); }

void CudaOps::download(float* host, const float* src, size_t n) {
  if (n == 0) return;
  refuse_in_capture("download", n * sizeof(float));
  activate();
  join_lines();
  join_split();
  DSV4_CUDA_CHECK(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::upload_i32(int32_t* dst, const int32_t* host, size_t n) {
  upload_bytes(dst, host, n * sizeof(int32_t));
}

void CudaOps::download_i32(int32_t* host, const int32_t* src, size_t n) {
  if (n == 0) return;
  refuse_in_capture("download_i32", n * sizeof(int32_t));
  activate();
  join_lines();
  join_split();
  DSV4_CUDA_CHECK(cudaMemcpyAsync(host, src, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::synchronize() {
  refuse_in_capture("synchronize", 0);
  activate();
  join_lines();
  join_split();
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaOps::scratch(Slot slot, size_t bytes) {
  Scratch& s = scratch_[line_][static_cast<int>(slot)];
  if (bytes > s.bytes) {
    refuse_in_capture("scratch growth", bytes);  // the warm-up step grows every slot
    activate();
    if (s.ptr) {
      DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));  // earlier kernels may still read it
      DSV4_CUDA_CHECK(cudaFree(s.ptr));
      s = Scratch{};
    }
    DSV4_CUDA_CHECK(cudaMalloc(&s.ptr, bytes));
    s.bytes = bytes;
    memory_moved();
  }
  return s.ptr;
}

const int32_t* CudaOps::stage_i32(Slot slot, const int32_t* host, size_t n) {
  auto* d = static_cast<int32_t*>(scratch(slot, (n > 0 ? n : 1) * sizeof(int32_t)));
  upload_bytes(d, host, n * sizeof(int32_t));
  return d;
}

// ---- residency ----

void CudaOps::prepare(const TensorView& t) { resident(t); }

const uint8_t* CudaOps::resident(const TensorView& t) {
  if (t.empty()) throw Error(cat("backend cuda: tensor '", t.name, "' has no data"));
  if (t.on_device) return t.data;
  const Key key{t.storage, t.data};
  auto it = weights_.find(key);
  if (it != weights_.end()) {
    DSV4_CHECK(it->second.nbytes == t.nbytes, "tensor ", t.name, " re-registered with ",
               t.nbytes, " bytes, resident copy has ", it->second.nbytes);
    return static_cast<const uint8_t*>(it->second.ptr);
  }
  void* p = device_copy(t.data, t.nbytes);
  weights_.emplace(key, Resident{p, t.nbytes});
  return static_cast<const uint8_t*>(p);
}

// On stream_ and waited for: a plain cudaMemcpy from pageable memory may return before its
// DMA lands, and the legacy stream it uses does not order the non-blocking stream_ that
// reads the copy next. Waiting also lets the caller unmap or free `host` at once.
void* CudaOps::device_copy(const void* host, size_t bytes) {
  refuse_in_capture("first use of a weight or table (its upload)", bytes);
  activate();
  void* p = nullptr;
  DSV4_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
  if (bytes > 0) DSV4_CUDA_CHECK(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, stream_));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return p;
}

cuda::DenseW CudaOps::dense(const TensorView& t, int64_t cols) {
  if (t.dtype != DType::BF16 && t.dtype != DType::F32)
    throw Error(cat("backend cuda: tensor '", t.name, "' has dtype ", dtype_name(t.dtype),
                    ", expected BF16 or F32"));
  cuda::DenseW w;
  w.p = resident(t);
  w.bf16 = t.dtype == DType::BF16;
  w.cols = cols;
  return w;
}

cuda::Fp8W CudaOps::fp8(const Fp8Linear& w) {
  if (w.weight.dtype != DType::F8_E4M3 || w.scale.dtype != DType::F8_E8M0 ||
      w.weight.shape.size() != 2)
    throw Error(cat("backend cuda: FP8 linear '", w.weight.name, "' needs F8_E4M3 [out, in] + F8_E8M0 scales"));
  const int64_t scale_rows = (w.out() + 127) / 128, scale_cols = (w.in() + 127) / 128;
  if (w.scale.numel() != scale_rows * scale_cols)
    throw Error(cat("backend cuda: scale '", w.scale.name, "' has ", w.scale.numel(),
                    " entries, expected ", scale_rows, "x", scale_cols));
  cuda::Fp8W d;
  d.codes = resident(w.weight);
  d.scales = resident(w.scale);
  d.cols = w.in();
  d.scale_cols = scale_cols;
  return d;
}

cuda::Fp4W CudaOps::fp4(const Fp4Linear& w) {
  const bool mx = w.recipe == ExpertRecipe::mxfp4;
  if (w.cols % w.group() != 0 || w.weight.nbytes != static_cast<size_t>(w.rows * (w.cols / 2)) ||
      w.scale.nbytes != static_cast<size_t>(w.rows * (w.cols / w.group())) ||
      w.scale.dtype != (mx ? DType::F8_E8M0 : DType::F8_E4M3))
    throw Error(cat("backend cuda: FP4 expert projection '", w.weight.name, "' [", w.rows, ", ",
                    w.cols, "] has inconsistent stored sizes or scale dtype"));
  cuda::Fp4W d;
  d.packed = resident(w.weight);
  d.scales = resident(w.scale);
  d.scale_2 = w.scale_2;
  d.cols = w.cols;
  d.group = w.group();
  d.nv = !mx;
  return d;
}

void CudaOps::prepare(const RopeTable& t) { rope_table(t); }

const float* CudaOps::rope_table(const RopeTable& t) {
  DSV4_CHECK(t.fc.size() == static_cast<size_t>(t.positions) * t.rope_dim, "rope table of ",
             t.positions, " positions has ", t.fc.size(), " entries");
  auto it = ropes_.find(t.id);
  if (it != ropes_.end()) return static_cast<const float*>(it->second.ptr);
  const size_t bytes = t.fc.size() * sizeof(float);
  void* p = device_copy(t.fc.data(), bytes);
  ropes_.emplace(t.id, Resident{p, bytes});
  return static_cast<const float*>(p);
}

// ---- elementwise ----

void CudaOps::add(float* y, const float* x, size_t n) {
  if (n == 0) return;
  activate();
  cuda::launch(add_kernel, blocks_for(static_cast<int64_t>(n), kThreads), kThreads, 0, stream_, y, x, n);
}

void CudaOps::embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h) {
  if (table.shape.size() != 2)
    throw Error(cat("embed: table '", table.name, "' must be 2-D [V, H]"));
  const int64_t vocab = table.dim(0);
  for (int t = 0; t < s; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error(cat("embed: token id ", ids[t], " at row ", t, " outside [0, ", vocab,
                      ") of '", table.name, "'"));
  if (s == 0) return;
  activate();
  embed_dev(table, stage_i32(Slot::host_args, ids, static_cast<size_t>(s)), s, hc, h);
}

void CudaOps::embed_dev(const TensorView& table, const int32_t* ids, int s, int hc, float* h) {
  if (table.shape.size() != 2)
    throw Error(cat("embed: table '", table.name, "' must be 2-D [V, H]"));
  if (s == 0) return;
  activate();
  const int64_t vocab = table.dim(0), hidden = table.dim(1);
  const cuda::DenseW w = dense(table, hidden);
  const dim3 grid(blocks_for(hidden, kThreads), grid_rows(s));
  cuda::launch(embed_kernel, grid, kThreads, 0, stream_, w, ids, s, hc, static_cast<int>(hidden), vocab, h);
}

// ---- factory ----

bool cuda_backend_built() { return true; }

int cuda_devices_visible() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return count;
}

std::unique_ptr<Ops> make_cuda_ops(int device, bool step_graphs, bool pdl) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    throw Error(cat("backend: cuda has no usable device (cudaGetDeviceCount: ",
                    err == cudaSuccess ? "0 devices" : cudaGetErrorString(err),
                    "); check the driver and CUDA_VISIBLE_DEVICES, or set backend: cpu"));
  }
  if (device < 0 || device >= count)
    throw Error(cat("backend: cuda device ", device, " requested but only ", count,
                    " device(s) are visible"));
  return std::make_unique<CudaOps>(device, step_graphs, pdl);
}

const CudaOps& cuda_backend(const Ops& ops, const char* what) {
  const auto* cuda_ops = dynamic_cast<const CudaOps*>(&ops);
  if (cuda_ops == nullptr) throw Error(cat(what, ": needs the cuda backend, got ", ops.name()));
  return *cuda_ops;
}

CudaOps& cuda_backend(Ops& ops, const char* what) {
  return const_cast<CudaOps&>(cuda_backend(static_cast<const Ops&>(ops), what));
}

}  // namespace dsv4
