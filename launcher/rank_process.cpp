#include "launcher/rank_process.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "comm/control_plane.h"
#include "comm/liveness.h"
#include "comm/data_plane.h"
#include "comm/device_staging.h"
#include "comm/mpi_check.h"
#include "comm/mpi_endpoint.h"
#include "comm/nccl_transport.h"
#include "kernels/ops.h"
#include "kernels/timed_ops.h"
#include "launcher/backend_default.h"
#include "launcher/boundary_dump.h"
#include "launcher/build_info.h"
#include "launcher/cli.h"
#include "launcher/device_select.h"
#include "launcher/fault_injection.h"
#include "launcher/http_server.h"
#include "launcher/logits_dump.h"
#include "launcher/output_files.h"
#include "launcher/process_exit.h"
#include "launcher/placement_plan.h"
#include "launcher/rank_log.h"
#include "launcher/replay.h"
#include "launcher/run_checks.h"
#include "launcher/run_config.h"
#include "launcher/signal_watch.h"
#include "launcher/startup_agreement.h"
#include "launcher/serve.h"
#include "launcher/spec_stats.h"
#include "launcher/text_cli.h"
#include "launcher/weight_source.h"
#include "model/checkpoint.h"
#include "base/call_failure.h"
#include "base/error.h"
#include "base/host.h"
#include "model/tokenizer.h"
#include "stage/coordinator.h"
#include "stage/depth_schedule.h"
#include "stage/pipeline.h"

namespace dsv4 {

namespace {

// How long a failing rank waits for the others to acknowledge (and they for its release).
constexpr double kFailureGraceSeconds = 10.0;

// Everything one rank holds for a run; members are destroyed in reverse order.
struct RankRuntime {
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<Ops> backend;
  std::unique_ptr<TimedOps> profiler;  // profile_ops: wraps the backend
  Ops* ops = nullptr;                  // what the rank computes with (profiler or backend)
  std::unique_ptr<Stage> stage;
  std::unique_ptr<Drafter> drafter;  // head rank of a speculative run
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<DataPlane> data;
  std::unique_ptr<Pipeline> pipeline;
  std::vector<LayerRange> ranges;  // the placement, one range per rank
  PlacementBytes bytes;            // census bytes per layer and the first / last extras
  FaultInjection faults;           // DSV4_FAULT_INJECT's share of this rank
  int64_t max_seq = 0;
  int device = -1;  // GPU of this rank (cuda backend)
};

std::unique_ptr<Ops> make_ops(const RunConfig& c, int device) {
  return c.backend == Backend::cuda ? make_cuda_ops(device, c.cuda_graphs, c.cuda_pdl) : make_cpu_ops();
}

// The largest boundary payload of the run in floats: h [T, hc, H] or taps [T, n_targets, H]
// of its longest operation (a prefill chunk, or a verify round of block_size + 1 rows; the
// stage's workspace is sized from the same rows).
size_t max_payload_floats(const Stage& stage, const ModelConfig& mc) {
  const StageSpec& spec = stage.spec();
  int64_t rows = std::max<int64_t>(1, stage.chunk_rows());
  if (spec.drafter) rows = std::max<int64_t>(rows, mc.dspark.block_size + 1);
  const size_t width = std::max<size_t>(static_cast<size_t>(mc.hc_mult),
                                        spec.drafter ? mc.dspark.target_layer_ids.size() : 0);
  return static_cast<size_t>(rows) * width * static_cast<size_t>(mc.hidden_size);
}

std::unique_ptr<DataPlane> make_data_plane(const RunConfig& c, MpiEndpoint& ep, Ops& ops,
                                           int device, size_t payload_floats,
                                           spdlog::logger& log) {
  if (c.effective_transport() == Transport::nccl) return make_nccl_transport(ep, device);
  if (c.backend == Backend::cpu) return make_mpi_transport(ep, HostStaging{});
  HostStaging staging;
  if (mpi_cuda_aware()) {  // MPI moves device memory itself
    staging.before_transfer = [&ops] { ops.synchronize(); };
    log.info("transport mpi: the MPI library is CUDA-aware; device pointers go to MPI");
    return make_mpi_transport(ep, std::move(staging));
  }
  staging.to_host = [&ops](float* host, const float* src, size_t n) { ops.download(host, src, n); };
  staging.from_host = [&ops](float* dst, const float* host, size_t n) { ops.upload(dst, host, n); };
  staging.buffer = alloc_pinned_floats(payload_floats);
  staging.buffer_floats = payload_floats;
  log.info("transport mpi: the MPI library is not CUDA-aware; payloads are staged through "
           "{:.1f} MiB of pinned host memory", payload_floats * sizeof(float) / 1048576.0);
  return make_mpi_transport(ep, std::move(staging));
}

PipelineHooks make_hooks(const RunConfig& cfg, const RankRuntime& rt, int rank,
                         std::shared_ptr<spdlog::logger> log) {
  PipelineHooks hooks;
  hooks.before_op = rt.faults.hook();
  TimedOps* profiler = rt.profiler.get();
  if (profiler) {  // the table covers every operation but the prefill
    hooks.before_op = [fault = hooks.before_op, profiler](int op, const OpHeader& h) {
      profiler->set_active(h.kind != OpKind::prefill);
      if (fault) fault(op, h);
    };
  }
  hooks.after_op = [log, profiler](int op, const OpHeader& h, double ms) {
    log->debug("op {} {} pos {} T {}: {:.3f} ms", op, op_kind_name(h.kind), h.pos, h.rows(), ms);
    check_rank_log();  // a log that cannot be written fails the run
    if (profiler && (h.kind == OpKind::decode || h.kind == OpKind::verify)) profiler->count_step();
  };
  if (!cfg.dump_boundary.empty()) {
    const StageSpec spec = rt.stage->spec();
    const ModelConfig& mc = rt.ckpt->config();
    hooks.boundary = [dir = cfg.dump_boundary, spec, &mc](const BoundaryRecord& rec) {
      write_boundary_record(dir, spec.rank, spec.n_ranks, spec.layers, mc, rec);
    };
  }
  return hooks;
}

// Weight-load progress: a bar on a terminal, else a line per 10 percent.
std::function<void(int, int)> load_progress(std::shared_ptr<spdlog::logger> log) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last = std::make_shared<int>(-1);
  return [log, tty, last](int loaded, int total) {
    const int percent = 100 * loaded / total;
    if (tty) {
      std::fprintf(stderr, "\rloading weights: %3d%% (%d/%d layers)%s", percent, loaded, total,
                   loaded == total ? "\n" : "");
      std::fflush(stderr);
    } else if (percent / 10 != *last / 10 || loaded == total) {
      log->info("loading weights: {}% ({}/{} layers)", percent, loaded, total);
    }
    *last = percent;
  };
}

// Start-up, part 1: config.json and the index only (no weight is read): the run checked
// against the model, and the placement every rank computes alike.
void plan_rank(const RunConfig& cfg, MpiEndpoint& ep, RankRuntime& rt,
               const std::shared_ptr<spdlog::logger>& log) {
  rt.faults = FaultInjection(fault_plan_from_env(ep.size()), ep.rank());
  rt.ckpt = open_weights(cfg);
  check_run_against_model(cfg, *rt.ckpt);
  const bool speculative = cfg.drafter != "none";
  rt.bytes = placement_bytes(*rt.ckpt, speculative);
  rt.ranges = plan_placement(cfg.placement, rt.bytes, ep.size());
  rt.max_seq = cfg.effective_max_seq(rt.ckpt->config().max_position_embeddings);
  if (ep.rank() == 0) {
    std::string split;
    for (const auto& r : rt.ranges)
      split += cat(split.empty() ? "" : " | ", r.begin, "-", r.end - 1);
    log->info("placement over {} rank(s): layers {}", ep.size(), split);
  }
}

// Start-up, part 2 (every rank agreed on part 1): the rank's weights, backend and stage.
void load_rank(const RunConfig& cfg, MpiEndpoint& ep, int local_rank, RankRuntime& rt,
               const std::shared_ptr<spdlog::logger>& log) {
  const int rank = ep.rank(), size = ep.size();
  const bool speculative = cfg.drafter != "none";
  int device = -1;
  if (cfg.backend == Backend::cuda) device = select_device(cfg.devices, rank, size, local_rank);
  rt.backend = make_ops(cfg, device);
  rt.ops = rt.backend.get();
  attach_backend_memory(*rt.ckpt, *rt.backend);
  const LayerRange mine = rt.ranges[static_cast<size_t>(rank)];
  const uint64_t need = stage_weight_bytes(rt.bytes, mine, rank == 0, rank == size - 1);
  const uint64_t free_before = refuse_unless_fits(*rt.backend, need, rank, mine);
  if (cfg.profile_ops) {
    rt.profiler = std::make_unique<TimedOps>(*rt.backend);
    rt.profiler->set_active(false);  // the hooks switch it on per operation
    rt.ops = rt.profiler.get();
  }

  StageSpec spec;
  spec.rank = rank;
  spec.n_ranks = size;
  spec.layers = rt.ranges[static_cast<size_t>(rank)];
  spec.max_seq = rt.max_seq;
  // An id run has one prefill; text runs and the server take prompts up to max_prompt.
  spec.max_prompt = !cfg.prompt_ids.empty() ? static_cast<int64_t>(cfg.prompt_ids.size())
                    : cfg.max_prompt > 0    ? cfg.max_prompt
                                            : rt.max_seq;
  spec.prefill_chunk = cfg.prefill_chunk;
  spec.on_layer_loaded = load_progress(log);
  spec.numerics = cfg.numerics;
  spec.drafter = speculative;
  rt.stage = std::make_unique<Stage>(*rt.ckpt, *rt.ops, spec);
  if (speculative && spec.last()) {
    rt.drafter = make_drafter(cfg.drafter, *rt.ckpt, *rt.ops, cfg.numerics, rt.max_seq);
    log->info("drafter {} (block size {})", cfg.drafter, rt.drafter->block_size());
  }

  std::string shards;
  for (const auto& s : rt.ckpt->shards_opened()) shards += (shards.empty() ? "" : ", ") + s;
  log->info("rank {} of {}: layers [{}, {}){}{}, backend {}{}, transport {}", rank, size,
            spec.layers.begin, spec.layers.end, spec.first() ? " + embed" : "",
            spec.last() ? " + head" : "", backend_name(*cfg.backend),
            device >= 0 ? cat(" (device ", device, ")") : std::string(),
            size > 1 ? transport_name(cfg.effective_transport()) : "none");
  log->info("resident bytes {} (stage {}), shards opened: {}", rt.ckpt->bytes_loaded(),
            rt.stage->resident_bytes(), shards.empty() ? "none" : shards);
  const uint64_t free_after = rt.backend->make_weight_memory()->free_bytes();
  log->info("memory: weights {:.3f} GB by the census of this rank's placement, {:.3f} GB free before "
            "load, {:.3f} GB after{}", need / 1e9, free_before / 1e9, free_after / 1e9,
            rt.ckpt->synthetic() ? cat(", generated in ", rt.ckpt->weight_memory()->name()) : std::string());
  log->info("weights by class: {}", stage_bytes_by_class(rt.bytes, mine, rank == 0, rank == size - 1));

  rt.device = device;
}

// Joins the ranks once every rank has loaded: the NCCL communicator's set-up is a
// collective, so it runs only after start-up errors were gathered (no rank waits in it
// for a rank that already failed).
void connect_rank(const RunConfig& cfg, MpiEndpoint& ep, RankRuntime& rt,
                  std::shared_ptr<spdlog::logger> log) {
  if (ep.size() > 1) {
    rt.control = make_mpi_control_plane(ep);
    rt.data = make_data_plane(cfg, ep, *rt.ops, rt.device,
                              max_payload_floats(*rt.stage, rt.ckpt->config()), *log);
  }
  rt.pipeline = std::make_unique<Pipeline>(*rt.stage, *rt.ops, rt.ckpt->config(),
                                           rt.control.get(), rt.data.get(),
                                           make_hooks(cfg, rt, ep.rank(), log),
                                           rt.drafter.get());
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// One speculative round for the log: the proposal, the verifier's ruling and what was
// committed (SPECDECODE.md §5.1; a stop at an accepted draft j commits j rows, S6).
std::string round_line(const SpecRound& r, const SpecResult& run, int index) {
  const int64_t m0 = r.start_pos + 1;
  if (r.t_batch == 0)
    return cat("round ", index, " at pos ", m0, ": proposal ", joined(r.drafts),
               ", budget spent: head token emitted, nothing verified or committed");
  const int committed = run.stopped ? r.emitted - 1 : r.emitted;
  return cat("round ", index, " at pos ", m0, ": proposal ", joined(r.drafts), ", verified ",
             r.t_batch, " rows, accepted ", r.accepts, " of ", r.t_batch - 1, " drafts, committed ",
             committed, " (positions ", m0, "..", m0 + committed - 1, "), emitted ", r.emitted,
             r.drafter_nan ? ", drafter NaN: noise drafts" : "", ", ",
             static_cast<int64_t>(r.round_us), " us");
}

// Rank 0 of a text or serve run: what rank 0 alone holds.
struct TextSide {
  std::unique_ptr<Tokenizer> tok;
  std::vector<int32_t> prompt;          // a text run's prompt ids
  std::unique_ptr<HttpServer> server;   // --serve
};

// S3: a speculative run's fixed depth, default block_size + 1, or with spec_depth auto
// each round's depth scheduled from a verify cost table (stage/depth_schedule.h); tmax 0:
// plain decoding.
struct SpecDepthPlan {
  int tmax = 0, cap = 0;
  std::optional<VerifyCosts> costs;  // spec_depth auto
  void apply(int& spec_tmax, int& depth_cap, const VerifyCosts*& auto_depth) const {
    spec_tmax = tmax;
    depth_cap = cap;
    auto_depth = costs ? &*costs : nullptr;
  }
  std::string name() const {
    return costs ? cat("auto, costs ", costs->source) : std::to_string(cap);
  }
};

SpecDepthPlan plan_spec_depth(const RunConfig& cfg, const ModelConfig& mc) {
  SpecDepthPlan plan;
  if (cfg.drafter == "none") return plan;
  plan.tmax = mc.dspark.block_size + 1;
  plan.cap = cfg.spec_depth > 0 ? cfg.spec_depth : plan.tmax;
  if (cfg.spec_depth == RunConfig::kSpecDepthAuto) {
    plan.costs = load_verify_costs(cfg.spec_costs);
    if (plan.costs->max_depth() < plan.tmax)
      throw Error(cat("spec costs ", plan.costs->source, ": verify_ms covers T = 1..",
                      plan.costs->max_depth(), ", the drafter verifies up to ", plan.tmax,
                      " rows (dspark_block_size + 1)"));
  }
  return plan;
}

// Rank 0's generation loop over this run's pipeline; prompts go in chunks of the
// stages' prefill operation rows (issue 13).
Coordinator rank0_coordinator(RankRuntime& rt) {
  return Coordinator(*rt.pipeline, rt.control.get(), rt.max_seq, rt.ckpt->config().vocab_size,
                     rt.stage->chunk_rows());
}

void serve_on_rank0(const RunConfig& cfg, const CliOptions& cli, RankRuntime& rt, TextSide& text,
                    spdlog::logger& log) {
  Coordinator coordinator = rank0_coordinator(rt);
  ServedModel model;
  model.name = cli.model_name.empty()
                   ? std::filesystem::path(cfg.model).lexically_normal().filename().string()
                   : cli.model_name;
  if (model.name.empty()) model.name = "dsv4";
  model.max_seq = rt.max_seq;
  model.max_prompt = rt.stage->spec().max_prompt;
  model.vocab = rt.ckpt->config().vocab_size;
  const SpecDepthPlan depth = plan_spec_depth(cfg, rt.ckpt->config());
  const StopSignalWatcher watcher(*text.server);
  text.server->set_ready(model);
  text.server->run_engine([&](const TextRequest& req) {
    TextRequest r = req;
    depth.apply(r.spec_tmax, r.depth_cap, r.auto_depth);
    return generate_text(coordinator, *text.tok, r);
  });
  coordinator.stop();
  log.info("server stopped; every rank is leaving");
}

void generate_on_rank0(const RunConfig& cfg, const CliOptions& cli, RankRuntime& rt,
                       spdlog::logger& log) {
  Coordinator coordinator = rank0_coordinator(rt);
  GenerationRequest req;
  req.prompt = cfg.prompt_ids;
  req.max_new = cfg.max_new;
  req.keep_logits = !cli.dump_logits.empty();
  req.stop_ids = cfg.stop_ids;
  const bool speculative = cfg.drafter != "none";
  req.sampling = run_sampling(cfg, log);
  const SpecDepthPlan depth = plan_spec_depth(cfg, rt.ckpt->config());
  depth.apply(req.spec_tmax, req.depth_cap, req.auto_depth);
  if (speculative)
    req.on_round = [&log](const SpecRound& r, const SpecResult& run) {
      log.debug("{}", round_line(r, run, static_cast<int>(run.rounds.size()) - 1));
    };
  const GenerationResult res = coordinator.generate(req);
  coordinator.stop();
  std::printf("tokens: %s\n", joined(res.tokens).c_str());
  std::fflush(stdout);
  if (res.stopped)
    log.info("stopped at stop id {} after {} tokens", res.tokens.back(), res.tokens.size());
  if (req.keep_logits)
    write_logits_json(cli.dump_logits, logits_json(req.prompt, res.tokens, res.logits));
  if (speculative) {
    const SpecSummary s = summarize(res);
    // Per generated token as plain decode counts it: the tokens after the prefill's.
    const auto after_prefill = static_cast<int64_t>(res.tokens.size()) - 1;
    log.info("speculative ({}, depth {}): {} rounds ({} verified), {:.3f} accepted drafts per "
             "round, {:.3f} tokens per round, {:.1f} us per round, decode {:.3f} ms, {:.4f} "
             "ms/token over {} tokens", cfg.drafter, depth.name(), s.rounds, s.verify_rounds,
             s.accepts_per_round, s.tokens_per_round, s.round_us, res.decode_ms,
             after_prefill > 0 ? res.decode_ms / static_cast<double>(after_prefill) : 0.0,
             after_prefill);
    if (!cli.spec_stats.empty())
      write_spec_stats(cli.spec_stats,
                       spec_stats_json(cfg.drafter, depth.costs ? cfg.spec_depth : req.depth_cap, res));
    return;
  }
  const double per_token = res.decode_steps ? res.decode_ms / res.decode_steps : 0.0;
  log.info("prefill {:.1f} ms ({} tokens), decode {:.2f} ms/token over {} steps, {:.1f} tokens/s",
           res.prefill_ms, req.prompt.size(), per_token, res.decode_steps,
           per_token > 0 ? 1000.0 / per_token : 0.0);
}

// The --profile-ops table, one log line per row.
void log_op_profile(const TimedOps& profiler, int rank, spdlog::logger& log) {
  log.info("rank {} op profile over {} step(s) (decode steps and verify rounds; prefill "
           "excluded; each op synchronized, so no CUDA graph is captured):", rank, profiler.steps());
  const std::string table = profiler.table();
  size_t begin = 0;
  while (begin < table.size()) {
    const size_t end = table.find('\n', begin);
    log.info("  {}", table.substr(begin, end - begin));
    begin = end == std::string::npos ? table.size() : end + 1;
  }
}

// Reports a line on the rank's logger, or on stderr before the logger exists.
void say(const std::shared_ptr<spdlog::logger>& log, int rank, const std::string& line) {
  if (log) {
    log->error(line);
  } else {
    std::fprintf(stderr, "[r%d] %s\n", rank, line.c_str());
  }
}

// After a run-time failure in a multi-rank job the MPI state holds requests to peers
// that are gone; the process ends without MPI_Finalize. The exit is logged and flushed
// before the failure protocol's last exchange (see below), because once the failing
// rank exits, mpirun may kill every rank that is still running.
void log_exit(const std::shared_ptr<spdlog::logger>& log, int code) {
  remove_partial_outputs();
  if (log) {
    log->debug("exit status {}", code);
    log->flush();
  }
  note_exit_decided(code);
  std::fflush(stdout);
  std::fflush(stderr);
}

// Gathers every rank's start-up error ("" when fine); when any rank failed, logs one
// line (this rank's error, or which rank stopped it) and returns true.
bool stopped_at_setup(MpiEndpoint& ep, const std::string& setup_error,
                      const std::shared_ptr<spdlog::logger>& log) {
  const int rank = ep.rank();
  const std::vector<std::string> errors = ep.gather_errors(setup_error);
  for (int k = 0; k < ep.size(); ++k) {
    const std::string& first = errors[static_cast<size_t>(k)];
    if (first.empty()) continue;
    if (k == rank) {
      say(log, rank, cat("rank ", rank, " failed: ", first));
    } else {
      const bool own = !setup_error.empty() && setup_error != first;
      say(log, rank, cat("rank ", rank, ": stopping because rank ", k, " failed",
                         own ? cat("; this rank's own error: ", setup_error) : ""));
    }
    log_exit(log, 1);  // flushed now: once rank 0 exits, mpirun may kill this rank
    return true;
  }
  return false;
}

// Start-up check of every output path (issue 17 item 4): before any work, so a bad path
// costs nothing. Rank 0 writes the JSON files and clears a previous dump's files.
void prepare_outputs(const RunConfig& cfg, const CliOptions& cli, int rank) {
  if (rank == 0 && !cli.dump_logits.empty()) prepare_output_file(cli.dump_logits, "--dump-logits");
  if (rank == 0 && !cli.spec_stats.empty()) prepare_output_file(cli.spec_stats, "--spec-stats");
  if (!cfg.dump_boundary.empty()) {
    prepare_output_dir(cfg.dump_boundary, "dump_boundary");
    if (rank == 0) clear_boundary_dump(cfg.dump_boundary);
  }
}

int run_rank(int argc, char** argv, MpiEndpoint& ep, int local_rank, LivenessMonitor& liveness) {
  const int rank = ep.rank(), size = ep.size();
  set_process_rank(rank);  // named by every CUDA / NCCL / MPI call failure
  std::shared_ptr<spdlog::logger> log;
  CliOptions cli;
  RunConfig cfg;
  RankRuntime rt;
  TextSide text;
  bool replay_equal = false;

  // Start-up, in three steps each closed by a collective that every living rank reaches
  // (so none waits for a rank that failed): parse and plan from config.json and the
  // index; agree across ranks on what to run; load. Each step's errors stop every rank.
  std::string setup_error;
  try {
    cli = parse_cli(argc, argv);
    if (cli.help || cli.version) {
      const std::string text = cli.help ? help_text() : version_text() + "\n";
      if (rank == 0) std::fputs(text.c_str(), stdout);
      return 0;
    }
    cfg = load_run_config(cli.config);
    apply_cli(cli, cfg);
    std::string backend_reason;
    if (!cfg.backend) {
      const BackendDefault chosen = default_backend(cuda_backend_built(), cuda_devices_visible());
      cfg.backend = chosen.backend;
      backend_reason = chosen.reason;
    }
    check_run_config(cfg);
    liveness.set_timeout(cfg.liveness_timeout_s);
    if (!cfg.log_dir.empty()) prepare_output_dir(cfg.log_dir, "log_dir");
    log = make_rank_logger(rank, cfg.log_dir);
    set_exit_logger(rank, log);
    log->info("{} on host {}, pid {}", version_text(), host_name(), static_cast<long>(getpid()));
    if (!backend_reason.empty()) log->info("{}", backend_reason);
    check_rank_log();
    if (!cli.stage_only) prepare_outputs(cfg, cli, rank);
    if (cli.stage_only) {
      if (size != 1)
        throw Error(cat("--stage-only: runs as a single process (started with ", size,
                        " ranks; drop mpirun -np)"));
      auto ops = make_ops(cfg, 0);
      replay_equal = replay_stage(cfg, *cli.stage_only, cli.replay, *ops, *log);
    } else {
      if (cli.serve) install_stop_signals();
      if (rank == 0 && (cli.serve || !cfg.prompt.empty())) {
        text.tok = std::make_unique<Tokenizer>(Tokenizer::load(cfg.model));
        if (!cfg.prompt.empty()) text.prompt = text_prompt_ids(cfg, *text.tok);
        if (cli.serve) text.server = std::make_unique<HttpServer>(*text.tok, cli.host, cli.port, log);
      }
      plan_rank(cfg, ep, rt, log);
    }
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  if (stopped_at_setup(ep, setup_error, log)) return 1;
  if (cli.stage_only) return replay_equal ? 0 : 1;

  const std::vector<AgreementItem> items = agreement_items(cfg, *rt.ckpt, rt.ranges);
  if (size > 1) {
    const std::string disagreement = startup_disagreement(ep, items);
    if (stopped_at_setup(ep, rank == 0 ? disagreement : std::string(), log)) return 1;
  }
  try {
    if (rank == 0 && !cfg.dump_boundary.empty())  // what a replay checks (boundary_dump.h)
      write_file_atomically(cat(cfg.dump_boundary, "/", kRunDescriptionFile), encode_items(items),
                            "dump_boundary");
    load_rank(cfg, ep, local_rank, rt, log);
  } catch (const std::bad_alloc&) {
    setup_error = cat("out of host memory while loading layers [", rt.ranges[static_cast<size_t>(rank)].begin, ", ",
                      rt.ranges[static_cast<size_t>(rank)].end, ") (max_seq ", rt.max_seq, ", sliding_window ",
                      rt.ckpt->config().sliding_window, " of ", rt.ckpt->config().source, ")");
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  if (stopped_at_setup(ep, setup_error, log)) return 1;

  try {
    connect_rank(cfg, ep, rt, log);
    if (rank == 0 && cli.serve) {
      serve_on_rank0(cfg, cli, rt, text, *log);
    } else if (rank == 0 && text.tok) {
      Coordinator coordinator = rank0_coordinator(rt);
      TextRequest req = text_request(cfg, *text.tok, text.prompt, *log);
      const SpecDepthPlan depth = plan_spec_depth(cfg, rt.ckpt->config());
      depth.apply(req.spec_tmax, req.depth_cap, req.auto_depth);
      run_text_on_rank0(*text.tok, coordinator, std::move(req), *log);
      coordinator.stop();
    } else if (rank == 0) {
      generate_on_rank0(cfg, cli, rt, *log);
    } else {
      rt.pipeline->serve();
    }
    if (rt.profiler) log_op_profile(*rt.profiler, rank, *log);
    if (const std::string missed = rt.faults.missed(); !missed.empty()) log->warn(missed);
    check_rank_log();
    log_exit(log, 0);
    return 0;
  } catch (const PeerFailed& f) {
    log->error("rank {}: stopping because rank {} failed", rank, f.failed_rank);
    log->debug("the error of rank {}: {}", f.failed_rank, f.what());
    log_exit(log, 1);
    ep.acknowledge_failure(f.failed_rank, kFailureGraceSeconds);  // a timeout changes nothing
    std::_Exit(1);
  } catch (const std::exception& e) {
    log->error("rank {} failed: {}", rank, e.what());
    if (size == 1) return 1;
    log_exit(log, 1);
    if (!ep.announce_failure(e.what(), kFailureGraceSeconds)) {
      log->error("rank {}: not every rank acknowledged the failure in time; aborting the job",
                 rank);
      log->flush();
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::_Exit(1);
  }
}

}  // namespace

int run_process(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  set_exit_logger(rank, nullptr);
  watch_stop_signals(rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "[r%d] rank %d failed: the MPI library lacks MPI_THREAD_MULTIPLE, which "
                 "the liveness heartbeat thread needs (comm/liveness.h)\n", rank, rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int local_rank = node_local_rank(MPI_COMM_WORLD);
  int code = 0;
  {
    LivenessMonitor liveness(MPI_COMM_WORLD, RunConfig::kDefaultLivenessTimeout,
                             [rank, &liveness](int silent_rank, double seconds) {
                               exit_process(1, spdlog::level::err,
                                            cat("rank ", rank, ": stopping because rank ",
                                                silent_rank, " stopped responding (no heartbeat "
                                                "for ", static_cast<int>(seconds),
                                                " s; liveness_timeout_s ", liveness.timeout(), ")"));
                             });
    MpiEndpoint ep(MPI_COMM_WORLD);
    code = run_rank(argc, argv, ep, local_rank, liveness);
    liveness.stop();
    // MPI_Finalize waits for every rank; one that froze after this rank stopped watching
    // must not hold it forever.
    const double timeout = liveness.timeout();
    if (timeout > 0)
      std::thread([timeout, code] {
        std::this_thread::sleep_for(std::chrono::duration<double>(timeout));
        std::_Exit(code);
      }).detach();
  }
  MPI_CHECK(MPI_Finalize());
  return code;
}

}  // namespace dsv4
