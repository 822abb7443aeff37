#include "launcher/rank_process.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "comm/control_plane.h"
#include "comm/data_plane.h"
#include "comm/mpi_check.h"
#include "comm/mpi_endpoint.h"
#include "comm/nccl_transport.h"
#include "kernels/ops.h"
#include "kernels/timed_ops.h"
#include "launcher/boundary_dump.h"
#include "launcher/cli.h"
#include "launcher/device_select.h"
#include "launcher/dump_manifest.h"
#include "launcher/fault_injection.h"
#include "launcher/logits_dump.h"
#include "launcher/placement_plan.h"
#include "launcher/rank_log.h"
#include "launcher/replay.h"
#include "launcher/run_config.h"
#include "launcher/spec_stats.h"
#include "model/checkpoint.h"
#include "model/error.h"
#include "stage/coordinator.h"
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
  int64_t max_seq = 0;
  int device = -1;  // GPU of this rank (cuda backend)
};

std::unique_ptr<Ops> make_ops(const RunConfig& c, int device) {
  return c.backend == Backend::cuda ? make_cuda_ops(device) : make_cpu_ops();
}

std::unique_ptr<DataPlane> make_data_plane(const RunConfig& c, MpiEndpoint& ep, Ops& ops,
                                           int device) {
  if (c.effective_transport() == Transport::nccl) return make_nccl_transport(ep, device);
  if (c.backend == Backend::cpu) return make_mpi_transport(ep, HostStaging{});
  // Device memory travels through host buffers.
  HostStaging staging;
  staging.to_host = [&ops](float* host, const float* src, size_t n) { ops.download(host, src, n); };
  staging.from_host = [&ops](float* dst, const float* host, size_t n) { ops.upload(dst, host, n); };
  return make_mpi_transport(ep, std::move(staging));
}

PipelineHooks make_hooks(const RunConfig& cfg, const RankRuntime& rt, int rank,
                         std::shared_ptr<spdlog::logger> log) {
  PipelineHooks hooks;
  hooks.before_op = fault_hook_from_env(rank);
  TimedOps* profiler = rt.profiler.get();
  if (profiler) {  // the table covers every operation but the prefill
    hooks.before_op = [fault = hooks.before_op, profiler](int op, const OpHeader& h) {
      profiler->set_active(h.kind != OpKind::prefill);
      if (fault) fault(op, h);
    };
  }
  hooks.after_op = [log, profiler](int op, const OpHeader& h, double ms) {
    log->debug("op {} {} pos {} T {}: {:.3f} ms", op, op_kind_name(h.kind), h.pos, h.rows(), ms);
    if (profiler && (h.kind == OpKind::decode || h.kind == OpKind::verify)) profiler->count_step();
  };
  if (!cfg.dump_boundary.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.dump_boundary, ec);  // ranks may race here
    const StageSpec spec = rt.stage->spec();
    if (spec.first())
      write_dump_manifest(cfg.dump_boundary, spec.n_ranks, replay_settings(cfg, rt.max_seq));
    const ModelConfig& mc = rt.ckpt->config();
    hooks.boundary = [dir = cfg.dump_boundary, spec, &mc](const BoundaryRecord& rec) {
      write_boundary_record(dir, spec.rank, spec.n_ranks, spec.layers, mc, rec);
    };
  }
  return hooks;
}

RankRuntime build_rank(const RunConfig& cfg, MpiEndpoint& ep, int local_rank,
                       std::shared_ptr<spdlog::logger> log) {
  const int rank = ep.rank(), size = ep.size();
  RankRuntime rt;
  rt.ckpt = std::make_unique<Checkpoint>(cfg.model);
  const ModelConfig& mc = rt.ckpt->config();
  const bool speculative = cfg.drafter != "none";
  const auto ranges =
      plan_placement(cfg.placement, placement_bytes(*rt.ckpt, speculative), size);
  rt.max_seq = cfg.effective_max_seq(mc.max_position_embeddings);
  if (rank == 0) {
    std::string split;
    for (const auto& r : ranges) split += cat(split.empty() ? "" : " | ", r.begin, "-", r.end - 1);
    log->info("placement over {} rank(s): layers {}", size, split);
  }

  int device = -1;
  if (cfg.backend == Backend::cuda) device = select_device(cfg.devices, rank, size, local_rank);
  rt.backend = make_ops(cfg, device);
  rt.ops = rt.backend.get();
  if (cfg.profile_ops) {
    rt.profiler = std::make_unique<TimedOps>(*rt.backend);
    rt.profiler->set_active(false);  // the hooks switch it on per operation
    rt.ops = rt.profiler.get();
  }

  StageSpec spec;
  spec.rank = rank;
  spec.n_ranks = size;
  spec.layers = ranges[static_cast<size_t>(rank)];
  spec.max_seq = rt.max_seq;
  spec.max_prompt = static_cast<int64_t>(cfg.prompt_ids.size());  // the run's one prefill
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
            spec.last() ? " + head" : "", backend_name(cfg.backend),
            device >= 0 ? cat(" (device ", device, ")") : std::string(),
            size > 1 ? transport_name(cfg.effective_transport()) : "none");
  log->info("resident bytes {} (stage {}), shards opened: {}", rt.ckpt->bytes_loaded(),
            rt.stage->resident_bytes(), shards.empty() ? "none" : shards);

  rt.device = device;
  return rt;
}

// Joins the ranks once every rank has loaded: the NCCL communicator's set-up is a
// collective, so it runs only after start-up errors were gathered (no rank waits in it
// for a rank that already failed).
void connect_rank(const RunConfig& cfg, MpiEndpoint& ep, RankRuntime& rt,
                  std::shared_ptr<spdlog::logger> log) {
  if (ep.size() > 1) {
    rt.control = std::make_unique<ControlPlane>(ep);
    rt.data = make_data_plane(cfg, ep, *rt.ops, rt.device);
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

void generate_on_rank0(const RunConfig& cfg, const CliOptions& cli, RankRuntime& rt,
                       spdlog::logger& log) {
  Coordinator coordinator(*rt.pipeline, rt.control.get(), rt.max_seq,
                          rt.ckpt->config().vocab_size);
  GenerationRequest req;
  req.prompt = cfg.prompt_ids;
  req.max_new = cfg.max_new;
  req.keep_logits = !cli.dump_logits.empty();
  req.stop_ids = cfg.stop_ids;
  const bool speculative = cfg.drafter != "none";
  const bool auto_depth = cfg.spec_depth == RunConfig::kSpecDepthAuto;
  VerifyCosts costs;
  if (speculative) {  // S3: fixed depth, default block_size + 1; or scheduled per round
    req.spec_tmax = rt.ckpt->config().dspark.block_size + 1;
    req.depth_cap = cfg.spec_depth > 0 ? cfg.spec_depth : req.spec_tmax;
    if (auto_depth) {
      costs = load_verify_costs(cfg.spec_costs);
      if (costs.max_depth() < req.spec_tmax)
        throw Error(cat("spec costs ", costs.source, ": verify_ms covers T = 1..",
                        costs.max_depth(), ", the drafter verifies up to ", req.spec_tmax,
                        " rows (dspark_block_size + 1)"));
      req.auto_depth = &costs;
    }
  }
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
    const std::string depth =
        auto_depth ? cat("auto, costs ", costs.source) : std::to_string(req.depth_cap);
    // Per generated token as plain decode counts it: the tokens after the prefill's.
    const auto after_prefill = static_cast<int64_t>(res.tokens.size()) - 1;
    log.info("speculative ({}, depth {}): {} rounds ({} verified), {:.3f} accepted drafts per "
             "round, {:.3f} tokens per round, {:.1f} us per round, decode {:.3f} ms, {:.4f} "
             "ms/token over {} tokens", cfg.drafter, depth, s.rounds, s.verify_rounds,
             s.accepts_per_round, s.tokens_per_round, s.round_us, res.decode_ms,
             after_prefill > 0 ? res.decode_ms / static_cast<double>(after_prefill) : 0.0,
             after_prefill);
    if (!cli.spec_stats.empty())
      write_spec_stats(cli.spec_stats, spec_stats_json(cfg.drafter, auto_depth ? cfg.spec_depth : req.depth_cap, res));
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
           "excluded; each op synchronized):", rank, profiler.steps());
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
  if (log) {
    log->debug("exit status {}", code);
    log->flush();
  }
  std::fflush(stdout);
  std::fflush(stderr);
}

int run_rank(int argc, char** argv, MpiEndpoint& ep, int local_rank) {
  const int rank = ep.rank(), size = ep.size();
  std::shared_ptr<spdlog::logger> log;
  CliOptions cli;
  RunConfig cfg;
  RankRuntime rt;
  bool replay_equal = false;

  // Start-up: every rank parses, plans and loads on its own, then all agree on success.
  std::string setup_error;
  try {
    cli = parse_cli(argc, argv);
    if (cli.help) {
      if (rank == 0) std::fputs(help_text().c_str(), stdout);
      return 0;
    }
    cfg = load_run_config(cli.config);
    apply_cli(cli, cfg);
    check_run_config(cfg);
    log = make_rank_logger(rank, cfg.log_dir);
    log->debug("pid {}", static_cast<long>(getpid()));
    if (cli.stage_only) {
      if (size != 1)
        throw Error(cat("--stage-only: runs as a single process (started with ", size,
                        " ranks; drop mpirun -np)"));
      auto ops = make_ops(cfg, 0);
      replay_equal = replay_stage(cfg, *cli.stage_only, cli.replay, *ops, *log);
    } else {
      if (rank == 0) {
        GenerationRequest req;
        req.prompt = cfg.prompt_ids;
        req.max_new = cfg.max_new;
        req.stop_ids = cfg.stop_ids;
        // max_seq and V are checked again by the coordinator once the model is known.
        check_admission(req, INT64_MAX, INT32_MAX);
      }
      rt = build_rank(cfg, ep, local_rank, log);
    }
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  const std::vector<std::string> errors = ep.gather_errors(setup_error);
  for (int k = 0; k < size; ++k) {
    const std::string& first = errors[static_cast<size_t>(k)];
    if (first.empty()) continue;
    if (k == rank) {
      say(log, rank, cat("rank ", rank, " failed: ", first));
    } else {
      const bool own = !setup_error.empty() && setup_error != first;
      say(log, rank, cat("rank ", rank, ": stopping because rank ", k, " failed",
                         own ? cat("; this rank's own error: ", setup_error) : ""));
    }
    if (log) log->debug("exit status 1");
    return 1;
  }
  if (cli.stage_only) return replay_equal ? 0 : 1;

  try {
    connect_rank(cfg, ep, rt, log);
    if (rank == 0) {
      generate_on_rank0(cfg, cli, rt, *log);
    } else {
      rt.pipeline->serve();
    }
    if (rt.profiler) log_op_profile(*rt.profiler, rank, *log);
    log->debug("exit status 0");
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
  MPI_CHECK(MPI_Init(&argc, &argv));
  const int local_rank = node_local_rank(MPI_COMM_WORLD);
  int code = 0;
  {
    MpiEndpoint ep(MPI_COMM_WORLD);
    code = run_rank(argc, argv, ep, local_rank);
  }
  MPI_CHECK(MPI_Finalize());
  return code;
}

}  // namespace dsv4
