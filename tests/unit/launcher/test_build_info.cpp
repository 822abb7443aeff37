// What a user sees first: --version (the source revision `git describe` gave at build
// time), --help opening with an example, and the backend a run gets when it names none.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "launcher/backend_default.h"
#include "launcher/build_info.h"
#include "launcher/cli.h"

using namespace dsv4;

namespace {
std::string first_line_of(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}
CliOptions parse_args(std::vector<std::string> args) {
  args.insert(args.begin(), "dsv4-stage");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_cli(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("--version names the git revision the binary was built from, and the CUDA build") {
  const std::string revision = build_revision();
  const std::string in_git =
      first_line_of(std::string("git -C ") + DSV4_SOURCE_DIR + " rev-parse --git-dir 2>/dev/null");
  if (in_git.empty()) {
    CHECK(revision == "unknown");
  } else {  // `git describe` output (with "-dirty" for uncommitted changes) names a commit here
    const std::string name = revision.ends_with("-dirty")
                                 ? revision.substr(0, revision.size() - 6)
                                 : revision;
    CHECK(first_line_of(std::string("git -C ") + DSV4_SOURCE_DIR +
                        " rev-parse --verify --quiet " + name + "^{commit}")
              .size() == 40);
  }
  CHECK(parse_args({"--version"}).version);
  const std::string text = version_text();
  CHECK(text.find(std::string("dsv4-stage ") + revision) == 0);
  CHECK(text.find(cuda_backend_built() ? "CUDA backend: built" : "CUDA backend: not built") !=
        std::string::npos);
}

TEST_CASE("--help opens with a runnable example") {
  const std::string help = help_text();
  const size_t example = help.find("Example:");
  REQUIRE(example != std::string::npos);
  CHECK(example < help.find("--config"));  // before the flag reference
  CHECK(help.find("mpirun -np 2 dsv4-stage --config configs/tiny.yaml") < help.find("Usage:"));
}

TEST_CASE("backend default: cuda with a CUDA build and a visible device, else cpu, with why") {
  const BackendDefault gpu = default_backend(true, 2);
  CHECK(gpu.backend == Backend::cuda);
  CHECK(gpu.reason.find("2 device(s) are visible") != std::string::npos);
  const BackendDefault no_device = default_backend(true, 0);
  CHECK(no_device.backend == Backend::cpu);
  CHECK(no_device.reason.find("no CUDA device is visible") != std::string::npos);
  const BackendDefault no_build = default_backend(false, 4);
  CHECK(no_build.backend == Backend::cpu);
  CHECK(no_build.reason.find("no CUDA backend") != std::string::npos);
}
