// The op set of MODEL.md behind one interface, implemented twice: the CPU reference
// (kernels/cpu, oracle arm: f64 in every island and chain) and CUDA (kernels/cuda).
// Model logic (stage/) is written once against this interface.
//
// The ops are declared in kernels/ops.def (each once, with what it computes); this class
// and the decorators (kernels/forwarding_ops.h) are expanded from that list.
//
// Memory: every `float*` / `int32_t*` argument is BACKEND memory (host on cpu, device
// on cuda) unless its comment says "host". Weights are TensorViews into the mapped
// checkpoint; a backend makes them resident with prepare() before use (cuda keeps a
// device copy keyed by the view's host pointer). Shapes use the spec's symbols.
//
// Position-independent decode (issue 12, the CUDA graph of a plain decode step and of a
// verify round of T rows): the ops named *_dev and the "device step" ops (ops.def) read
// the rows' positions and tokens from BACKEND memory (the stage's StepState,
// stage/workspace.h) instead of host arrays, and compute every position-dependent address
// there, so the calls of one plain decode step (or round of T rows) and all their
// arguments are the same at every position. Each *_dev op computes exactly
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
  static constexpr int kOpLines = 4;  // Ops::on_line's lines: the main line 0 and 1..3

  // The ops: one pure virtual per entry of kernels/ops.def, where each is declared and
  // documented once (a new op is one entry there; the file says how).
#define DSV4_OP(group, ret, op, params, args) virtual ret op params = 0;
#include "kernels/ops.def"

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
};

// Throws an Error naming the line unless 0 <= line < Ops::kOpLines (Ops::on_line).
void require_op_line(int line);

std::unique_ptr<Ops> make_cpu_ops();
// Throws Error("backend: cuda ...") when the build has no CUDA or no device is usable.
// step_graphs: run_step captures and replays CUDA graphs (false: every step op by op, for
// debugging; run config cuda_graphs). pdl: kernels launch with Programmatic Dependent
// Launch, each one's start overlapping the previous one's end (kernels/cuda/launch.cuh;
// the same bits either way; run config cuda_pdl).
std::unique_ptr<Ops> make_cuda_ops(int device, bool step_graphs = true, bool pdl = true);
bool cuda_backend_built();
// CUDA devices this process sees (0 without the CUDA backend, a driver or a device).
int cuda_devices_visible();

}  // namespace dsv4
