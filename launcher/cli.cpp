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
  drafter        none (default) | dspark | replay:FILE[:corrupt=R1,R2,..|:accept_len=X]
                 [:confidence=C1,..,CB/..]  speculative decoding (sampled runs emit plain sampling's tokens); replay
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
  cuda_graphs    true (default) | false: backend cuda runs each stage's plain decode step
                 as one CUDA graph, captured after a warm-up step and replayed; false runs
                 every op from the host (debugging; slower). profile_ops runs op by op
  cuda_pdl       true (default) | false: backend cuda launches its kernels with
                 Programmatic Dependent Launch, so a kernel's start (launch, block
                 scheduling, first weight loads) overlaps the previous kernel's end; the
                 same bits either way (false: to compare, or on a driver without it)
  weights        checkpoint (default: read model:) | synthetic: generate the tensors of
                 preset (tiny|flash), trunk_layers, experts (nvfp4|mxfp4), weights_seed in
                 place on every rank; share_layers: true (benchmarks) shares one layer per kind
  liveness_timeout_s  seconds a peer may send no heartbeat before every rank stops
                 naming it (default 300; 0 = never)
  prompt         a text prompt (the checkpoint's tokenizer.json; BOS per its config);
                 the output is streamed as text. prompt_file: FILE reads it from a file
  chat           true: the prompt is a user message in the DeepSeek chat layout;
                 system: a system message; thinking: true for the thinking marker
  stop           a stop string or a list; generation ends before it (text runs)
  ignore_eos     true: text runs go on past EOS (default: stop at EOS)
  temperature    0 (default) greedy; > 0 samples on rank 0 with top_k (0 = all), top_p
                 (1 = all), min_p (0 = all) and seed (default: drawn and logged)
  max_prompt     text / serve: the longest prompt accepted (default max_seq)
  prefill_chunk  a longer prompt is prefilled in chunks of this many rows, pipelined
                 across the stages; memory stays bounded at any length (default 2048;
                 0 = the whole prompt in one operation)
Run with mpirun -np P for P pipeline stages, or directly for one.

Text in, text out:
  dsv4-stage --config C --prompt "Hello" --max-new 32 --temperature 0.7 --seed 1
OpenAI-compatible server on rank 0 (all ranks run the engine):
  mpirun -np 2 dsv4-stage --config C --serve --port 8000
  curl http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \
       -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 16}'
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
    ("no-cuda-graphs", "run every op of a plain decode step or verify round from the host "
     "instead of replaying a captured CUDA graph (debugging; sets cuda_graphs: false)")
    ("no-cuda-pdl", "launch every kernel after the previous one has ended, without Programmatic "
     "Dependent Launch (to compare; sets cuda_pdl: false)")
    ("liveness-timeout", "seconds without a peer's heartbeat before it is declared failed, "
     "0 = never (overrides liveness_timeout_s:, default 300)", cxxopts::value<std::string>())
    ("version", "print the source revision and whether CUDA is built in")
    ("prompt", "a text prompt, encoded by the checkpoint's tokenizer (overrides prompt:)",
     cxxopts::value<std::string>())
    ("prompt-file", "read the text prompt from FILE", cxxopts::value<std::string>())
    ("chat", "the prompt is one user message in the DeepSeek chat layout")
    ("system", "with --chat: a system message", cxxopts::value<std::string>())
    ("thinking", "with --chat: open the answer in thinking mode (<think>)")
    ("stop", "a stop string; repeat for several (overrides stop:)",
     cxxopts::value<std::vector<std::string>>())
    ("ignore-eos", "text runs go on past the model's EOS")
    ("temperature", "0 = greedy (default); > 0 samples on rank 0", cxxopts::value<double>())
    ("top-k", "sample among the k most probable tokens (0 = all)", cxxopts::value<int>())
    ("top-p", "sample within the top-p probability mass (1 = all)", cxxopts::value<double>())
    ("min-p", "drop tokens below min-p x the top probability (0 = none)",
     cxxopts::value<double>())
    ("seed", "sampling seed (default: drawn at start and logged)", cxxopts::value<uint64_t>())
    ("max-prompt", "text / serve: the longest prompt accepted (default max_seq)",
     cxxopts::value<int64_t>())
    ("prefill-chunk", "prefill longer prompts in chunks of N rows, pipelined across the "
     "stages (default 2048; 0 = whole prompts; overrides prefill_chunk:)",
     cxxopts::value<std::string>())
    ("serve", "serve the OpenAI-compatible HTTP API on rank 0 until SIGINT / SIGTERM")
    ("host", "--serve: address to listen on", cxxopts::value<std::string>()->default_value("127.0.0.1"))
    ("port", "--serve: TCP port", cxxopts::value<int>()->default_value("8000"))
    ("model-name", "--serve: the model id clients name (default: the checkpoint folder's name)",
     cxxopts::value<std::string>())
    ("h,help", "print this help");
  return o;
}
// The text, sampling and serving flags (issue 14).
void parse_text_flags(const cxxopts::ParseResult& r, CliOptions& cli) {
  if (r.count("prompt") + r.count("prompt-file") + r.count("prompt-ids") > 1)
    throw Error("--prompt, --prompt-file and --prompt-ids: give one");
  if (r.count("prompt")) cli.prompt = r["prompt"].as<std::string>();
  if (r.count("prompt-file"))
    cli.prompt = read_prompt_file(r["prompt-file"].as<std::string>(), "--prompt-file");
  if (r.count("system")) cli.system = r["system"].as<std::string>();
  if (r.count("stop")) cli.stop = r["stop"].as<std::vector<std::string>>();
  if (r.count("temperature")) cli.temperature = r["temperature"].as<double>();
  if (r.count("top-p")) cli.top_p = r["top-p"].as<double>();
  if (r.count("min-p")) cli.min_p = r["min-p"].as<double>();
  if (r.count("top-k")) cli.top_k = r["top-k"].as<int>();
  if (r.count("seed")) cli.seed = r["seed"].as<uint64_t>();
  if (r.count("max-prompt")) {
    cli.max_prompt = r["max-prompt"].as<int64_t>();
    if (*cli.max_prompt < 1) throw Error(cat("--max-prompt: ", *cli.max_prompt, " (must be >= 1)"));
  }
  cli.chat = r.count("chat") > 0;
  cli.thinking = r.count("thinking") > 0;
  cli.ignore_eos = r.count("ignore-eos") > 0;
  cli.serve = r.count("serve") > 0;
  cli.host = r["host"].as<std::string>();
  cli.port = r["port"].as<int>();
  if (cli.port < 1 || cli.port > 65535) throw Error(cat("--port: ", cli.port, " (must be 1..65535)"));
  if (r.count("model-name")) cli.model_name = r["model-name"].as<std::string>();
  if (cli.serve && (cli.prompt || r.count("prompt-ids") || cli.stage_only))
    throw Error("--serve: prompts come from HTTP requests (drop --prompt / --prompt-ids / --stage-only)");
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
  cli.prefill_chunk = integer("prefill-chunk", 0, INT32_MAX);
  if (r.count("spec-depth") && r["spec-depth"].as<std::string>() == "auto")
    cli.spec_depth = RunConfig::kSpecDepthAuto;
  else if (const auto depth = integer("spec-depth", 0, INT32_MAX))
    cli.spec_depth = static_cast<int>(*depth);
  text("spec-costs", cli.spec_costs);
  if (r.count("liveness-timeout")) {
    const std::string text = r["liveness-timeout"].as<std::string>();
    double v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
      throw Error(cat("--liveness-timeout: ", text, " is not a number of seconds >= 0"));
    cli.liveness_timeout_s = v;
  }
  cli.profile_ops = r.count("profile-ops") > 0;
  cli.no_cuda_graphs = r.count("no-cuda-graphs") > 0;
  cli.no_cuda_pdl = r.count("no-cuda-pdl") > 0;
  if (r.count("dump-logits")) cli.dump_logits = r["dump-logits"].as<std::string>();
  if (r.count("spec-stats")) cli.spec_stats = r["spec-stats"].as<std::string>();
  if (const auto stage = integer("stage-only", 0, INT32_MAX)) cli.stage_only = static_cast<int>(*stage);
  if (r.count("replay")) cli.replay = r["replay"].as<std::string>();
  if (cli.stage_only.has_value() != !cli.replay.empty())
    throw Error("--stage-only and --replay: each needs the other (--stage-only R --replay DIR)");
  parse_text_flags(r, cli);
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
  if (cli.no_cuda_graphs) c.cuda_graphs = false;
  if (cli.no_cuda_pdl) c.cuda_pdl = false;
  if (cli.liveness_timeout_s) c.liveness_timeout_s = *cli.liveness_timeout_s;
  if (cli.prompt) {
    c.prompt = *cli.prompt;
    c.prompt_ids.clear();
  }
  if (cli.prompt_ids) c.prompt.clear();
  if (cli.system) c.system = *cli.system;
  if (cli.stop) c.stop = *cli.stop;
  if (cli.temperature) c.sampling.temperature = *cli.temperature;
  if (cli.top_k) c.sampling.top_k = *cli.top_k;
  if (cli.top_p) c.sampling.top_p = *cli.top_p;
  if (cli.min_p) c.sampling.min_p = *cli.min_p;
  if (cli.seed) {
    c.sampling.seed = *cli.seed;
    c.seed_set = true;
  }
  if (cli.max_prompt) c.max_prompt = *cli.max_prompt;
  if (cli.prefill_chunk) c.prefill_chunk = *cli.prefill_chunk;
  if (cli.chat) c.chat = true;
  if (cli.thinking) c.thinking = true;
  if (cli.ignore_eos) c.ignore_eos = true;
  if (cli.serve) {  // prompts come from requests; a config's prompt is not the server's
    c.serve = true;
    c.prompt_ids.clear();
    c.prompt.clear();
  }
}

}  // namespace dsv4
