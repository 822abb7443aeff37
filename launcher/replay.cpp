#include "launcher/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "launcher/boundary_dump.h"
#include "model/checkpoint.h"
#include "base/error.h"

namespace dsv4 {

namespace {
// max |a - b| over the elements; +inf when the sizes differ or a value is NaN.
template <class T>
double max_abs_diff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
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
  Stage stage(ckpt, ops, spec);
  log.info("replay of stage {} of {}: layers [{}, {}), {} resident bytes", rank, spec.n_ranks,
           spec.layers.begin, spec.layers.end, ckpt.bytes_loaded());

  bool all_equal = true;
  auto compare = [&](int op, const char* name, double diff) {
    std::printf("op %d %s: max |diff| = %.9g\n", op, name, diff);
    all_equal = all_equal && diff == 0.0;
  };
  for (int op = 0;; ++op) {
    const auto in = read_boundary_record(dir, rank, op, false);
    if (!in) break;
    const OpHeader& header = in->header;
    const size_t row_floats = static_cast<size_t>(mc.hc_mult) * mc.hidden_size;
    FBuf h = ops.alloc(static_cast<size_t>(header.rows()) * row_floats);  // [T, hc, H]
    if (!in->h.empty()) {
      if (in->h.size() != h.size())
        throw Error(cat(boundary_file(dir, rank, op, false), ": h has ", in->h.size(),
                        " floats, the header's ", header.rows(), " rows need ", h.size()));
      ops.upload(h.data(), in->h.data(), h.size());
    }
    const HeadOutput head = compute_operation(stage, ops, mc, header, h.data(), nullptr, true);
    const auto out = read_boundary_record(dir, rank, op, true);
    if (!out) continue;  // operations without an outgoing payload (commit, reset)
    if (!out->argmax.empty()) {
      compare(op, "logits", max_abs_diff(head.logits, out->logits));
      compare(op, "argmax", max_abs_diff(head.argmax, out->argmax));
    } else {
      std::vector<float> got(h.size());
      ops.download(got.data(), h.data(), got.size());
      compare(op, "h", max_abs_diff(got, out->h));
    }
  }
  std::printf("replay of stage %d: %s\n", rank, all_equal ? "all outputs match exactly"
                                                          : "outputs differ");
  return all_equal;
}

}  // namespace dsv4
