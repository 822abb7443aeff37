#include "launcher/cli.h"

#include <cxxopts.hpp>

#include "model/error.h"

namespace dsv4 {

namespace {
const char* kYamlKeys = R"(
Run config keys (YAML; configs/README.md documents each):
  model          checkpoint directory (relative to the config file's folder)
  backend        cpu (default) | cuda
  transport      mpi | nccl (default: mpi for cpu, nccl for cuda)
  placement      auto (balance resident bytes) | [[begin, end), ...] one range per rank
  max_seq        positions a sequence may use (default min(max_position_embeddings, 4096))
  prompt_ids     [ids...] the prompt as token ids
  max_new        tokens to generate (default 16)
  numerics       {kv_quant: clamp|e4m3, expert_arm: native|bf16, dense_act: bf16|f32,
                  indexer_quant: fp4|none}
  devices        [gpu per rank] pins devices (backend cuda; default: local rank)
  log_dir        one log per rank, DIR/rank<r>.log
  dump_boundary  every boundary payload as DIR/rank<r>_op<i>_<recv|send>.safetensors
  drafter        none (default) | dspark | replay:FILE[:corrupt=R1,R2,..|:accept_len=X]
                 [:confidence=C1,..,CB/..]  speculative decoding (greedy only); replay
                 proposes a recorded run's tokens (configs/README.md)
  spec_depth     verify depth cap, 0 = default (dspark_block_size + 1), or auto: each
                 round verifies the T maximizing expected tokens per unit time from the
                 drafter's confidences and a cost table
  spec_costs     with spec_depth auto: the cost table JSON (bench/spec_costs.sh writes it;
                 default: built in, bench/README.md)
  stop_ids       [ids...] emitting one ends generation (it is printed, not consumed);
                 default none: run to max_new. [<eos_token_id> of config.json] stops at EOS
  profile_ops    true | false (default): time every op of the decode steps (synchronizing
                 around each) and log a per-op table on every rank at the end
Run with mpirun -np P for P pipeline stages, or directly for one.
)";

cxxopts::Options make_options() {
  cxxopts::Options o("dsv4-stage", "Pipeline-parallel DeepSeek-V4-Flash inference (greedy).");
  o.add_options()
    ("config", "run config YAML (required)", cxxopts::value<std::string>())
    ("model", "checkpoint directory (overrides model:)", cxxopts::value<std::string>())
    ("prompt-ids", "prompt token ids, e.g. 1,2,3 (overrides prompt_ids:)",
     cxxopts::value<std::string>())
    ("max-new", "tokens to generate (overrides max_new:)", cxxopts::value<int64_t>())
    ("dump-logits", "write {prompt, tokens, logits} JSON to FILE (rank 0)",
     cxxopts::value<std::string>())
    ("log-dir", "one log per rank: DIR/rank<r>.log (overrides log_dir:)",
     cxxopts::value<std::string>())
    ("dump-boundary", "dump every boundary payload into DIR (overrides dump_boundary:)",
     cxxopts::value<std::string>())
    ("stage-only", "replay stage R alone in this process (with --replay)",
     cxxopts::value<int>())
    ("replay", "boundary dump directory to replay (with --stage-only)",
     cxxopts::value<std::string>())
    ("backend", "cpu | cuda (overrides backend:)", cxxopts::value<std::string>())
    ("drafter", "none | dspark | replay:FILE[:corrupt=R,..|:accept_len=X][:confidence=..] "
     "(overrides drafter:)",
     cxxopts::value<std::string>())
    ("spec-depth", "verify depth cap N (0 = block_size + 1), or auto: each round's depth from "
     "the drafter's confidences and a cost table (overrides spec_depth:)",
     cxxopts::value<std::string>())
    ("spec-costs", "with --spec-depth auto: verify cost table JSON written by "
     "bench/spec_costs.sh (default built in; overrides spec_costs:)", cxxopts::value<std::string>())
    ("stop-ids", "stop token ids, e.g. 1,2; --stop-ids <eos_token_id> stops at the model's EOS "
     "(overrides stop_ids:)", cxxopts::value<std::string>())
    ("spec-stats", "write the speculative round statistics JSON to FILE (rank 0)",
     cxxopts::value<std::string>())
    ("profile-ops", "time every op of the decode steps; each rank logs a table at the end "
     "(sets profile_ops: true)")
    ("h,help", "print this help");
  return o;
}
}  // namespace

std::string help_text() { return make_options().help() + kYamlKeys; }

CliOptions parse_cli(int argc, char** argv) {
  auto options = make_options();
  CliOptions cli;
  cxxopts::ParseResult r;
  try {
    r = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw Error(cat("command line: ", e.what(), " (see --help)"));
  }
  if (!r.unmatched().empty())
    throw Error(cat("command line: unexpected argument '", r.unmatched().front(), "'"));
  cli.help = r.count("help") > 0;
  if (cli.help) return cli;
  if (!r.count("config")) throw Error("--config: missing (dsv4-stage --config FILE.yaml)");
  cli.config = r["config"].as<std::string>();
  auto text = [&](const char* flag, std::optional<std::string>& out) {
    if (r.count(flag)) out = r[flag].as<std::string>();
  };
  text("model", cli.model);
  text("log-dir", cli.log_dir);
  text("dump-boundary", cli.dump_boundary);
  text("backend", cli.backend);
  text("drafter", cli.drafter);
  if (r.count("prompt-ids"))
    cli.prompt_ids = parse_id_list(r["prompt-ids"].as<std::string>(), "--prompt-ids");
  if (r.count("stop-ids"))
    cli.stop_ids = parse_id_list(r["stop-ids"].as<std::string>(), "--stop-ids");
  if (r.count("max-new")) {
    cli.max_new = r["max-new"].as<int64_t>();
    if (*cli.max_new < 1) throw Error(cat("--max-new: ", *cli.max_new, " (must be >= 1)"));
  }
  if (r.count("spec-depth")) cli.spec_depth = parse_spec_depth(r["spec-depth"].as<std::string>(), "--spec-depth");
  text("spec-costs", cli.spec_costs);
  cli.profile_ops = r.count("profile-ops") > 0;
  if (r.count("dump-logits")) cli.dump_logits = r["dump-logits"].as<std::string>();
  if (r.count("spec-stats")) cli.spec_stats = r["spec-stats"].as<std::string>();
  if (r.count("stage-only")) {
    cli.stage_only = r["stage-only"].as<int>();
    if (*cli.stage_only < 0) throw Error(cat("--stage-only: ", *cli.stage_only, " is not a rank"));
  }
  if (r.count("replay")) cli.replay = r["replay"].as<std::string>();
  if (cli.stage_only.has_value() != !cli.replay.empty())
    throw Error("--stage-only and --replay: each needs the other (--stage-only R --replay DIR)");
  return cli;
}

void apply_cli(const CliOptions& cli, RunConfig& c) {
  if (cli.model) c.model = *cli.model;
  if (cli.log_dir) c.log_dir = *cli.log_dir;
  if (cli.dump_boundary) c.dump_boundary = *cli.dump_boundary;
  if (cli.backend) c.backend = parse_backend(*cli.backend, "--backend");
  if (cli.drafter) c.drafter = *cli.drafter;
  if (cli.prompt_ids) c.prompt_ids = *cli.prompt_ids;
  if (cli.stop_ids) c.stop_ids = *cli.stop_ids;
  if (cli.max_new) c.max_new = *cli.max_new;
  if (cli.spec_depth) c.spec_depth = *cli.spec_depth;
  if (cli.spec_costs) c.spec_costs = *cli.spec_costs;
  if (cli.profile_ops) c.profile_ops = true;
}

}  // namespace dsv4
