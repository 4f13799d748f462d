// Chat-template test material: real GGUFs that carry a template (stories260K's tensors and vocabulary
// with another tokenizer.chat_template and named variants), the shared templates, and the Jinja2
// oracle (render_reference.py's environment under Debian's /usr/bin/python3). Header-only: the test
// executables that include it link infer_gguf.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "support/data_dirs.h"

namespace infer::test {

// INFER_CHAT_TEMPLATES_DIR, default models_dir()/../chat-templates (cases.json, templates/*.jinja).
inline std::string chat_templates_root() {
  if (const char* v = std::getenv("INFER_CHAT_TEMPLATES_DIR"); v && *v) return v;
  return models_dir() + "/../chat-templates";
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// templates/<name> of the shared set ("Qwen-Qwen3-0.6B.jinja"); "" when missing.
inline std::string shared_template(const std::string& name) {
  return read_text_file(chat_templates_root() + "/templates/" + name);
}

// Writes a copy of `source` (a GGUF) to `path` with tokenizer.chat_template = `chat_template` (left out
// when empty) and tokenizer.chat_template.<name> for each of `named`.
inline void write_chat_model(const std::string& source, const std::string& path, const std::string& chat_template,
                             const std::vector<std::pair<std::string, std::string>>& named = {}) {
  const std::unique_ptr<gguf::File> src = gguf::File::open(source);
  gguf::Writer w(src->alignment());
  for (const auto& [key, value] : src->metadata()) {
    if (key == "general.alignment" || key.rfind("tokenizer.chat_template", 0) == 0) continue;
    w.add_kv(key, value);
  }
  if (!chat_template.empty()) w.add_string("tokenizer.chat_template", chat_template);
  for (const auto& [name, text] : named) w.add_string("tokenizer.chat_template." + name, text);
  for (const auto& t : src->tensors())
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + (t.n_dims ? t.n_dims : 1)), t.data);
  w.write(path);
}

// What Jinja2 renders (render_reference.py's environment: transformers' settings) for `source` with these
// variables; `tools` null leaves tools undefined; every key of `extra` is passed too. A failure gives
// "ERROR: <message>" ("ERROR: raise_exception: ..." for raise_exception).
inline std::string oracle_render(const std::string& source, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos, const std::string& eos,
                                 const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) {
  namespace fs = std::filesystem;
  const std::string stem =
      (fs::temp_directory_path() / ("infer-oracle-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand())))
          .string();
  nlohmann::ordered_json in = {{"source", source},
                               {"messages", messages},
                               {"tools", tools},
                               {"add_generation_prompt", add_generation_prompt},
                               {"bos_token", bos},
                               {"eos_token", eos},
                               {"extra", extra}};
  std::ofstream(stem + ".json", std::ios::binary) << in.dump();
  const char* script =
      "import json, sys\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "import render_reference as r\n"
      "a = json.load(open(sys.argv[2], encoding='utf-8'))\n"
      "kw = dict(a['extra'], messages=a['messages'], add_generation_prompt=a['add_generation_prompt'],\n"
      "          bos_token=a['bos_token'], eos_token=a['eos_token'])\n"
      "if a['tools'] is not None: kw['tools'] = a['tools']\n"
      "try:\n"
      "    out = r.env().from_string(a['source']).render(**kw)\n"
      "except r.TemplateError as e:\n"
      "    out = 'ERROR: raise_exception: ' + str(e)\n"
      "except Exception as e:\n"
      "    out = 'ERROR: ' + type(e).__name__ + ': ' + str(e)\n"
      "open(sys.argv[3], 'w', encoding='utf-8', newline='').write(out)\n";
  std::ofstream(stem + ".py") << script;
  const std::string cmd = "/usr/bin/python3 " + stem + ".py '" + chat_templates_root() + "' " + stem + ".json " +
                          stem + ".out 2>" + stem + ".err";
  const int rc = std::system(cmd.c_str());
  std::string out = rc == 0 ? read_text_file(stem + ".out") : "ERROR: oracle failed: " + read_text_file(stem + ".err");
  for (const char* ext : {".json", ".py", ".out", ".err"}) {
    std::error_code ec;
    fs::remove(stem + ext, ec);
  }
  return out;
}

}  // namespace infer::test
