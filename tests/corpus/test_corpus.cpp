// The malformed-input corpus (issue 17 item 7): every file under tests/corpus/cases/ is
// one bad input that must be refused with a dsv4::Error naming its culprit. A case file:
//
//   expect: <part> [&& <part> ...]     every part must occur in the error message
//   [data: <n>]                        safetensors: bytes of the data buffer (default 0)
//   ---
//   <body>
//
// The folder names the kind of input the body is:
//   run_config/    the run config YAML (@TINY@ = the tiny fixture checkpoint); parsed,
//                  checked, then checked against the model (before any weight is read)
//   cli/           command-line arguments, one per line, over a valid run config
//   config_patch/  a JSON object merged into the tiny config.json (null removes a key)
//   config_raw/    text inserted right after the opening { of the tiny config.json
//   index_raw/     text inserted right after the opening { of the tiny index
//   safetensors/   a shard's JSON header
//   replay_file/   a --drafter replay:FILE recording
// @FILE@ in an expected part is the path the case's input was written to.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/run_checks.h"
#include "launcher/run_config.h"
#include "model/checkpoint.h"
#include "base/error.h"
#include "model/safetensors.h"
#include "stage/replay_drafter.h"

using namespace dsv4;
namespace fs = std::filesystem;

namespace {

const fs::path kCases = fs::path(DSV4_SOURCE_DIR) / "tests" / "corpus" / "cases";
const fs::path kTiny = fs::path(DSV4_FIXTURES_DIR) / "tiny";

struct Case {
  std::vector<std::string> expect;
  size_t data_bytes = 0;
  std::string body;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

Case parse_case(const fs::path& file) {
  const std::string text = read_text(file);
  const size_t sep = text.find("\n---\n");
  REQUIRE_MESSAGE(sep != std::string::npos, file.string(), ": no --- line");
  Case c;
  c.body = text.substr(sep + 5);
  std::istringstream head(text.substr(0, sep));
  for (std::string line; std::getline(head, line);) {
    if (line.rfind("expect: ", 0) == 0) {
      std::string rest = line.substr(8);
      for (size_t at; (at = rest.find(" && ")) != std::string::npos; rest = rest.substr(at + 4))
        c.expect.push_back(rest.substr(0, at));
      c.expect.push_back(rest);
    } else if (line.rfind("data: ", 0) == 0) {
      c.data_bytes = std::stoul(line.substr(6));
    }
  }
  REQUIRE_MESSAGE(!c.expect.empty(), file.string(), ": no expect line");
  return c;
}

// A copy of the tiny checkpoint's small files (the shards are linked, not copied).
fs::path tiny_copy(const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kTiny)) {
    const fs::path to = dir / e.path().filename();
    fs::remove(to);
    if (e.path().extension() == ".safetensors") fs::create_symlink(e.path(), to);
    else fs::copy_file(e.path(), to);
  }
  return dir;
}

std::string insert_after_brace(const std::string& json, const std::string& text) {
  const size_t brace = json.find('{');
  return json.substr(0, brace + 1) + text + json.substr(brace + 1);
}

// Runs one case; returns the Error's message and the path of its input.
std::string refusal(const std::string& kind, const Case& c, const fs::path& work, std::string* input) {
  const RunConfig good = load_run_config(DSV4_SOURCE_DIR "/configs/tiny.yaml");
  try {
    if (kind == "run_config") {
      *input = (work / "run.yaml").string();
      write_text(*input, replace_all(c.body, "@TINY@", kTiny.string()));
      RunConfig rc = load_run_config(*input);
      check_run_config(rc);
      check_run_against_model(rc, Checkpoint(rc.model));
    } else if (kind == "cli") {
      *input = "command line";
      std::vector<std::string> args{"dsv4-stage", "--config", DSV4_SOURCE_DIR "/configs/tiny.yaml"};
      std::istringstream lines(replace_all(c.body, "@TINY@", kTiny.string()));
      for (std::string a; std::getline(lines, a);) if (!a.empty()) args.push_back(a);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      const CliOptions cli = parse_cli(static_cast<int>(argv.size()), argv.data());
      RunConfig rc = good;
      rc.model = kTiny.string();
      apply_cli(cli, rc);
      check_run_config(rc);
      check_run_against_model(rc, Checkpoint(rc.model));
    } else if (kind == "config_patch" || kind == "config_raw") {
      const fs::path dir = tiny_copy(work / "ckpt");
      *input = (dir / "config.json").string();
      const std::string base = read_text(kTiny / "config.json");
      if (kind == "config_raw") {
        write_text(*input, insert_after_brace(base, c.body));
      } else {
        nlohmann::json j = nlohmann::json::parse(base);
        j.merge_patch(nlohmann::json::parse(c.body));
        write_text(*input, j.dump(2));
      }
      Checkpoint ckpt(dir.string());
    } else if (kind == "index_raw") {
      const fs::path dir = tiny_copy(work / "ckpt");
      *input = (dir / "model.safetensors.index.json").string();
      write_text(*input, insert_after_brace(read_text(kTiny / "model.safetensors.index.json"), c.body));
      Checkpoint ckpt(dir.string());
    } else if (kind == "safetensors") {
      *input = (work / "shard.safetensors").string();
      std::string header = c.body;
      while (!header.empty() && header.back() == '\n') header.pop_back();
      std::string bytes(8, '\0');
      for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
      write_text(*input, bytes + header + std::string(c.data_bytes, '\x01'));
      SafetensorsFile f(*input);
    } else if (kind == "replay_file") {
      *input = (work / "recording.json").string();
      write_text(*input, c.body);
      read_replay_tokens(*input);
    } else {
      FAIL("unknown corpus kind ", kind);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("malformed inputs: each is refused with an error naming its culprit (issue 17)") {
  const fs::path work = fs::temp_directory_path() / ("dsv4_corpus_" + std::to_string(::getpid()));
  int cases = 0;
  for (const auto& kind_dir : fs::directory_iterator(kCases)) {
    for (const auto& file : fs::directory_iterator(kind_dir.path())) {
      if (file.path().extension() != ".case") continue;
      const std::string name = kind_dir.path().filename().string() + "/" + file.path().filename().string();
      CAPTURE(name);
      fs::remove_all(work);
      fs::create_directories(work);
      const Case c = parse_case(file.path());
      std::string input;
      const std::string message = refusal(kind_dir.path().filename().string(), c, work, &input);
      CAPTURE(message);
      CHECK_MESSAGE(!message.empty(), "accepted: ", name);
      for (const std::string& part : c.expect)
        CHECK_MESSAGE(message.find(replace_all(part, "@FILE@", input)) != std::string::npos,
                      name, " does not name '", part, "'");
      ++cases;
    }
  }
  fs::remove_all(work);
  CHECK(cases >= 60);
  MESSAGE(cases, " malformed inputs refused by name");
}
