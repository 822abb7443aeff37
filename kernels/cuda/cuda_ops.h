// CudaOps: the CUDA twin of the CPU reference (kernels/ops.h). One stream per instance;
// weights are uploaded once as their stored bytes (FP8 / FP4 codes and scales are decoded
// in-register, so every kernel sees the exact dequantized value, CHECKPOINT.md §3).
// Every reduction has a fixed order and each row of a multi-row call is computed exactly
// as a single-row call (SPECDECODE.md §6.3). Accumulation: f32 (the serving arm of
// MODEL.md §3.2), f64 where every arm demands it (Sinkhorn). Internal header: the op
// families are implemented in kernels/cuda/<family>.cu.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/scratch_carve.h"
#include "kernels/ops.h"
#include "kernels/step_graphs.h"

namespace dsv4 {

namespace cuda {
enum class ExpertKernel;  // expert_kernel.h: the routed experts' kernel variant of moe
enum class TcGemvKernel;  // gemv_kernel.h: the tensor-core GEMV of the FP8 linears
enum class Fp4GemmKernel;  // expert_kernel.h: the native arm's prefill expert kernel
enum class CompressKernel;  // compress_kernel.h: the kernels of a compress_blocks call
struct GemvArgs;
struct HcPost;
struct GemmProblem;
class LtGemm;
}

// Move-only owner of an instantiated CUDA graph (StepGraphs' Graph) and of the graph it
// was instantiated from (whose nodes name the instance's: kernels/step_knockout.h).
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(cudaGraphExec_t e, cudaGraph_t source) : exec_(e), source_(source) {}
  GraphExec(GraphExec&& o) noexcept
      : exec_(std::exchange(o.exec_, nullptr)), source_(std::exchange(o.source_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    if (this != &o) {
      release();
      exec_ = std::exchange(o.exec_, nullptr);
      source_ = std::exchange(o.source_, nullptr);
    }
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() { release(); }
  cudaGraphExec_t get() const { return exec_; }
  cudaGraph_t source() const { return source_; }

 private:
  void release() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (source_) cudaGraphDestroy(source_);
  }
  cudaGraphExec_t exec_ = nullptr;
  cudaGraph_t source_ = nullptr;
};

class CudaOps final : public Ops {
 public:
  // pdl: launches carry the Programmatic Dependent Launch attribute (kernels/cuda/launch.cuh).
  CudaOps(int device, bool step_graphs, bool pdl);
  ~CudaOps() override;
  const char* name() const override { return "cuda"; }

  FBuf alloc(size_t n) override;
  IBuf alloc_i32(size_t n) override;
  void fill(float* dst, float value, size_t n) override;
  void fill_i32(int32_t* dst, int32_t value, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;
  void upload(float* dst, const float* host, size_t n) override;
  void download(float* host, const float* src, size_t n) override;
  void upload_i32(int32_t* dst, const int32_t* host, size_t n) override;
  void download_i32(int32_t* host, const int32_t* src, size_t n) override;
  void synchronize() override;
  void prepare(const TensorView& t) override;
  void prepare(const RopeTable& t) override;
  std::unique_ptr<WeightMemory> make_weight_memory() override;

  void add(float* y, const float* x, size_t n) override;
  void embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h) override;
  void embed_dev(const TensorView& table, const int32_t* ids, int s, int hc, float* h) override;
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps,
               float* y) override;
  void head_rms(float* v, int vectors, int n, double eps) override;
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t,
            const int32_t* positions, bool inverse) override;
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                const int32_t* positions, bool inverse) override;
  void head_rms_rope(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                     const int32_t* positions) override;
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                         const int32_t* positions) override;
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* positions) override;
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant) override;
  void finish_kv(float* kv, const TensorView& norm, int rows, int dim, double eps, const RopeTable& rope,
                 const int32_t* positions, KvQuant variant) override;
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override;

  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
              double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb) override;
  // hc_pre_norm: one launch (hc_pre_norm.cu; and the split) up to a few rows, else hc_pre and
  // rmsnorm (hc.cu).
  void hc_pre_norm(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                   double hc_eps, int sinkhorn_iters, const TensorView& norm, float* y, float* post,
                   float* comb, float* x) override;
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override;
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w,
               double norm_eps, double hc_eps, float* y) override;
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride) override;

  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                  float* y) override;
  void linear_bf16(const TensorView& w, const float* x, int rows, bool act_bf16,
                   float* y) override;
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override;
  void grouped_wo_a(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                    bool act_bf16, float* og) override;
  // linear_fp8 / grouped_wo_a with the tensor-core shapes on `kernel` (the twin test of
  // the ring against gemv_tc: cuda::linear_fp8_with, gemv_kernel.h).
  void linear_fp8_on(cuda::TcGemvKernel kernel, const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                     float* y);
  void grouped_wo_a_on(cuda::TcGemvKernel kernel, const Fp8Linear& wo_a, const float* o, int rows, int groups,
                       bool act_bf16, float* og);
  // The prefill GEMMs (kernels/cuda/gemm_prefill.cu).
  void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                       float* y) override;
  void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool act_bf16,
                        float* y) override;
  void grouped_wo_a_gemm(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                         bool act_bf16, float* og) override;
  void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) override;

  void compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                       int n_blocks, const float* prev_kv, const float* prev_score,
                       int first_block, const RopeTable& rope, double norm_eps,
                       const Numerics& num, float* out) override;
  // compress_blocks by `kernel` (cuda::compress_blocks_with, compress_kernel.h).
  void compress_blocks_on(cuda::CompressKernel kernel, const CompressorWeights& c, const float* kv,
                          const float* score, int n_blocks, const float* prev_kv, const float* prev_score,
                          int first_block, const RopeTable& rope, double norm_eps, const Numerics& num,
                          float* out);
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float wscale,
                    const float* keys, const int32_t* n_visible, int width, int index_base,
                    int32_t* idx, int idx_stride, int col0) override;
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim,
                        float wscale, const float* keys, const int32_t* n_visible, int n_cap,
                        int width, int index_base, int32_t* idx, int idx_stride,
                        int col0) override;
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override;
  void sink_attention_rope_dev(const float* q, int rows, int heads, int dim, const float* kv,
                               const int32_t* idx, int width, const TensorView& sink, float scale,
                               const RopeTable& t, const int32_t* positions, float* o) override;
  void sink_attention_gemm(const float* q, int rows, int heads, int dim, const float* kv,
                           const int32_t* idx, int width, const TensorView& sink, float scale,
                           float* o) override;

  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int n_experts, int k, float route_scale, int32_t* sel, float* wt) override;
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                 int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                 float* wt) override;
  void route_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                  int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                  float* wt) override;
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float swiglu_limit, const Numerics& num, float* out) override;
  // moe_hc_post: moe whose combine kernels also write hc_post's outputs (moe.cu).
  void moe_hc_post(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                   const float* wt, int k, float swiglu_limit, const Numerics& num, float* out,
                   const float* res, const float* post, const float* comb, int hc,
                   float* h) override;
  // moe with its routed experts on the variant `kernel` (moe: shipped), for the twin test
  // of the shipped kernel's variants (cuda::moe_with, expert_kernel.h); the native arm
  // runs the fragment-layout kernel and takes `shipped` alone.
  void moe_on(cuda::ExpertKernel kernel, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
              const float* wt, int k, float swiglu_limit, const Numerics& num, float* out,
              const cuda::HcPost* post = nullptr);
  // The prefill MoE, grouped by expert (kernels/cuda/moe_prefill.cu): moe_gemm_on with
  // the native arm's kernel chosen for the device (Fp4GemmKernel::automatic).
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                const float* wt, int k, float swiglu_limit, const Numerics& num,
                float* out) override;
  // moe_gemm with the native arm's routed experts on `kernel` (cuda::moe_gemm_with,
  // expert_kernel.h: the twin test and the dev bench run both kernels).
  void moe_gemm_on(cuda::Fp4GemmKernel kernel, const BlockWeights& b, const float* x, int rows,
                   const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num,
                   float* out);
  int device() const { return device_; }

  void finish_kv_at(float* kv, const TensorView& norm, int dim, double eps, const RopeTable& rope,
                    const int32_t* pos, KvQuant variant, float* ring, int slots) override;
  void decode_index(const int32_t* pos, int rows, int ratio, int window, int tail_width,
                    int trans_base, int32_t* idx, int32_t* n_visible) override;
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* row_kv,
                   const float* row_score, float* pend_kv, float* pend_score,
                   const RopeTable& rope, double norm_eps, const Numerics& num,
                   float* store) override;

  void argmax(const float* logits, int rows, int64_t n, int32_t* out) override;

  void run_step(const StepKey& key, const std::function<void()>& body) override;
  StepGraphCounts step_graph_counts() const override { return graphs_.counts(); }
  // f(graph) for every step graph held now (kernels/step_knockout.h).
  void for_each_step_graph(const std::function<void(const GraphExec&)>& f) const { graphs_.for_each_graph(f); }
  void on_line(int line) override;
  void join_lines() override;

 private:
  // Grow-only device scratch, one per purpose, reused across calls (stream-ordered).
  // hc_part: hc_pre's mix partials, which the Sinkhorn split reads on split_stream_ (its
  // own slot: no other op may reuse it while the split runs). gemm_*: the prefill GEMMs'
  // bf16 weight, bf16 activation terms and cuBLASLt workspace.
  enum class Slot { host_args, f32_a, f32_b, hc_part, gemm_w, gemm_x, gemm_ws, count };

  // The counters of the last-block kernels (kernels/cuda/last_block.cuh), one per kind and
  // line (lines run at once), zero between launches.
  enum class Ticket { hc_pre_norm, sink_attention, count };
  unsigned* ticket(Ticket t) const { return tickets_ + line_ * static_cast<int>(Ticket::count) + static_cast<int>(t); }

  void activate() const;  // cudaSetDevice(device_), and this thread's launches take pdl_
  // hc_pre with the mix chosen by the caller: prefill_mix, a prefill chunk's f64 tensor-core
  // mix (within law 2's tolerance), else the shipped one (every device step's rows: R-I3).
  void hc_pre_mix(bool prefill_mix, const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                  double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb);
  // hc_pre's Sinkhorn split (post, comb) runs on split_stream_, off the critical path
  // (issue 12: 86 serial f64 chains of ~24 us per token); only hc_post reads post / comb
  // in a step. join_split() orders stream_ after the pending split; hc_post, hc_pre,
  // hc_head, copy, download*, synchronize and the destructor call it, so every reader of
  // post / comb — and any host read — sees the split done. Events, not host waits: the
  // fork and join are captured into a CUDA graph as a parallel branch.
  void join_split();
  // Back on the main line with no line open, waiting for nothing (join_lines' end; a
  // failed capture's lines are dropped with it).
  void leave_lines();
  // Refuses (Error naming `what`) an operation that a graph cannot replay (a host copy,
  // a synchronization, an allocation) while a step is being captured.
  void refuse_in_capture(const char* what, size_t bytes) const;
  // Memory was allocated or freed: every step graph is stale (kernels/step_graphs.h).
  void memory_moved() { ++*generation_; }
  // Captures body on stream_ and instantiates it; a failure ends the capture, leaves the
  // stream usable and throws an Error naming the step and the failed op.
  GraphExec capture(const StepKey& key, const std::function<void()>& body);
  // cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize) once per larger size (not
  // per call: a captured step issues no attribute calls after its warm-up).
  void allow_smem(const void* kernel, size_t bytes);
  void* scratch(Slot slot, size_t bytes);
  void* alloc_zeroed(size_t bytes);                // cudaMalloc, zeroed on stream_
  std::function<void(void*)> releaser() const;    // a handed-out buffer's cudaFree
  float* scratch_f32(Slot slot, size_t n) { return static_cast<float*>(scratch(slot, n * 4)); }
  // One scratch carved into parts of these float counts, each 32-byte aligned (scratch_carve.h).
  template <size_t N>
  std::array<float*, N> carve_scratch(Slot slot, const std::array<int64_t, N>& sizes) {
    return cuda::carve(scratch_f32(slot, cuda::carved_floats(sizes)), sizes);
  }
  // Host int32 array -> device scratch (no cudaMalloc on the hot path once grown).
  const int32_t* stage_i32(Slot slot, const int32_t* host, size_t n);
  // Every host -> device copy of the step: through the pinned upload ring, so the copy is
  // truly asynchronous (a pageable cudaMemcpyAsync waits for the stream to drain first,
  // which stalled the GPU at every upload: issue 12's "host uploads"). The caller may
  // reuse `host` at once.
  void upload_bytes(void* dst, const void* host, size_t bytes);

  // Device copy of a weight's stored bytes, uploaded on first use (prepare is idempotent);
  // a view already in device memory (on_device) is used in place. Keyed by (storage,
  // address): a freed host block's address comes back for other bytes (issue 10: stale
  // rope tables of destroyed stages were served to new ones).
  const uint8_t* resident(const TensorView& t);
  void* device_copy(const void* host, size_t bytes);  // cudaMalloc + a completed upload
  cuda::DenseW dense(const TensorView& t, int64_t cols);  // BF16 / F32, refuses others
  cuda::Fp8W fp8(const Fp8Linear& w);
  cuda::Fp4W fp4(const Fp4Linear& w);
  const float* rope_table(const RopeTable& t);  // device fc [positions, rd]
  // A layer's routed experts on the device for one expert arm, built once per block (keyed
  // by expert 0's w1 bytes): the bf16 arm, the checkpoint layout and a cuda::ExpertW [E]
  // table; the native arm, the projections relaid in place into the fragment layout
  // (expert_fp4.cuh) and a cuda::ExpertFrag [E] table. Refuses, by name, a call whose arm
  // is not the one the bytes are laid out for (moe.cu says why), and a projection whose
  // device bytes the arm's cp.async copies cannot read.
  struct ExpertTable;
  const ExpertTable& expert_table(const BlockWeights& b, int hidden, ExpertArm arm);
  // The slot grouping's shared memory holds `slots` slots and the layer's experts (refused by name).
  void check_grouping(const BlockWeights& b, int64_t slots) const;
  // The routed experts of `rows` rows in passes of up to 256, each pass combined with the
  // shared expert's output sh [rows, hidden] into out (moe.cu): on the shipped kernel (the
  // bf16 arm, `kernel`'s variant) or the fragment kernel (the native arm). moe's decode
  // and verify rows; moe_gemm has its own kernels on the same layouts (moe_prefill.cu).
  // post (moe_hc_post): each combine also writes hc_post of its rows, after join_split.
  void routed_shipped(cuda::ExpertKernel kernel, const BlockWeights& b, const ExpertTable& table, const float* x,
                      int rows, const int32_t* sel, const float* wt, int k, float limit, bool act_bf16,
                      const float* sh, float* out, const cuda::HcPost* post);
  void routed_fragment(const BlockWeights& b, const ExpertTable& table, const float* x, int rows,
                       const int32_t* sel, const float* wt, int k, float limit, const float* sh, float* out,
                       const cuda::HcPost* post);
  // sink_attention, then (rope set) rope_dev(o, ..., *rope, positions, inverse) in its
  // combine kernel (attention.cu).
  void sink_attention_at(const float* q, int rows, int heads, int dim, const float* kv, const int32_t* idx,
                         int width, const TensorView& sink, float scale, const RopeTable* rope,
                         const int32_t* positions, float* o);
  // Device copy of a hash layer's tid2eid [V, k], checked once against [0, n_experts);
  // keyed by the block's gate weight (the table's own vector has no storage identity).
  const int32_t* hash_table(const BlockWeights& b, int n_experts, int k);
  // route / route_gemm (host ids, refused by name, then staged) and route_dev (device ids):
  // the gate logits by linear_island_gemm when `gemm`, else by linear_island, then the
  // ranking kernel (route.cu).
  void route_host_ids(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                      int n_experts, int k, float route_scale, bool gemm, int32_t* sel, float* wt);
  void route_device_ids(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                        int n_experts, int k, float route_scale, bool gemm, int32_t* sel, float* wt);

  // The GEMV family of linear.cuh: one problem (groups on grid.z; FP8 tensor-core shapes on
  // `tc`, value-initialized: shipped), its fast path (false, nothing launched, when x's
  // layout does not allow 128-bit loads), and the plain case y [rows, n_out] = x [rows,
  // k_in] W^T.
  template <class W>
  void gemv(const W& w, const cuda::GemvArgs& a, int groups, cuda::TcGemvKernel tc = {});
  template <class C>
  bool gemv_chunks(const C& c, cuda::GemvArgs a, int groups);
  template <class W>
  void gemv_rows(const W& w, const float* x, int64_t k_in, bool act_bf16, float* y, int64_t n_out,
                 int rows, cuda::TcGemvKernel tc = {});

  // The prefill GEMMs: the weight as bf16 in Slot::gemm_w (the FP8 codes x block scales
  // dequantized exactly, or an F32 weight's bf16-exact values; a BF16 weight is used in
  // place), then `a` run by cuBLASLt (gemm_prefill.cu).
  const uint16_t* bf16_fp8_weight(const Fp8Linear& w);
  const uint16_t* bf16_weight(const TensorView& w);
  void gemm(cuda::GemmProblem a);

  int device_ = 0;
  int sm_count_ = 0;  // multiprocessors of the device (the GEMV's split rule)
  // stream_ is the stream of the current line (Ops::on_line): main_ or lines_[line_].
  cudaStream_t stream_ = nullptr;
  cudaStream_t main_ = nullptr;
  cudaStream_t lines_[kOpLines] = {};  // [0] unused: line 0 is main_
  cudaEvent_t line_fork_[kOpLines] = {}, line_done_[kOpLines] = {};
  int line_ = 0;
  unsigned lines_open_ = 0;  // bit k: line k has work main_ has not joined
  cudaStream_t split_stream_ = nullptr;
  cudaEvent_t split_fork_ = nullptr, split_done_ = nullptr;
  bool split_pending_ = false;
  bool step_graphs_on_ = true;
  bool pdl_ = true;
  bool capturing_ = false;
  // Bumped by every allocation, free and scratch growth; shared with the release of every
  // buffer handed out (a buffer may be freed after this object).
  std::shared_ptr<uint64_t> generation_ = std::make_shared<uint64_t>(0);
  StepGraphs<GraphExec> graphs_;
  std::map<const void*, size_t> smem_allowed_;  // kernel -> dynamic shared bytes set
  using Key = std::pair<uint64_t, const void*>;  // (TensorView::storage, data)
  struct Resident { void* ptr; size_t nbytes; };
  std::map<Key, Resident> weights_;
  std::map<uint64_t, Resident> ropes_;  // keyed by RopeTable::id
  struct ExpertTable {
    Resident table;
    int inter;  // the common expert width I
    ExpertArm arm;
  };
  std::map<Key, ExpertTable> experts_;  // keyed by expert 0's w1 bytes
  std::map<const uint8_t*, ExpertArm> expert_layout_;  // a projection's device codes -> the arm of their layout
  std::map<Key, Resident> hash_tables_;  // keyed by the gate weight's bytes
  struct Scratch { void* ptr = nullptr; size_t bytes = 0; };
  Scratch scratch_[kOpLines][static_cast<int>(Slot::count)];  // per line: lines run at once
  uint8_t* ring_ = nullptr;  // pinned host memory, kUploadRing bytes
  unsigned* tickets_ = nullptr;  // device [kOpLines, Ticket::count], zeroed
  // cuBLASLt handle and the algorithm chosen per shape, made on first use (a shared_ptr
  // so this header needs no cuBLASLt types; gemm_prefill.cu owns the deleter).
  std::shared_ptr<cuda::LtGemm> lt_;
  size_t ring_used_ = 0;
};

// The CUDA backend behind `ops`, or an Error "<what>: needs the cuda backend, got <name>"
// (the cuda::*_with entry points the twin tests and dev benches call).
CudaOps& cuda_backend(Ops& ops, const char* what);
const CudaOps& cuda_backend(const Ops& ops, const char* what);

}  // namespace dsv4
