// dsv4-tokenize: a checkpoint's tokenizer on the command line (like llama.cpp's
// llama-tokenize). --encode prints the ids as a JSON array, --decode the text.
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launcher/tool_args.h"
#include "base/error.h"
#include "model/tokenizer.h"

namespace {

// "1,2,3" or "[1, 2, 3]".
std::vector<int32_t> parse_ids(const std::string& text) {
  const std::string list = text.starts_with("[") ? text : "[" + text + "]";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(list);
  } catch (const nlohmann::json::exception&) {
    throw dsv4::Error(dsv4::cat("--decode: '", text, "' is not a list of ids (e.g. 1,2,3)"));
  }
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      throw dsv4::Error(dsv4::cat("--decode: ", v.dump(), " is not a token id"));
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw dsv4::Error(dsv4::cat("--encode-file ", path, ": cannot open"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int run(int argc, char** argv) {
  cxxopts::Options opts("dsv4-tokenize",
                        "Encodes text to token ids (a JSON array on stdout) or decodes ids to "
                        "text with a checkpoint's tokenizer.json / tokenizer_config.json.");
  opts.add_options()
      ("tokenizer", "directory with tokenizer.json (a checkpoint directory)",
       cxxopts::value<std::string>())
      ("encode", "text to encode", cxxopts::value<std::string>())
      ("encode-file", "encode the contents of FILE (bytes that are not UTF-8 read as U+FFFD)",
       cxxopts::value<std::string>())
      ("decode", "ids to decode: 1,2,3 or [1,2,3]", cxxopts::value<std::string>())
      ("bos", "with --encode*: start with BOS when tokenizer_config.json's add_bos_token is set")
      ("skip-special", "with --decode: leave special tokens out of the text")
      ("h,help", "show this help");
  const auto parsed = dsv4::parse_tool_args(opts, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (!args.count("tokenizer")) throw dsv4::Error("--tokenizer DIR is required (see --help)");
  const int modes = static_cast<int>(args.count("encode") + args.count("encode-file") +
                                     args.count("decode"));
  if (modes != 1) throw dsv4::Error("give exactly one of --encode, --encode-file, --decode");
  const auto tok = dsv4::Tokenizer::load(args["tokenizer"].as<std::string>());
  if (args.count("decode")) {
    const std::string text =
        tok.decode(parse_ids(args["decode"].as<std::string>()), args.count("skip-special") > 0);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  const std::string text = args.count("encode") ? args["encode"].as<std::string>()
                                                : read_file(args["encode-file"].as<std::string>());
  const auto ids = args.count("bos") ? tok.encode_prompt(text) : tok.encode(text);
  std::cout << nlohmann::json(ids).dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::tool_main("dsv4-tokenize", run, argc, argv); }
