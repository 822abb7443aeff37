// Run config parsing and refusals (ARCHITECTURE.md law 6: unknown keys and bad values
// stop with a message naming the key).
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "launcher/run_config.h"
#include "base/error.h"
#include "tests/unit/model/error_text.h"

using namespace dsv4;

namespace {
// The Error's message, or "" when parsing succeeds.
std::string refusal(const std::string& yaml) {
  try {
    parse_run_config(yaml, "run.yaml", "/cfg");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("run config: every key is read, relative paths resolve against the config folder") {
  const RunConfig c = parse_run_config(R"(
model: ../ckpt/tiny
backend: cuda
transport: mpi
placement: [[0, 5], [5, 7]]
max_seq: 300
prompt_ids: [3, 1, 4]
max_new: 9
numerics: {kv_quant: e4m3, expert_arm: bf16, dense_act: f32, indexer_quant: none}
devices: [1, 0]
log_dir: logs
dump_boundary: /abs/dump
drafter: none
spec_depth: 2
)", "run.yaml", "/cfg/dir");
  CHECK(c.model == "/cfg/ckpt/tiny");
  CHECK(c.backend == Backend::cuda);
  CHECK(c.effective_transport() == Transport::mpi);
  REQUIRE(c.placement.size() == 2);
  CHECK(c.placement[0].begin == 0);
  CHECK(c.placement[0].end == 5);
  CHECK(c.placement[1].begin == 5);
  CHECK(c.placement[1].end == 7);
  CHECK(c.max_seq == 300);
  CHECK(c.prompt_ids == std::vector<int32_t>{3, 1, 4});
  CHECK(c.max_new == 9);
  CHECK(c.numerics.kv_quant == KvQuant::e4m3);
  CHECK(c.numerics.expert_arm == ExpertArm::bf16);
  CHECK(c.numerics.dense_act == DenseAct::f32);
  CHECK(c.numerics.indexer_quant == IndexerQuant::none);
  CHECK(c.devices == std::vector<int>{1, 0});
  CHECK(c.log_dir == "/cfg/dir/logs");
  CHECK(c.dump_boundary == "/abs/dump");
  CHECK(c.spec_depth == 2);
}

TEST_CASE("run config: defaults (transport follows the backend, placement auto)") {
  const RunConfig cpu = parse_run_config("model: m\n", "run.yaml", "/cfg");
  CHECK_FALSE(cpu.backend.has_value());  // the launcher picks it (launcher/backend_default.h)
  CHECK(cpu.effective_transport() == Transport::mpi);
  CHECK(cpu.placement.empty());
  CHECK(cpu.max_new == 16);
  const RunConfig cuda = parse_run_config("model: m\nbackend: cuda\n", "run.yaml", "/cfg");
  CHECK(cuda.effective_transport() == Transport::nccl);
  CHECK(parse_run_config("placement: auto\n", "run.yaml", "/cfg").placement.empty());
}

TEST_CASE("run config: unknown keys and bad values are refused by key (law 6)") {
  CHECK(refusal("modle: x\n").find("modle: unknown key") != std::string::npos);
  CHECK(refusal("backend: tpu\n").find("backend: unknown backend 'tpu'") != std::string::npos);
  CHECK(refusal("transport: tcp\n").find("transport: unknown transport") != std::string::npos);
  CHECK(refusal("max_new: 0\n").find("max_new: 0 is below the minimum 1") != std::string::npos);
  CHECK(refusal("max_new: 5x\n").find("max_new: '5x' is not an integer") != std::string::npos);
  CHECK(refusal("max_seq: [1]\n").find("max_seq: expected a single value") != std::string::npos);
  CHECK(refusal("prompt_ids: [1, -2]\n").find("prompt_ids[1]: -2 is below") != std::string::npos);
  CHECK(refusal("prompt_ids: 7\n").find("prompt_ids: expected a list") != std::string::npos);
  CHECK(refusal("numerics: {kv_quant: fp16}\n").find("numerics.kv_quant") != std::string::npos);
  CHECK(refusal("numerics: {speed: max}\n").find("numerics: unknown option 'speed'") !=
        std::string::npos);
  CHECK(refusal("placement: manual\n").find("placement: 'manual'") != std::string::npos);
  CHECK(refusal("placement: [[0, 2, 4]]\n").find("placement[0]: expected [begin, end)") !=
        std::string::npos);
  CHECK(refusal("devices: [0, gpu1]\n").find("devices[1]") != std::string::npos);
  CHECK(refusal("[1, 2]\n").find("expected a mapping") != std::string::npos);
  CHECK(refusal("model: [unclosed\n").find("not valid YAML") != std::string::npos);
  // Every refusal names the file it came from.
  CHECK(refusal("backend: tpu\n").rfind("run.yaml: ", 0) == 0);
}

TEST_CASE("run config: combinations this build cannot run are refused by name") {
  auto check_refusal = [](const std::string& yaml, const std::string& expected) {
    const RunConfig c = parse_run_config(yaml, "run.yaml", "/cfg");
    std::string message;
    try {
      check_run_config(c);
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
  };
  check_refusal("backend: cpu\n", "model: no checkpoint directory");
  check_refusal("model: m\ndrafter: replay:trace.json:corrupt=0\n", "corrupt index '0'");
  check_refusal("model: m\ndrafter: magic\n", "drafter: unknown drafter 'magic'");
  check_refusal("model: m\ntransport: nccl\n", "transport: nccl moves device memory");
  CHECK_NOTHROW(check_run_config(parse_run_config("model: m\n", "run.yaml", "/cfg")));
}

TEST_CASE("run config: max_seq defaults to min(max_position_embeddings, 4096), never above it") {
  RunConfig c;
  CHECK(c.effective_max_seq(256) == 256);
  CHECK(c.effective_max_seq(1048576) == 4096);
  c.max_seq = 100;
  CHECK(c.effective_max_seq(256) == 100);
  c.max_seq = 300;
  CHECK_THROWS_WITH_AS(c.effective_max_seq(256),
                       "max_seq: 300 exceeds the model's max_position_embeddings 256", Error);
}

TEST_CASE("--prompt-ids lists: comma-separated non-negative ids") {
  CHECK(parse_id_list("5,0,511", "--prompt-ids") == std::vector<int32_t>{5, 0, 511});
  CHECK_THROWS_WITH_AS(parse_id_list("1,,2", "--prompt-ids"),
                       "--prompt-ids: '' is not a token id (expected e.g. 1,2,3)", Error);
  CHECK_THROWS_AS(parse_id_list("1,-2", "--prompt-ids"), Error);
  CHECK_THROWS_AS(parse_id_list("1,2x", "--prompt-ids"), Error);
  CHECK_THROWS_AS(parse_id_list("", "--prompt-ids"), Error);
}

TEST_CASE("run config: stop_ids (SPECDECODE.md S6) default none, a list of ids, refused by key") {
  CHECK(parse_run_config("model: m\n", "run.yaml", "/cfg").stop_ids.empty());
  CHECK(parse_run_config("stop_ids: [1, 0, 7]\n", "run.yaml", "/cfg").stop_ids ==
        std::vector<int32_t>{1, 0, 7});
  CHECK(refusal("stop_ids: [3, -1]\n").find("stop_ids[1]: -1 is below") != std::string::npos);
  CHECK(refusal("stop_ids: 1\n").find("stop_ids: expected a list") != std::string::npos);
}

TEST_CASE("run config: text and sampling keys (issue 14) are read and range-checked") {
  const RunConfig c = parse_run_config(R"(
model: m
prompt: "Hello"
chat: true
system: Be brief.
thinking: true
stop: ["\n\n", END]
ignore_eos: true
temperature: 0.7
top_k: 40
top_p: 0.9
min_p: 0.05
seed: 123
max_prompt: 64
)", "run.yaml", "/cfg");
  CHECK(c.prompt == "Hello");
  CHECK(c.chat);
  CHECK(c.system == "Be brief.");
  CHECK(c.thinking);
  CHECK(c.stop == std::vector<std::string>{"\n\n", "END"});
  CHECK(c.ignore_eos);
  CHECK(c.sampling.temperature == 0.7);
  CHECK(c.sampling.top_k == 40);
  CHECK(c.sampling.top_p == 0.9);
  CHECK(c.sampling.min_p == 0.05);
  CHECK(c.sampling.seed == 123);
  CHECK(c.seed_set);
  CHECK(c.max_prompt == 64);
  CHECK(parse_run_config("stop: END\n", "run.yaml", "/cfg").stop == std::vector<std::string>{"END"});
  CHECK(refusal("temperature: warm\n") == "run.yaml: temperature: 'warm' is not a number");
  CHECK(refusal("top_k: -1\n").find("top_k") != std::string::npos);
  CHECK(refusal("prompt_file: missing.txt\n").find("/cfg/missing.txt: cannot open") != std::string::npos);
  RunConfig both;
  both.model = "m";
  both.prompt = "x";
  both.prompt_ids = {1};
  CHECK_THROWS_WITH_AS(check_run_config(both), doctest::Contains("prompt and prompt_ids"), Error);
  RunConfig hot;
  hot.model = "m";
  hot.sampling.top_p = 1.5;
  CHECK_THROWS_WITH_AS(check_run_config(hot), doctest::Contains("top_p: 1.5"), Error);
}

TEST_CASE("run config: spec_depth auto / N, spec_costs only with auto, both refused by key") {
  CHECK(parse_run_config("spec_depth: auto\n", "run.yaml", "/cfg").spec_depth ==
        RunConfig::kSpecDepthAuto);
  CHECK(parse_run_config("spec_depth: 0\n", "run.yaml", "/cfg").spec_depth == 0);
  CHECK(spec_depth_name(RunConfig::kSpecDepthAuto) == "auto");
  CHECK(spec_depth_name(4) == "4");
  CHECK(refusal("spec_depth: fast\n") == "run.yaml: spec_depth: 'fast' is not an integer");
  CHECK(refusal("spec_depth: -1\n") == "run.yaml: spec_depth: -1 is below the minimum 0");
  CHECK(refusal("spec_depth: 4294967297\n") ==
        "run.yaml: spec_depth: 4294967297 is above the maximum 2147483647");
  CHECK(parse_run_config("spec_costs: c.json\n", "run.yaml", "/cfg").spec_costs == "/cfg/c.json");
  auto combination = [](const std::string& yaml) {
    return test::error_text([&] { check_run_config(parse_run_config(yaml, "run.yaml", "/cfg")); });
  };
  CHECK(combination("model: m\nspec_depth: auto\n").find("spec_depth: auto schedules") !=
        std::string::npos);
  CHECK(combination("model: m\ndrafter: dspark\nspec_costs: /x.json\n")
            .find("spec_costs: /x.json is only read with spec_depth: auto") != std::string::npos);
  CHECK(combination("model: m\ndrafter: dspark\nspec_depth: auto\nspec_costs: /nonexistent.json\n")
            .find("spec costs /nonexistent.json: cannot open") != std::string::npos);
  CHECK_NOTHROW(check_run_config(
      parse_run_config("model: m\ndrafter: dspark\nspec_depth: auto\n", "run.yaml", "/cfg")));
}

TEST_CASE("run config: prefill_chunk (issue 13), default 2048, 0 = whole prompts, refused by key") {
  CHECK(parse_run_config("", "run.yaml", "/cfg").prefill_chunk == 2048);
  CHECK(parse_run_config("prefill_chunk: 0\n", "run.yaml", "/cfg").prefill_chunk == 0);
  CHECK(parse_run_config("prefill_chunk: 512\n", "run.yaml", "/cfg").prefill_chunk == 512);
  CHECK(refusal("prefill_chunk: -1\n") == "run.yaml: prefill_chunk: -1 is below the minimum 0");
  CHECK(refusal("prefill_chunk: big\n") == "run.yaml: prefill_chunk: 'big' is not an integer");
  CHECK(refusal("prefill_chunk: 4294967296\n") ==
        "run.yaml: prefill_chunk: 4294967296 is above the maximum 2147483647");
}

TEST_CASE("run config: cuda_graphs and cuda_pdl (issue 12), default true, a boolean refused by key") {
  for (const auto& [key, field] : {std::pair{"cuda_graphs", &RunConfig::cuda_graphs},
                                   std::pair{"cuda_pdl", &RunConfig::cuda_pdl}}) {
    INFO(key);
    const std::string k = key;
    CHECK(parse_run_config("", "run.yaml", "/cfg").*field);
    CHECK_FALSE(parse_run_config(k + ": false\n", "run.yaml", "/cfg").*field);
    CHECK(parse_run_config(k + ": true\n", "run.yaml", "/cfg").*field);
    CHECK(refusal(k + ": maybe\n") == "run.yaml: " + k + ": 'maybe' (allowed: true, false)");
  }
  // One key does not set the other.
  CHECK(parse_run_config("cuda_graphs: false\n", "run.yaml", "/cfg").cuda_pdl);
  CHECK(parse_run_config("cuda_pdl: false\n", "run.yaml", "/cfg").cuda_graphs);
}
