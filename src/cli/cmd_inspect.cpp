// `infer inspect FILE [--json]`: what a GGUF file holds — header, metadata (long arrays shortened),
// tensor table, totals per tensor type and a tokenizer summary. A bad file is an error, never a crash.
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

using gguf::Value;
using gguf::ValueType;

struct InspectArgs {
  std::string path;
  bool json = false;
  size_t array_items = 8;    // array elements shown before "... (N more)"
  size_t string_chars = 96;  // text output cuts longer strings (chat templates)
};

// Printable form of a metadata string: control bytes escaped, long text cut.
std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > max_chars) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string scalar_text(const Value& v, const InspectArgs& a) {
  switch (v.type) {
    case ValueType::STRING: return quote(v.as_string(), a.string_chars);
    case ValueType::BOOL: return v.as_bool() ? "true" : "false";
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", v.as_float());
      return buf;
    }
    case ValueType::ARRAY: return "[...]";
    default:
      return std::holds_alternative<uint64_t>(v.data) ? std::to_string(v.as_uint()) : std::to_string(v.as_int());
  }
}

std::string value_text(const Value& v, const InspectArgs& a) {
  if (!v.is_array()) return scalar_text(v, a);
  const auto& items = v.as_array();
  std::string out = "[";
  for (size_t i = 0; i < items.size() && i < a.array_items; ++i) {
    if (i) out += ", ";
    out += items[i].is_array() ? value_text(items[i], a) : scalar_text(items[i], {a.path, a.json, 0, 32});
  }
  if (items.size() > a.array_items) out += ", ... (" + std::to_string(items.size() - a.array_items) + " more)";
  return out + "]";
}

std::string type_text(const Value& v) {
  if (!v.is_array()) return std::string(gguf::value_type_name(v.type));
  return "ARRAY[" + std::string(gguf::value_type_name(v.element_type)) + "] (" + std::to_string(v.array_size()) + ")";
}

nlohmann::json value_json(const Value& v, size_t array_items) {
  switch (v.type) {
    case ValueType::STRING: return v.as_string();
    case ValueType::BOOL: return v.as_bool();
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return v.as_float();
    case ValueType::ARRAY: {
      nlohmann::json head = nlohmann::json::array();
      const auto& items = v.as_array();
      for (size_t i = 0; i < items.size() && i < array_items; ++i) head.push_back(value_json(items[i], array_items));
      return {{"element_type", gguf::value_type_name(v.element_type)}, {"count", items.size()}, {"head", head}};
    }
    default:
      if (std::holds_alternative<uint64_t>(v.data)) return v.as_uint();
      return v.as_int();
  }
}

std::string shape_text(const gguf::TensorView& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

struct TypeTotal {
  int count = 0;
  uint64_t bytes = 0;
  int64_t elements = 0;
};

// Facts about the vocabulary read straight from tokenizer.ggml.* metadata.
nlohmann::json tokenizer_summary(const gguf::File& f) {
  nlohmann::json j;
  if (!f.has("tokenizer.ggml.model")) return j;
  j["model"] = f.get_string("tokenizer.ggml.model");
  j["pre"] = f.has("tokenizer.ggml.pre") ? nlohmann::json(f.get_string("tokenizer.ggml.pre")) : nlohmann::json();
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  j["vocab_size"] = tokens ? tokens->array_size() : 0;
  const Value* merges = f.find("tokenizer.ggml.merges");
  j["merges"] = merges ? merges->array_size() : 0;
  for (const char* which : {"bos", "eos"}) {
    std::string key = std::string("tokenizer.ggml.") + which + "_token_id";
    if (!f.has(key)) continue;
    int64_t id = f.get_int(key);
    nlohmann::json tok = {{"id", id}};
    if (tokens && tokens->element_type == ValueType::STRING && id >= 0 &&
        static_cast<uint64_t>(id) < tokens->array_size()) {
      tok["text"] = tokens->as_array()[static_cast<size_t>(id)].as_string();
    }
    j[which] = tok;
  }
  const Value* tmpl = f.find("tokenizer.chat_template");
  j["chat_template"] = tmpl != nullptr;
  if (tmpl && tmpl->is_string()) j["chat_template_bytes"] = tmpl->as_string().size();
  // What our tokenizer makes of it; a vocabulary it refuses is reported, not fatal to inspect.
  try {
    auto tok = tokenizer::Tokenizer::from_gguf(f);
    char fp[32];
    std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(tok->fingerprint()));
    j["fingerprint"] = fp;
    j["effective_pre"] = tok->pre_tokenizer();
    j["pre_unknown"] = tok->pre_tokenizer_unknown();
  } catch (const std::exception& e) {
    j["load_error"] = e.what();
  }
  return j;
}

void run_inspect(const InspectArgs& a) {
  auto f = gguf::File::open(a.path);
  std::map<std::string, TypeTotal> totals;
  TypeTotal all;
  for (const auto& t : f->tensors()) {
    auto& tt = totals[std::string(gguf::type_name(t.type))];
    tt.count++;
    tt.bytes += t.n_bytes;
    tt.elements += t.n_elements();
    all.count++;
    all.bytes += t.n_bytes;
    all.elements += t.n_elements();
  }
  nlohmann::json tok = tokenizer_summary(*f);

  if (a.json) {
    nlohmann::json j;
    j["path"] = f->path();
    j["version"] = f->version();
    j["file_size"] = f->file_size();
    j["alignment"] = f->alignment();
    j["data_offset"] = f->data_offset();
    nlohmann::json meta = nlohmann::json::array();
    for (const auto& [key, v] : f->metadata()) {
      meta.push_back({{"key", key}, {"type", gguf::value_type_name(v.type)}, {"value", value_json(v, a.array_items)}});
    }
    j["metadata"] = meta;
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : f->tensors()) {
      std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
      tensors.push_back({{"name", t.name}, {"type", gguf::type_name(t.type)}, {"shape", shape},
                         {"offset", t.offset}, {"bytes", t.n_bytes}});
    }
    j["tensors"] = tensors;
    nlohmann::json by_type = nlohmann::json::object();
    for (const auto& [name, tt] : totals) by_type[name] = {{"count", tt.count}, {"bytes", tt.bytes}};
    j["totals"] = {{"by_type", by_type}, {"tensors", all.count}, {"bytes", all.bytes}, {"elements", all.elements}};
    j["tokenizer"] = tok;
    // Vocab strings need not be valid UTF-8; replace bad bytes rather than fail.
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }

  std::printf("%s\n", f->path().c_str());
  std::printf("  GGUF v%u, %llu bytes, alignment %u, data section at byte %llu\n", f->version(),
              static_cast<unsigned long long>(f->file_size()), f->alignment(),
              static_cast<unsigned long long>(f->data_offset()));
  std::string arch = f->get_string("general.architecture", "(no general.architecture)");
  std::printf("  architecture %s, %lld blocks, %d tensors, %lld parameters\n", arch.c_str(),
              static_cast<long long>(f->get_int(arch + ".block_count", 0)), all.count,
              static_cast<long long>(all.elements));
  std::printf("\nmetadata (%zu keys):\n", f->metadata().size());
  for (const auto& [key, v] : f->metadata()) {
    std::printf("  %-44s %-22s %s\n", key.c_str(), type_text(v).c_str(), value_text(v, a).c_str());
  }
  std::printf("\ntensors (%zu):\n", f->tensors().size());
  if (!f->tensors().empty()) {
    std::printf("  %-40s %-8s %-24s %14s %14s\n", "name", "type", "shape", "offset", "bytes");
    for (const auto& t : f->tensors()) {
      std::printf("  %-40s %-8s %-24s %14llu %14llu\n", t.name.c_str(), std::string(gguf::type_name(t.type)).c_str(),
                  shape_text(t).c_str(), static_cast<unsigned long long>(t.offset),
                  static_cast<unsigned long long>(t.n_bytes));
    }
    std::printf("\ntotals by type:\n");
    for (const auto& [name, tt] : totals) {
      std::printf("  %-8s %5d tensors %14llu bytes %14lld elements\n", name.c_str(), tt.count,
                  static_cast<unsigned long long>(tt.bytes), static_cast<long long>(tt.elements));
    }
    std::printf("  %-8s %5d tensors %14llu bytes %14lld elements\n", "all", all.count,
                static_cast<unsigned long long>(all.bytes), static_cast<long long>(all.elements));
  }
  std::printf("\ntokenizer:\n");
  if (tok.is_null()) {
    std::printf("  (no tokenizer.ggml.model key)\n");
    return;
  }
  std::printf("  model %s, pre-tokenizer %s, vocab %zu, merges %zu\n", tok["model"].get<std::string>().c_str(),
              tok["pre"].is_null() ? "(absent)" : tok["pre"].get<std::string>().c_str(),
              tok["vocab_size"].get<size_t>(), tok["merges"].get<size_t>());
  for (const char* which : {"bos", "eos"}) {
    if (!tok.contains(which)) continue;
    const auto& t = tok[which];
    std::printf("  %s %lld %s\n", which, static_cast<long long>(t["id"].get<int64_t>()),
                t.contains("text") ? quote(t["text"].get<std::string>(), 32).c_str() : "(id outside the vocab)");
  }
  if (tok.contains("fingerprint")) {
    std::printf("  fingerprint %s, effective pre-tokenizer %s%s\n", tok["fingerprint"].get<std::string>().c_str(),
                tok["effective_pre"].get<std::string>().c_str(),
                tok["pre_unknown"].get<bool>() ? " (the file names a pre-tokenizer this tokenizer does not know)" : "");
  } else if (tok.contains("load_error")) {
    std::printf("  tokenizer does not load: %s\n", tok["load_error"].get<std::string>().c_str());
  }
  std::printf("  chat template: %s\n",
              tok["chat_template"].get<bool>()
                  ? ("yes (" + std::to_string(tok.value("chat_template_bytes", size_t{0})) + " bytes)").c_str()
                  : "no");
}

void setup_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF file's header, metadata, tensors and tokenizer");
  cmd->add_option("file", args->path, "GGUF file")->required();
  cmd->add_flag("--json", args->json, "One JSON object instead of text");
  cmd->add_option("--array-items", args->array_items, "Array elements shown before eliding the rest")
      ->capture_default_str();
  cmd->callback([args] { run_inspect(*args); });
}

RegisterCommand reg_inspect("inspect", setup_inspect);

}  // namespace
}  // namespace infer::cli
