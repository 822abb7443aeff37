#include "launcher/cli.h"

#include <charconv>
#include <cmath>
#include <climits>
#include <cxxopts.hpp>

#include "base/error.h"

namespace dsv4 {

namespace {
const char* kExamples = R"(Example: the tiny test model on two ranks (write it first with
`dsv4-mkckpt --preset tiny --seed 1 --out /tmp/tiny`), printing 16 tokens:
  mpirun -np 2 dsv4-stage --config configs/tiny.yaml --model /tmp/tiny \
      --prompt-ids 5,6,7 --max-new 16
More:
  dsv4-stage --config configs/tiny.yaml --model /tmp/tiny --drafter dspark \
      --spec-stats stats.json                     # speculative decoding, one process
  mpirun -np 2 dsv4-stage --config configs/flash-2gpu.yaml --log-dir logs
                                                  # Flash on 2 GPUs, one log per rank
  dsv4-stage --config C --stage-only 1 --replay DUMP   # one stage against a boundary dump

)";

const char* kYamlKeys = R"(
Run config keys (YAML; configs/README.md documents each):
  model          checkpoint directory (relative to the config file's folder)
  backend        cuda | cpu (default: cuda when this build has CUDA and a device is
                 visible, else cpu; the log says which and why)
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
  drafter        none (default) | dspark | replay:FILE[:corrupt=R1,R2,..]  speculative
                 decoding (greedy only); replay proposes a recorded run's tokens
  spec_depth     verify depth cap, 0 = default (dspark_block_size + 1)
  stop_ids       [ids...] emitting one ends generation (it is printed, not consumed);
                 default none: run to max_new. [<eos_token_id> of config.json] stops at EOS
  profile_ops    true | false (default): time every op of the decode steps (synchronizing
                 around each) and log a per-op table on every rank at the end
  weights        checkpoint (default: read model:) | synthetic: generate the tensors of
                 preset (tiny|flash), trunk_layers, experts (nvfp4|mxfp4), weights_seed in
                 place on every rank; share_layers: true (benchmarks) shares one layer per kind
  liveness_timeout_s  seconds a peer may send no heartbeat before every rank stops
                 naming it (default 300; 0 = never)
Run with mpirun -np P for P pipeline stages, or directly for one.
)";

cxxopts::Options make_options() {
  cxxopts::Options o("dsv4-stage", "Pipeline-parallel DeepSeek-V4-Flash inference (greedy).");
  o.add_options()
    ("config", "run config YAML (required)", cxxopts::value<std::string>())
    ("model", "checkpoint directory (overrides model:)", cxxopts::value<std::string>())
    ("prompt-ids", "prompt token ids, e.g. 1,2,3 (overrides prompt_ids:)",
     cxxopts::value<std::string>())
    ("max-new", "tokens to generate (overrides max_new:)", cxxopts::value<std::string>())
    ("dump-logits", "write {prompt, tokens, logits} JSON to FILE (rank 0)",
     cxxopts::value<std::string>())
    ("log-dir", "one log per rank: DIR/rank<r>.log (overrides log_dir:)",
     cxxopts::value<std::string>())
    ("dump-boundary", "dump every boundary payload into DIR (overrides dump_boundary:)",
     cxxopts::value<std::string>())
    ("stage-only", "replay stage R alone in this process (with --replay)",
     cxxopts::value<std::string>())
    ("replay", "boundary dump directory to replay (with --stage-only)",
     cxxopts::value<std::string>())
    ("backend", "cpu | cuda (overrides backend:)", cxxopts::value<std::string>())
    ("drafter", "none | dspark | replay:FILE[:corrupt=R,..] (overrides drafter:)",
     cxxopts::value<std::string>())
    ("spec-depth", "verify depth cap, 0 = block_size + 1 (overrides spec_depth:)",
     cxxopts::value<std::string>())
    ("stop-ids", "stop token ids, e.g. 1,2; --stop-ids <eos_token_id> stops at the model's EOS "
     "(overrides stop_ids:)", cxxopts::value<std::string>())
    ("spec-stats", "write the speculative round statistics JSON to FILE (rank 0)",
     cxxopts::value<std::string>())
    ("profile-ops", "time every op of the decode steps; each rank logs a table at the end "
     "(sets profile_ops: true)")
    ("liveness-timeout", "seconds without a peer's heartbeat before it is declared failed, "
     "0 = never (overrides liveness_timeout_s:, default 300)", cxxopts::value<std::string>())
    ("version", "print the source revision and whether CUDA is built in")
    ("h,help", "print this help");
  return o;
}
}  // namespace

std::string help_text() { return kExamples + make_options().help() + kYamlKeys; }

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
  cli.version = r.count("version") > 0;
  if (cli.help || cli.version) return cli;
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
  // Integers are read at full width, then range-checked (never truncated).
  auto integer = [&](const char* flag, int64_t min, int64_t max) -> std::optional<int64_t> {
    if (!r.count(flag)) return std::nullopt;
    const std::string text = r[flag].as<std::string>();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty() && v >= min &&
        v <= max)
      return v;
    throw Error(cat("--", flag, ": ", text, " is not an integer in [", min, ", ", max, "]"));
  };
  cli.max_new = integer("max-new", 1, INT64_MAX);
  if (const auto depth = integer("spec-depth", 0, INT32_MAX)) cli.spec_depth = static_cast<int>(*depth);
  if (r.count("liveness-timeout")) {
    const std::string text = r["liveness-timeout"].as<std::string>();
    double v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
      throw Error(cat("--liveness-timeout: ", text, " is not a number of seconds >= 0"));
    cli.liveness_timeout_s = v;
  }
  cli.profile_ops = r.count("profile-ops") > 0;
  if (r.count("dump-logits")) cli.dump_logits = r["dump-logits"].as<std::string>();
  if (r.count("spec-stats")) cli.spec_stats = r["spec-stats"].as<std::string>();
  if (const auto stage = integer("stage-only", 0, INT32_MAX)) cli.stage_only = static_cast<int>(*stage);
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
  if (cli.profile_ops) c.profile_ops = true;
  if (cli.liveness_timeout_s) c.liveness_timeout_s = *cli.liveness_timeout_s;
}

}  // namespace dsv4
