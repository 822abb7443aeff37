// Drafters for speculative decoding (SPECDECODE.md §2, §5): the interface the round
// driver uses, and the DSpark drafter of the head stage.
//
// Protocol (one sequence): prime() after prefill, then per round propose() at the head
// of the round and write_rings() after the trunk commit, for committed positions only
// (R-D5, R-S5). The anchor of a proposal is the last position whose ring row exists.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/checkpoint.h"
#include "stage/layer.h"
#include "stage/stage.h"
#include "stage/workspace.h"

namespace dsv4 {

// R-D10: what a proposal contains.
struct Proposal {
  std::vector<int32_t> out_ids;    // [B + 1]: the head token, then draft j for position m0 + j
  std::vector<float> confidence;   // [B]: confidence[i] belongs to out_ids[i + 1] (logits)
  bool nan = false;                // S9: a drafter logits row had a NaN; drafts are noise
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual int block_size() const = 0;  // B
  // R-D5 prefill prime after a prompt of p0 tokens: taps [min(W, p0), n_t*H] (backend),
  // row i holds position p0 - min(W, p0) + i (the stage's prefill tap convention).
  virtual void prime(const float* taps, int64_t p0) = 0;
  // R-D5 commit: ring rows of positions m0 .. m0+n-1 from taps rows 0 .. n-1 (backend).
  virtual void write_rings(const float* taps, int64_t m0, int n) = 0;
  // R-D6..R-D10: B drafts after head token `head` at position anchor + 1.
  virtual Proposal propose(int32_t head, int64_t anchor) = 0;
  virtual void reset() = 0;  // a new sequence
};

// The DSpark drafter (mtp.* blocks) on the head stage. It maps its own view of
// embed.weight (S10) and the shared head matrix.
class DsparkDrafter final : public Drafter {
 public:
  // max_seq: the trunk's; draft rows reach max_seq + B - 1 (the plain rope table has
  // max_seq + B rows, §2.5).
  DsparkDrafter(Checkpoint& ckpt, Ops& ops, const Numerics& num, int64_t max_seq);
  ~DsparkDrafter() override;

  int block_size() const override { return B_; }
  void prime(const float* taps, int64_t p0) override;
  void write_rings(const float* taps, int64_t m0, int n) override;
  Proposal propose(int32_t head, int64_t anchor) override;
  void reset() override;

  int blocks() const { return static_cast<int>(blocks_.size()); }
  // Block k's ring cache [W + B, D]: rows [0, W) persistent, [W, W + B) transient.
  const LayerCache& ring(int k) const { return blocks_.at(static_cast<size_t>(k))->cache(); }
  // The live drafter state (§4.1): each block's persistent ring rows [0, W), raw bytes.
  std::vector<CacheClass> ring_classes() const;
  int64_t ring_pos() const { return ring_pos_; }  // positions with a ring row: [0, ring_pos)
  uint64_t resident_bytes() const;

 private:
  LayerContext context() { return LayerContext{ops_, cfg_, num_, *ws_, 0}; }
  void write_position(const float* tap, int64_t p);   // R-D4 + R-D5 for one position

  Ops& ops_;
  const ModelConfig& cfg_;
  Numerics num_;
  int64_t max_seq_;
  int B_, W_, R_;
  DrafterWeights w_;
  TensorView embed_table_, head_matrix_;
  RopeTable rope_;                              // plain, max_seq + B rows
  std::vector<std::unique_ptr<Layer>> blocks_;  // own the rings
  std::unique_ptr<Workspace> ws_;               // B rows
  FBuf h_;          // [B, hc, H]
  FBuf xc_, y_;     // [B, H] pre-norm collapse (kept for confidence), normed
  FBuf logits_;     // [B, V] logits_pre, then logits_post in place
  FBuf markov_e_;   // [B, R] Markov embeddings e_i
  FBuf bias_;       // [V]
  FBuf conf_in_;    // [B, H + R] concat(xc, e)
  FBuf conf_;       // [B]
  FBuf main_x_;     // [1, H]
  uint64_t weight_bytes_ = 0;
  int64_t ring_pos_ = 0;
};

// The drafter named by --drafter: "dspark" or "replay:SPEC" (stage/replay_drafter.h).
std::unique_ptr<Drafter> make_drafter(const std::string& name, Checkpoint& ckpt, Ops& ops,
                                      const Numerics& num, int64_t max_seq);

}  // namespace dsv4
