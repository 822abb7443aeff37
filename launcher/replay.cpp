#include "launcher/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "launcher/boundary_dump.h"
#include "launcher/startup_agreement.h"
#include "launcher/weight_source.h"
#include "model/checkpoint.h"
#include "base/error.h"

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

namespace {
bool moves_rows(OpKind k) { return k == OpKind::prefill || k == OpKind::decode || k == OpKind::verify; }

// The dumped run's start-up items that must equal this replay's (the rest, e.g. the
// backend, may differ on purpose: a CUDA dump replayed on the CPU reference).
void check_run_description(const std::string& dir, const RunConfig& config, const Checkpoint& ckpt,
                           int rank, LayerRange layers) {
  const std::string path = cat(dir, "/", kRunDescriptionFile);
  std::ifstream in(path);
  if (!in) throw Error(cat("--replay ", dir, ": no ", path, " (not a complete --dump-boundary folder)"));
  std::stringstream text;
  text << in.rdbuf();
  const auto dumped = decode_items(text.str());
  const auto mine = agreement_items(config, ckpt, {});
  auto value_of = [&](const std::vector<AgreementItem>& items, const std::string& name) {
    for (const AgreementItem& item : items)
      if (item.name == name) return item.value;
    throw Error(cat(path, ": no item '", name, "'"));
  };
  for (const char* name : {"checkpoint config.json", "checkpoint weight map", "numerics", "max_seq",
                           "prefill_chunk", "drafter", "spec_depth"}) {
    const std::string was = value_of(dumped, name), now = value_of(mine, name);
    if (was != now)
      throw Error(cat("--replay ", dir, ": the dumped run's ", name, " is ", was, ", this replay's is ",
                      now, " (replay with the run's config and checkpoint)"));
  }
  const std::string placement = value_of(dumped, "placement");
  const std::string range = cat("[", layers.begin, ",", layers.end, ")");
  std::stringstream ranges(placement);
  std::string listed;
  for (int r = 0; r <= rank; ++r) ranges >> listed;
  if (listed != range)
    throw Error(cat("--replay ", dir, ": rank ", rank, "'s files hold layers ", range,
                    ", the dumped placement ", placement, " gives it ", listed));
}
}  // namespace

bool replay_stage(const RunConfig& config, int rank, const std::string& dir, Ops& ops,
                  spdlog::logger& log) {
  const int n_ops = count_dumped_operations(dir, rank);
  if (n_ops == 0)
    throw Error(cat("--replay ", dir, ": no ", boundary_file(dir, rank, 0, false),
                    " (was the run dumped with --dump-boundary, and is --stage-only ", rank,
                    " one of its ranks?)"));
  const auto first = read_boundary_record(dir, rank, 0, false);
  const std::unique_ptr<Checkpoint> weights = open_weights(config);
  Checkpoint& ckpt = *weights;
  attach_backend_memory(ckpt, ops);
  const ModelConfig& mc = ckpt.config();
  StageSpec spec;
  spec.rank = rank;
  spec.n_ranks = first->n_ranks;
  spec.layers = first->layers;
  spec.max_seq = config.effective_max_seq(mc.max_position_embeddings);
  spec.numerics = config.numerics;
  spec.prefill_chunk = config.prefill_chunk;  // the dumped run's (checked above)
  if (spec.layers.end > mc.num_hidden_layers)
    throw Error(cat(boundary_file(dir, rank, 0, false), ": layer_range [", spec.layers.begin, ", ",
                    spec.layers.end, ") past the model's ", mc.num_hidden_layers, " trunk layers (",
                    mc.source, ")"));
  check_run_description(dir, config, ckpt, rank, spec.layers);
  spec.drafter = config.drafter != "none";  // the dumped run's (checked above)
  Stage stage(ckpt, ops, spec);
  // The head stage's drafter replays too: prime, proposals, ring writes (SPECDECODE §2.5).
  std::unique_ptr<Drafter> drafter;
  if (spec.drafter && spec.last())
    drafter = make_drafter(config.drafter, ckpt, ops, config.numerics, spec.max_seq);
  log.info("replay of stage {} of {}: layers [{}, {}), {} resident bytes, {} operations{}", rank,
           spec.n_ranks, spec.layers.begin, spec.layers.end, ckpt.bytes_loaded(), n_ops,
           drafter ? cat(", drafter ", config.drafter) : std::string());

  bool all_equal = true;
  auto compare = [&](int op, const char* name, double diff) {
    std::printf("op %d %s: max |diff| = %.9g\n", op, name, diff);
    all_equal = all_equal && diff == 0.0;
  };
  const size_t row_floats = static_cast<size_t>(mc.hc_mult) * mc.hidden_size;
  const size_t tap_row_floats = mc.dspark.target_layer_ids.size() * mc.hidden_size;
  FBuf round_taps;  // the open round's verify taps, read by its commit (as in Pipeline)
  for (int op = 0; op < n_ops; ++op) {
    const std::string file = boundary_file(dir, rank, op, false);
    const auto in = read_boundary_record(dir, rank, op, false);
    const OpHeader& header = in->header;
    if (in->n_ranks != spec.n_ranks || in->layers.begin != spec.layers.begin ||
        in->layers.end != spec.layers.end)
      throw Error(cat(file, ": n_ranks ", in->n_ranks, ", layer_range [", in->layers.begin, ", ",
                      in->layers.end, ") differ from operation 0's (two runs in one folder?)"));
    const auto out = read_boundary_record(dir, rank, op, true);
    const bool rows = moves_rows(header.kind);
    const bool sends = rows || (header.kind == OpKind::propose && spec.last());
    if (sends != out.has_value())
      throw Error(cat(sends ? "missing " : "unexpected ", boundary_file(dir, rank, op, true), " (",
                      op_kind_name(header.kind), " ", sends ? "sends" : "sends nothing", ")"));
    if (rows) {  // what the stage requires of an operation (pipeline.cpp), checked by name
      if (header.rows() < 1 || (header.kind == OpKind::decode && header.rows() != 1))
        throw Error(cat(file, ": ", op_kind_name(header.kind), " of ", header.rows(), " rows"));
      if (header.pos != stage.pos())
        throw Error(cat(file, ": positions start at ", header.pos, ", but the operations before "
                        "it leave the stage at position ", stage.pos()));
      if (rank > 0 && in->h.empty())
        throw Error(cat(file, ": no tensor h (stage ", rank, " receives the hidden rows)"));
    }
    FBuf h = upload_or_zero(ops, in->h, static_cast<size_t>(header.rows()) * row_floats, file,
                            "h");  // [T, hc, H]
    FBuf taps;  // speculative runs: [T', n_targets, H], T' = min(W, T) for a prefill (S14)
    if (spec.drafter)
      taps = upload_or_zero(ops, in->taps,
                            static_cast<size_t>(boundary_tap_rows(header, mc)) * tap_row_floats,
                            file, "taps");
    float* op_taps = header.kind == OpKind::commit ? round_taps.data() : taps.data();
    HeadOutput head;
    try {
      head = compute_operation(stage, ops, mc, header, h.data(), op_taps, true, drafter.get());
    } catch (const Error& e) {
      throw Error(cat(file, ": ", e.what()));
    }
    if (header.kind == OpKind::verify && spec.last()) round_taps = std::move(taps);
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
