#include "launcher/logits_dump.h"

#include <cmath>
#include <cstdio>

#include "launcher/output_files.h"
#include "base/error.h"

namespace dsv4 {

namespace {
void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  out += ']';
}

void append_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(v));
  out += text;
}
}  // namespace

std::string logits_json(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                        const std::vector<std::vector<float>>& logits) {
  std::string out = "{\"prompt\": ";
  append_ids(out, prompt);
  out += ", \"tokens\": ";
  append_ids(out, tokens);
  out += ", \"logits\": [";
  for (size_t r = 0; r < logits.size(); ++r) {
    out += r ? ",\n  [" : "\n  [";
    for (size_t i = 0; i < logits[r].size(); ++i) {
      if (i) out += ", ";
      append_float(out, logits[r][i]);
    }
    out += ']';
  }
  out += "]}\n";
  return out;
}

void write_logits_json(const std::string& path, const std::string& json) {
  write_file_atomically(path, json, "--dump-logits");
}

}  // namespace dsv4
