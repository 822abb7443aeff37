// The dsv4-stage command line: flags override the YAML; inconsistent flags are refused.
#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <vector>

#include "launcher/cli.h"
#include "launcher/device_select.h"
#include "launcher/fault_injection.h"
#include "base/error.h"

using namespace dsv4;

namespace {
CliOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dsv4-stage");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_cli(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("command line flags override the run config") {
  RunConfig c = parse_run_config("model: m\nmax_new: 4\nprompt_ids: [1]\n", "run.yaml", "/cfg");
  const CliOptions cli =
      parse({"--config", "run.yaml", "--model", "other", "--prompt-ids", "7,8", "--max-new", "3",
             "--log-dir", "logs", "--dump-boundary", "dump", "--backend", "cuda",
             "--dump-logits", "l.json"});
  apply_cli(cli, c);
  CHECK(cli.config == "run.yaml");
  CHECK(c.model == "other");  // command-line paths stay relative to the cwd
  CHECK(c.prompt_ids == std::vector<int32_t>{7, 8});
  CHECK(c.max_new == 3);
  CHECK(c.log_dir == "logs");
  CHECK(c.dump_boundary == "dump");
  CHECK(c.backend == Backend::cuda);
  CHECK(cli.dump_logits == "l.json");
  CHECK_FALSE(cli.stage_only.has_value());
}

TEST_CASE("command line refusals name the flag") {
  CHECK(refusal({}).find("--config: missing") != std::string::npos);
  CHECK(refusal({"--config", "c", "--stage-only", "1"}).find("--stage-only and --replay") !=
        std::string::npos);
  CHECK(refusal({"--config", "c", "--replay", "d"}).find("--stage-only and --replay") !=
        std::string::npos);
  CHECK(refusal({"--config", "c", "--max-new", "0"}).find("--max-new: 0") != std::string::npos);
  CHECK(refusal({"--config", "c", "--bogus"}).find("command line:") != std::string::npos);
  CHECK(refusal({"--config", "c", "extra"}).find("unexpected argument 'extra'") !=
        std::string::npos);
  RunConfig c;
  CliOptions cli = parse({"--config", "c", "--backend", "tpu"});
  CHECK_THROWS_WITH_AS(apply_cli(cli, c), "--backend: unknown backend 'tpu' (allowed: cpu, cuda)",
                       Error);
  CHECK(parse({"--help"}).help);
  CHECK(help_text().find("dump_boundary") != std::string::npos);  // YAML keys are explained
}

TEST_CASE("device selection: node-local rank unless devices pins one per rank") {
  CHECK(select_device({}, 3, 4, 1) == 1);
  CHECK(select_device({2, 3, 0, 1}, 1, 4, 1) == 3);
  CHECK_THROWS_WITH_AS(select_device({0, 1}, 0, 4, 0),
                       "devices: 2 entries for 4 ranks (list one GPU per rank, or leave devices out)",
                       Error);
}

TEST_CASE("DSV4_FAULT_INJECT values: <rank>:<op>:<error|kill>") {
  const FaultPlan p = parse_fault_plan("1:2:kill");
  CHECK(p.rank == 1);
  CHECK(p.op == 2);
  CHECK(p.kill);
  CHECK_FALSE(parse_fault_plan("0:5:error").kill);
  CHECK_THROWS_AS(parse_fault_plan("1:2:explode"), Error);
  CHECK_THROWS_AS(parse_fault_plan("x:2:error"), Error);
  CHECK_THROWS_AS(parse_fault_plan("1:2"), Error);
}

TEST_CASE("--stop-ids overrides stop_ids: and is refused by name") {
  RunConfig c = parse_run_config("model: m\nstop_ids: [9]\n", "run.yaml", "/cfg");
  apply_cli(parse({"--config", "run.yaml"}), c);
  CHECK(c.stop_ids == std::vector<int32_t>{9});  // no flag: the YAML's list stays
  apply_cli(parse({"--config", "run.yaml", "--stop-ids", "1,2"}), c);
  CHECK(c.stop_ids == std::vector<int32_t>{1, 2});
  CHECK(refusal({"--config", "c", "--stop-ids", "1,x"}).find("--stop-ids: 'x'") !=
        std::string::npos);
  CHECK(help_text().find("--stop-ids") != std::string::npos);
}

TEST_CASE("DSV4_FAULT_INJECT: a rank the job lacks is refused; an operation never reached is reported") {
  setenv("DSV4_FAULT_INJECT", "3:1:error", 1);
  CHECK_THROWS_WITH_AS(fault_plan_from_env(3),
                       "DSV4_FAULT_INJECT: '3:1:error' names rank 3, but the job has 3 rank(s) (0..2)",
                       Error);
  setenv("DSV4_FAULT_INJECT", "1:5:error", 1);
  const FaultInjection on_rank1(fault_plan_from_env(3), 1), on_rank0(fault_plan_from_env(3), 0);
  CHECK_FALSE(on_rank0.hook());  // the plan is rank 1's
  const auto hook = on_rank1.hook();
  REQUIRE(hook);
  OpHeader h;
  h.kind = OpKind::decode;
  for (int op = 0; op < 3; ++op) hook(op, h);
  CHECK(on_rank1.missed() ==
        "DSV4_FAULT_INJECT: rank 1 ran 3 operation(s); operation 5 never happened, so nothing "
        "was injected");
  CHECK(on_rank0.missed().empty());
  hook(3, h);
  hook(4, h);
  CHECK_THROWS_WITH_AS(hook(5, h), "injected failure before operation 5 (decode, DSV4_FAULT_INJECT)",
                       Error);
  CHECK(on_rank1.missed().empty());
  unsetenv("DSV4_FAULT_INJECT");
}

TEST_CASE("text, sampling and serve flags override the YAML (issue 14)") {
  const CliOptions cli = parse({"--config", "c.yaml", "--prompt", "Hi", "--chat", "--stop", "A",
                                "--stop", "B", "--temperature", "0.5", "--top-k", "3",
                                "--top-p", "0.8", "--min-p", "0.1", "--seed", "9",
                                "--ignore-eos", "--max-prompt", "32"});
  RunConfig c;
  c.prompt_ids = {1, 2};  // a config's ids give way to --prompt
  apply_cli(cli, c);
  CHECK(c.prompt == "Hi");
  CHECK(c.prompt_ids.empty());
  CHECK(c.chat);
  CHECK(c.stop == std::vector<std::string>{"A", "B"});
  const SamplingParams& sp = c.sampling;
  CHECK((std::tuple(sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.seed, c.seed_set) ==
         std::tuple(0.5, 3, 0.8, 0.1, uint64_t{9}, true)));
  CHECK((c.ignore_eos && c.max_prompt == 32));
  const CliOptions serve = parse({"--config", "c.yaml", "--serve", "--port", "9001"});
  CHECK(serve.serve);
  CHECK(serve.port == 9001);
  CHECK(serve.host == "127.0.0.1");
  RunConfig s;
  s.prompt_ids = {1};
  apply_cli(serve, s);
  CHECK(s.prompt_ids.empty());  // the server takes its prompts from requests
  CHECK(refusal({"--config", "c.yaml", "--serve", "--prompt", "x"}).find("--serve") != std::string::npos);
  CHECK(refusal({"--config", "c.yaml", "--port", "0"}) == "--port: 0 (must be 1..65535)");
  CHECK(refusal({"--config", "c.yaml", "--prompt", "x", "--prompt-ids", "1"}).find("give one") !=
        std::string::npos);
  CHECK(refusal({"--config", "c.yaml", "--prompt-file", "/no/such"}).find("/no/such: cannot open") !=
        std::string::npos);
}

TEST_CASE("--spec-depth auto | N and --spec-costs override the YAML; bad values name the flag") {
  RunConfig c = parse_run_config("model: m\nspec_depth: 3\n", "run.yaml", "/cfg");
  apply_cli(parse({"--config", "c", "--spec-depth", "auto", "--spec-costs", "costs.json"}), c);
  CHECK(c.spec_depth == RunConfig::kSpecDepthAuto);
  CHECK(c.spec_costs == "costs.json");
  apply_cli(parse({"--config", "c", "--spec-depth", "2"}), c);
  CHECK(c.spec_depth == 2);
  CHECK(refusal({"--config", "c", "--spec-depth", "-3"}) ==
        "--spec-depth: -3 is not an integer in [0, 2147483647]");
  CHECK(refusal({"--config", "c", "--spec-depth", "deep"}) ==
        "--spec-depth: deep is not an integer in [0, 2147483647]");
  CHECK(help_text().find("spec_costs") != std::string::npos);
}

TEST_CASE("--prefill-chunk overrides prefill_chunk:, is refused by name and taught by --help") {
  RunConfig c = parse_run_config("model: m\nprefill_chunk: 64\n", "run.yaml", "/cfg");
  apply_cli(parse({"--config", "c"}), c);
  CHECK(c.prefill_chunk == 64);
  apply_cli(parse({"--config", "c", "--prefill-chunk", "0"}), c);
  CHECK(c.prefill_chunk == 0);
  apply_cli(parse({"--config", "c", "--prefill-chunk", "300"}), c);
  CHECK(c.prefill_chunk == 300);
  for (const char* bad : {"-2", "1k", "2147483648"})
    CHECK(refusal({"--config", "c", "--prefill-chunk", bad}) ==
          "--prefill-chunk: " + std::string(bad) + " is not an integer in [0, 2147483647]");
  CHECK(help_text().find("prefill_chunk") != std::string::npos);
  CHECK(help_text().find("--prefill-chunk") != std::string::npos);
}

TEST_CASE("--no-cuda-graphs / --no-cuda-pdl set cuda_graphs / cuda_pdl: false and are taught by --help") {
  RunConfig c = parse_run_config("model: m\n", "run.yaml", "/cfg");
  apply_cli(parse({"--config", "c"}), c);
  CHECK(c.cuda_graphs);  // the YAML's (default true) when the flag is absent
  CHECK(c.cuda_pdl);
  apply_cli(parse({"--config", "c", "--no-cuda-graphs"}), c);
  CHECK_FALSE(c.cuda_graphs);
  CHECK(c.cuda_pdl);
  apply_cli(parse({"--config", "c", "--no-cuda-pdl"}), c);
  CHECK_FALSE(c.cuda_pdl);
  for (const char* taught : {"cuda_graphs", "--no-cuda-graphs", "cuda_pdl", "--no-cuda-pdl"}) {
    INFO(taught);
    CHECK(help_text().find(taught) != std::string::npos);
  }
}
