#include "launcher/dump_manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/json_file.h"

namespace dsv4 {

namespace {
constexpr const char* kFormat = "dsv4-boundary-dump/1";
}  // namespace

ReplaySettings replay_settings(const RunConfig& c, int64_t max_seq) {
  ReplaySettings s;
  for (const auto& [key, value] : numerics_options(c.numerics)) s.emplace_back("numerics." + key, value);
  s.emplace_back("max_seq", std::to_string(max_seq));
  s.emplace_back("drafter", c.drafter);
  s.emplace_back("spec_depth", spec_depth_name(c.spec_depth));
  return s;
}

std::string dump_manifest_file(const std::string& dir) { return dir + "/run.json"; }

void write_dump_manifest(const std::string& dir, int n_ranks, const ReplaySettings& settings) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["n_ranks"] = n_ranks;
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  for (const auto& [key, value] : settings) s[key] = value;
  j["settings"] = std::move(s);
  const std::string path = dump_manifest_file(dir), tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(1) << "\n";
    if (!f) throw Error(cat("--dump-boundary ", dir, ": cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(cat("--dump-boundary ", dir, ": cannot rename ", tmp, " to ", path, ": ",
                          ec.message()));
}

ReplaySettings read_dump_manifest(const std::string& dir) {
  const std::string path = dump_manifest_file(dir);
  if (!std::filesystem::exists(path))
    throw Error(cat("--replay ", dir, ": no ", path, " (the run settings of the dump; was it "
                    "written by --dump-boundary of this build?)"));
  const nlohmann::ordered_json j = read_json_file(path, "boundary dump settings");
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw Error(cat(path, ": \"format\" is not \"", kFormat, "\""));
  if (!j.contains("settings") || !j.at("settings").is_object())
    throw Error(cat(path, ": no \"settings\" object"));
  ReplaySettings s;
  for (const auto& [key, value] : j.at("settings").items()) {
    if (!value.is_string()) throw Error(cat(path, ": settings.", key, " is not a string"));
    s.emplace_back(key, value.get<std::string>());
  }
  return s;
}

void check_replay_settings(const std::string& dir, const ReplaySettings& dumped,
                           const ReplaySettings& here) {
  for (const auto& [key, value] : here) {
    const auto it = std::find_if(dumped.begin(), dumped.end(),
                                 [&](const auto& kv) { return kv.first == key; });
    if (it == dumped.end())
      throw Error(cat(dump_manifest_file(dir), ": settings.", key, " missing"));
    if (it->second != value)
      throw Error(cat("--replay ", dir, ": ", key, " is '", value, "' here but the dump was "
                      "recorded with '", it->second, "' (replay with the dumped run's settings)"));
  }
}

}  // namespace dsv4
