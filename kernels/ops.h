// The op set of MODEL.md behind one interface, implemented twice: the CPU reference
// (kernels/cpu, oracle arm: f64 in every island and chain) and CUDA (kernels/cuda).
// Model logic (stage/) is written once against this interface.
//
// Memory: every `float*` / `int32_t*` argument is BACKEND memory (host on cpu, device
// on cuda) unless its comment says "host". Weights are TensorViews into the mapped
// checkpoint; a backend makes them resident with prepare() before use (cuda keeps a
// device copy keyed by the view's host pointer). Shapes use the spec's symbols.
//
// Position-independent decode (issue 12, the CUDA graph of a plain decode step): the ops
// named *_dev and the "device step" ops below read the step's position and token from
// BACKEND memory (the stage's StepState, stage/workspace.h) instead of host arrays, and
// compute every position-dependent address there, so the calls of one plain decode step
// and all their arguments are the same at every position. Each *_dev op computes exactly
// what its host-array twin computes; a value the host twin refuses (a position outside
// the rope table, a token outside the vocabulary) is refused by the CPU backend and
// poisons the rows with NaN on CUDA (no host round trip to check it; the stage checks its
// inputs before writing the StepState, and NaN logits are refused by name downstream).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "kernels/numerics.h"
#include "kernels/rope_table.h"
#include "model/weight_memory.h"
#include "model/weights.h"

namespace dsv4 {

// Move-only owner of n elements of backend memory.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(T* p, size_t n, std::function<void(void*)> release)
      : ptr_(p), n_(n), release_(std::move(release)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      n_ = std::exchange(o.n_, 0);
      release_ = std::move(o.release_);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  T* data() const { return ptr_; }
  size_t size() const { return n_; }
  void reset() {
    if (ptr_ && release_) release_(ptr_);
    ptr_ = nullptr;
    n_ = 0;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
  std::function<void(void*)> release_;
};
using FBuf = DeviceBuffer<float>;
using IBuf = DeviceBuffer<int32_t>;

// A step whose op calls repeat exactly, for Ops::run_step (issue 12: one CUDA graph per
// (stage, row count)). owner and rows name the step (one graph each); buffers are the
// boundary memory it was issued with (h, taps, logits; null where absent): a step issued
// with other buffers is issued afresh.
struct StepKey {
  const void* owner = nullptr;
  int rows = 0;
  std::array<const void*, 3> buffers{};
  bool operator==(const StepKey&) const = default;
};

// How a backend ran the steps of Ops::run_step so far.
struct StepGraphCounts {
  int64_t plain = 0;     // bodies run op by op (no graphs, a warm-up, or a fresh key)
  int64_t captures = 0;  // bodies captured as a graph (then launched)
  int64_t replays = 0;   // graphs launched again without running the body
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;  // "cpu" or "cuda"

  // ---- memory ----
  virtual FBuf alloc(size_t n) = 0;        // zero-filled
  virtual IBuf alloc_i32(size_t n) = 0;    // zero-filled
  virtual void fill(float* dst, float value, size_t n) = 0;
  virtual void fill_i32(int32_t* dst, int32_t value, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;  // backend -> backend
  virtual void upload(float* dst, const float* host, size_t n) = 0;
  virtual void download(float* host, const float* src, size_t n) = 0;
  virtual void upload_i32(int32_t* dst, const int32_t* host, size_t n) = 0;
  virtual void download_i32(int32_t* host, const int32_t* src, size_t n) = 0;
  virtual void synchronize() = 0;
  // Makes a weight / table resident for this backend (idempotent).
  virtual void prepare(const TensorView& t) = 0;
  virtual void prepare(const RopeTable& t) = 0;
  // Memory for weights generated in place (synthetic weights, issue 11): host memory for
  // the CPU backend, this backend's device memory for CUDA; views it makes are resident.
  virtual std::unique_ptr<WeightMemory> make_weight_memory() = 0;

  // ---- elementwise / row ops ----
  // y[i] += x[i]
  virtual void add(float* y, const float* x, size_t n) = 0;
  // §4.1: h[t, c, :] = table[ids[t], :] for c < hc (ids host [s]); table BF16/F32 [V, H].
  // With hc = 1 this is a plain row gather (drafter Markov rows).
  virtual void embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h) = 0;
  // embed with ids in backend memory [s].
  virtual void embed_dev(const TensorView& table, const int32_t* ids, int s, int hc,
                         float* h) = 0;
  // §4.2: per row, y = w * (x * rsqrt(mean(x^2) + eps)); y may alias x.
  virtual void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps,
                       float* y) = 0;
  // §4.3: each of `vectors` vectors of width n scaled in place by rsqrt(mean(v^2) + eps).
  virtual void head_rms(float* v, int vectors, int n, double eps) = 0;
  // §4.7: rotates the last t.rope_dim dims of each of `heads` vectors of width `dim` in
  // every row; row r at position positions[r] (host [rows]); inverse = conjugate.
  virtual void rope(float* v, int rows, int heads, int dim, const RopeTable& t,
                    const int32_t* positions, bool inverse) = 0;
  // rope with positions in backend memory [rows].
  virtual void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                        const int32_t* positions, bool inverse) = 0;
  // head_rms(v, rows * heads, dim, eps), then rope_dev(v, rows, heads, dim, t, positions,
  // false), as one op (the decode step's q, §4.13).
  virtual void head_rms_rope_dev(float* v, int rows, int heads, int dim, double eps,
                                 const RopeTable& t, const int32_t* positions) = 0;
  // rope_dev(v, rows, heads, dim, t, positions, false), then hadamard_fp4(v, rows * heads,
  // dim, true), as one op (the decode step's indexer q, §4.18 step 1).
  virtual void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                                     const int32_t* positions) = 0;
  // §4.8: fake-quant of dims [0, dim - rd) of each row in groups of 64 (variant D1).
  virtual void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant) = 0;
  // §4.11 Hadamard (scale dim^-0.5) then, when fp4, §4.10 on each vector, in place.
  virtual void hadamard_fp4(float* v, int vectors, int dim, bool fp4) = 0;

  // ---- hyper-connections ----
  // §4.4: h [s, hc, H] -> y [s, H], post [s, hc], comb [s, hc, hc] (comb[t][j][k], j source).
  virtual void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p,
                      double norm_eps, double hc_eps, int sinkhorn_iters, float* y,
                      float* post, float* comb) = 0;
  // §4.5: out[t,k,:] = post[t,k] x[t,:] + sum_j comb[t,j,k] res[t,j,:]; out != res.
  virtual void hc_post(const float* x, const float* res, const float* post, const float* comb,
                       int s, int hc, int hidden, float* out) = 0;
  // §4.25 steps 1-3 (also the drafter exit head, SPECDECODE.md §2.7): y [s, H].
  virtual void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w,
                       double norm_eps, double hc_eps, float* y) = 0;
  // SPECDECODE.md §2.3 tap: out[t*out_stride + d] = (sum_c h[t,c,d] in f64, c ascending) / hc.
  virtual void hc_mean(const float* h, int s, int hc, int hidden, float* out,
                       int out_stride) = 0;

  // ---- linears (§3.3) ----
  // L-bf16: y[r,n] = sum_k a(x[r,k]) * W[n,k], f32 accumulation, a = bf16 rounding when
  // act_bf16. W is the exact dequantized FP8 weight (§3.4).
  virtual void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                          float* y) = 0;
  // L-bf16 with a BF16 (or bf16-exact F32) weight [out, in] (indexer weights_proj).
  virtual void linear_bf16(const TensorView& w, const float* x, int rows, bool act_bf16,
                           float* y) = 0;
  // L-island: f32 x, f32-widened weight [out, in], f64 accumulation on cpu, rounded once.
  virtual void linear_island(const TensorView& w, const float* x, int rows, float* y) = 0;
  // §4.21 steps 2-3: og [rows, G*Or] from o [rows, nh*D]; group g uses wo_a rows
  // [g*Or, (g+1)*Or) against o columns [g*nh*D/G, (g+1)*nh*D/G). L-bf16.
  virtual void grouped_wo_a(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                            bool act_bf16, float* og) = 0;
  // The same three products for the rows of a prefill or of a prefill chunk (issue 13),
  // chosen by the caller (stage/layer_prefill.cpp, layer_extend.cpp), never by a row
  // count. cuda runs them as tensor-core GEMMs (cuBLASLt, bf16 x bf16 -> f32: the weight
  // dequantized exactly to bf16, an f32 activation split exactly into three bf16 terms
  // when !act_bf16); their summation order depends on the shape, so a row is NOT
  // bit-identical to the ops above (R-I3 keeps decode and verify on those): bound by
  // MODEL.md §6.7 law 2's tolerance. cpu: the ops above.
  virtual void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                               float* y) = 0;
  virtual void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool act_bf16,
                                float* y) = 0;
  virtual void grouped_wo_a_gemm(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                                 bool act_bf16, float* og) = 0;
  // linear_island for a prefill's rows (the compressors' raw projections). cuda: a BF16
  // weight as the bf16 GEMM with x split exactly into three bf16 terms (every product the
  // island's f32 product, f32 sums in another order: law 2's tolerance); an F32-stored
  // weight (CHECKPOINT.md C12) by the island GEMV, as a GEMM would round it. cpu:
  // linear_island.
  virtual void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) = 0;

  // ---- compressor, indexer, attention ----
  // §4.16 steps 3-6 for n_blocks consecutive blocks. Rows have width Lc = c.latent().
  // Block b's own r rows are kv/score rows [b*r, (b+1)*r). When c.overlap, its "prev" r
  // rows are rows [(b-1)*r, b*r) for b >= 1 and, for b = 0, prev_kv/prev_score (r rows),
  // or (value 0, score -inf) when prev_kv is null. Scores are raw gate projections:
  // the op adds ape. Output row b (width c.d) is normed, roped at position
  // (first_block + b) * r, then act_quant (attention) or Hadamard+FP4 (indexer; both skipped
  // when num.indexer_quant == none).
  virtual void compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                               int n_blocks, const float* prev_kv, const float* prev_score,
                               int first_block, const RopeTable& rope, double norm_eps,
                               const Numerics& num, float* out) = 0;
  // §4.18 steps 4-7 / §6.5. q [rows, heads, dim], w [rows, heads] raw weights_proj
  // outputs; keys [*, dim]. Row t scores keys [0, n_visible[t]) (host [rows]):
  // score[j] = sum_h (h ascending) fl32(w[t,h]*wscale) * max(0, q[t,h,:].keys[j,:]) (D7),
  // keeps the min(width, n_visible[t]) best ordered (score desc, j asc) (D10) and writes
  // idx[t*idx_stride + col0 + slot] = index_base + j; slots up to `width` left are -1.
  virtual void indexer_topk(const float* q, const float* w, int rows, int heads, int dim,
                            float wscale, const float* keys, const int32_t* n_visible,
                            int width, int index_base, int32_t* idx, int idx_stride,
                            int col0) = 0;
  // indexer_topk with n_visible in backend memory [rows]; n_cap (host) bounds every
  // n_visible[t] (the keys the call may score: the indexer store's capacity).
  virtual void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim,
                                float wscale, const float* keys, const int32_t* n_visible,
                                int n_cap, int width, int index_base, int32_t* idx,
                                int idx_stride, int col0) = 0;
  // §4.20 with D12: o [rows, heads, dim] attends kv rows kv[idx[t*width + k]] in index
  // order; -1 entries are inert; sink F32 [heads] joins the denominator (and the max).
  virtual void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                              const int32_t* idx, int width, const TensorView& sink,
                              float scale, float* o) = 0;

  // ---- MoE ----
  // §4.22: sel [rows, k] and wt [rows, k]. Hash routing (b.tid2eid non-empty) uses
  // ids (host [rows]); score routing selects by sc + bias, ties to the lower id.
  virtual void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                     int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                     float* wt) = 0;
  // route with ids in backend memory [rows] (hash routing gathers tid2eid there).
  virtual void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                         int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                         float* wt) = 0;
  // §4.23-4.24: out[t] = sum over the row's experts in ascending id of expert(x[t]) * wt
  // (arm per num.expert_arm) + shared expert(x[t]), limit <= 0 disables the clamp.
  virtual void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                   const float* wt, int k, float swiglu_limit, const Numerics& num,
                   float* out) = 0;
  // The same for the rows of a prefill or a chunk (issue 13; chosen as the *_gemm linears
  // are): cuda groups the rows by expert and runs each expert's projections, and the
  // shared expert's, as tensor-core GEMMs; law 2's tolerance, not R-I3. cpu: moe.
  virtual void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                        const float* wt, int k, float swiglu_limit, const Numerics& num,
                        float* out) = 0;

  // ---- device step: plain decode of one row at the position p = *pos (backend) ----
  // §4.14 after x wkv^T: the window latent kv [dim] finished in place — rmsnorm(kv, norm, 1,
  // dim, eps), rope_dev(kv, 1, 1, dim, rope, pos), kv_act_quant(kv, 1, dim, rope.rope_dim,
  // variant), as one op — then copied to its ring slot ring[(p mod slots) * dim ..] (§6.3).
  virtual void finish_kv_at(float* kv, const TensorView& norm, int dim, double eps,
                            const RopeTable& rope, const int32_t* pos, KvQuant variant,
                            float* ring, int slots) = 0;
  // MODEL.md §4.15 / §4.17 / §4.19 decode row of p at a fixed width window + tail_width:
  // idx[k] = window_decode_row(p, window)[k] for k < window; then, ratio > 4, W + j for
  // the j < (p+1)/ratio completed blocks; every other column -1 (bit-inert pads, §6.8
  // law 3; ratio 4 leaves its tail to indexer_topk). n_visible[0] = (p+1)/4 when ratio 4
  // (null otherwise). tail_width bounds the blocks of every position the caller reaches.
  virtual void decode_index(const int32_t* pos, int ratio, int window, int tail_width,
                            int32_t* idx, int32_t* n_visible) = 0;
  // §6.4 at p: p's raw rows row_kv, row_score [Lc] go to pending row p mod r of the cur rows
  // of pend_* [slots, Lc] (rows [r, 2r) when c.overlap, else [0, r)); then, when
  // (p+1) mod r == 0, compress_blocks of that one block (first_block
  // j = p / r, prev = rows [0, r) when c.overlap) into store + j * c.d, then, when
  // c.overlap, the cur rows move to the prev rows. Otherwise nothing else changes.
  virtual void compress_at(const CompressorWeights& c, const int32_t* pos, const float* row_kv,
                           const float* row_score, float* pend_kv, float* pend_score,
                           const RopeTable& rope, double norm_eps, const Numerics& num,
                           float* store) = 0;

  // ---- head ----
  // out (host [rows]) = argmax per row, ties to the lowest index; -1 if the row has a NaN.
  virtual void argmax(const float* logits, int rows, int64_t n, int32_t* out) = 0;

  // ---- captured steps (issue 12) ----
  // Runs body(), the op calls of one step, whose calls and arguments the caller promises
  // are the same for equal keys and read every per-step value from backend memory (the
  // StepState, uploaded BEFORE run_step). The CPU backend and every decorator
  // (kernels/forwarding_ops.h) run the body. CUDA with step graphs on (make_cuda_ops):
  // a key's first run at a memory generation is plain (the warm-up: scratch grows,
  // weights become resident), the next one is captured as a graph and launched, later
  // ones launch the graph without running the body, until memory is allocated or freed
  // (the generation moves: a graph holds raw pointers) or the key's buffers change. In
  // the captured body no op may touch host memory (upload, download, synchronize,
  // argmax) or allocate: CUDA refuses such an op by name.
  virtual void run_step(const StepKey& key, const std::function<void()>& body) = 0;
  virtual StepGraphCounts step_graph_counts() const = 0;

  // ---- concurrent lines of a step (issue 12) ----
  // on_line(k), 1 <= k < kOpLines: the ops issued next run on line k, after every op issued
  // on the main line (0) before this call; on_line(0): back to the main line, which does not
  // wait. join_lines(): the main line waits for every line, and the ops issued next run on
  // it. Every op that touches host memory, allocates or synchronizes joins first, and so
  // does the end of a run_step body. Lines running at once must not write what another
  // reads or writes (the caller's promise; stage/layer_step.cpp). cpu and every decorator
  // but the forwarding of the call: ops run in the order issued, so lines change no value.
  static constexpr int kOpLines = 4;
  virtual void on_line(int line) = 0;
  virtual void join_lines() = 0;
};

// Throws an Error naming the line unless 0 <= line < Ops::kOpLines (Ops::on_line).
void require_op_line(int line);

std::unique_ptr<Ops> make_cpu_ops();
// Throws Error("backend: cuda ...") when the build has no CUDA or no device is usable.
// step_graphs: run_step captures and replays CUDA graphs (false: every step op by op, for
// debugging; run config cuda_graphs).
std::unique_ptr<Ops> make_cuda_ops(int device, bool step_graphs = true);
bool cuda_backend_built();
// CUDA devices this process sees (0 without the CUDA backend, a driver or a device).
int cuda_devices_visible();

}  // namespace dsv4
