#include "launcher/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "launcher/boundary_dump.h"
#include "launcher/dump_manifest.h"
#include "model/checkpoint.h"
#include "model/error.h"

namespace dsv4 {

namespace {
// max |a - b| over the elements, 0 where the bits are equal (NaN confidences of S9);
// +inf when the sizes differ or only one value is NaN.
template <class T>
double max_abs_diff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

// Backend buffer of `floats` holding the dumped values when there are any (zero-filled
// otherwise, as the pipeline allocates it).
FBuf upload_or_zero(Ops& ops, const std::vector<float>& dumped, size_t floats,
                    const std::string& file, const char* name) {
  FBuf b = ops.alloc(floats);
  if (dumped.empty()) return b;
  if (dumped.size() != floats)
    throw Error(cat(file, ": ", name, " has ", dumped.size(), " floats, the header needs ", floats));
  ops.upload(b.data(), dumped.data(), floats);
  return b;
}
}  // namespace

bool replay_stage(const RunConfig& config, int rank, const std::string& dir, Ops& ops,
                  spdlog::logger& log) {
  const auto first = read_boundary_record(dir, rank, 0, false);
  if (!first)
    throw Error(cat("--replay ", dir, ": no ", boundary_file(dir, rank, 0, false),
                    " (was the run dumped with --dump-boundary, and is --stage-only ", rank,
                    " one of its ranks?)"));
  Checkpoint ckpt(config.model);
  const ModelConfig& mc = ckpt.config();
  StageSpec spec;
  spec.rank = rank;
  spec.n_ranks = first->n_ranks;
  spec.layers = first->layers;
  spec.max_seq = config.effective_max_seq(mc.max_position_embeddings);
  spec.numerics = config.numerics;
  spec.drafter = config.drafter != "none";
  check_replay_settings(dir, read_dump_manifest(dir), replay_settings(config, spec.max_seq));
  Stage stage(ckpt, ops, spec);
  // The head stage's drafter replays too: prime, proposals, ring writes (SPECDECODE §2.5).
  std::unique_ptr<Drafter> drafter;
  if (spec.drafter && spec.last())
    drafter = make_drafter(config.drafter, ckpt, ops, config.numerics, spec.max_seq);
  log.info("replay of stage {} of {}: layers [{}, {}), {} resident bytes{}", rank, spec.n_ranks,
           spec.layers.begin, spec.layers.end, ckpt.bytes_loaded(),
           drafter ? cat(", drafter ", config.drafter) : std::string());

  bool all_equal = true;
  auto compare = [&](int op, const char* name, double diff) {
    std::printf("op %d %s: max |diff| = %.9g\n", op, name, diff);
    all_equal = all_equal && diff == 0.0;
  };
  const size_t row_floats = static_cast<size_t>(mc.hc_mult) * mc.hidden_size;
  const size_t tap_row_floats = mc.dspark.target_layer_ids.size() * mc.hidden_size;
  FBuf round_taps;  // the open round's verify taps, read by its commit (as in Pipeline)
  for (int op = 0;; ++op) {
    const auto in = read_boundary_record(dir, rank, op, false);
    if (!in) break;
    const OpHeader& header = in->header;
    const std::string in_file = boundary_file(dir, rank, op, false);
    FBuf h = upload_or_zero(ops, in->h, static_cast<size_t>(header.rows()) * row_floats, in_file,
                            "h");  // [T, hc, H]
    FBuf taps;
    if (spec.drafter)
      taps = upload_or_zero(ops, in->taps,
                            static_cast<size_t>(boundary_tap_rows(header, mc)) * tap_row_floats,
                            in_file, "taps");
    float* op_taps = header.kind == OpKind::commit ? round_taps.data() : taps.data();
    const HeadOutput head =
        compute_operation(stage, ops, mc, header, h.data(), op_taps, true, drafter.get());
    if (header.kind == OpKind::verify && spec.last()) round_taps = std::move(taps);
    const auto out = read_boundary_record(dir, rank, op, true);
    if (!out) continue;  // operations without an outgoing payload (commit, reset)
    if (header.kind == OpKind::propose) {
      compare(op, "proposal ids", max_abs_diff(head.argmax, out->argmax));
      compare(op, "proposal confidence", max_abs_diff(head.scores, out->scores));
    } else if (!out->argmax.empty()) {
      compare(op, "logits", max_abs_diff(head.logits, out->logits));
      compare(op, "argmax", max_abs_diff(head.argmax, out->argmax));
    } else {
      std::vector<float> got(h.size());
      ops.download(got.data(), h.data(), got.size());
      compare(op, "h", max_abs_diff(got, out->h));
      if (spec.drafter) {
        std::vector<float> got_taps(taps.size());
        if (!got_taps.empty()) ops.download(got_taps.data(), taps.data(), got_taps.size());
        compare(op, "taps", max_abs_diff(got_taps, out->taps));
      }
    }
  }
  std::printf("replay of stage %d: %s\n", rank, all_equal ? "all outputs match exactly"
                                                          : "outputs differ");
  return all_equal;
}

}  // namespace dsv4
