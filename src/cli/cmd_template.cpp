// `infer template (--file T.jinja | -m MODEL.gguf [--name NAME]) --input CASE.json [--now ISO-TIME]`:
// renders a chat template as Hugging Face transformers would and prints the text exactly, with no newline
// added. CASE.json holds `messages`, optional `tools`, `add_generation_prompt`, `bos_token`, `eos_token`;
// any other key except `name` becomes a template variable (e.g. enable_thinking). A template that fails
// prints Jinja2's error to stderr and exits 1.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/command_registry.h"
#include "gguf/file.h"

namespace infer::cli {
namespace {

struct TemplateArgs {
  std::string file;
  std::string model;
  std::string name;
  std::string input;
  std::string now;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("template: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "2024-07-26T09:30[:00]" (or with a space) as seconds since the epoch on the local clock's face.
std::int64_t parse_now(const std::string& text) {
  std::tm tm{};
  int seconds = 0;
  char sep = 0;
  int n = std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &sep,
                      &tm.tm_hour, &tm.tm_min, &seconds);
  if (n < 6 || (sep != 'T' && sep != ' '))
    throw std::runtime_error("template: --now wants YYYY-MM-DDTHH:MM[:SS], got '" + text + "'");
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = n == 7 ? seconds : 0;
  return std::int64_t(timegm(&tm));
}

std::string template_from_gguf(const std::string& model, const std::string& name) {
  const auto file = gguf::File::open(model);
  const std::string key = name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
  if (!file->has(key)) throw std::runtime_error("template: " + model + " has no " + key);
  return file->get_string(key);
}

void run_template(const TemplateArgs& a) {
  if (a.file.empty() == a.model.empty()) throw std::runtime_error("template: give exactly one of --file and -m");
  if (!a.name.empty() && a.model.empty()) throw std::runtime_error("template: --name needs -m");
  const std::string source = a.file.empty() ? template_from_gguf(a.model, a.name) : read_text(a.file);
  const auto input = nlohmann::ordered_json::parse(read_text(a.input));
  if (!input.is_object() || !input.contains("messages"))
    throw std::runtime_error("template: " + a.input + " must be an object with \"messages\"");

  chat::ChatTemplate tmpl(source);
  if (!a.now.empty()) {
    const std::int64_t now = parse_now(a.now);
    tmpl.set_clock([now] { return now; });
  }
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (auto it = input.begin(); it != input.end(); ++it) {
    const std::string& key = it.key();
    if (key != "name" && key != "messages" && key != "tools" && key != "add_generation_prompt" &&
        key != "bos_token" && key != "eos_token")
      extra[key] = it.value();
  }
  const std::string text =
      tmpl.render(input["messages"], input.value("tools", nlohmann::ordered_json()),
                  input.value("add_generation_prompt", false), input.value("bos_token", std::string()),
                  input.value("eos_token", std::string()), extra);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("template: writing to stdout failed");
}

void setup_template(CLI::App& app) {
  auto args = std::make_shared<TemplateArgs>();
  auto* cmd = app.add_subcommand("template", "Render a chat template (Jinja2, as Hugging Face renders it)");
  cmd->add_option("--file", args->file, "Template file (.jinja)");
  cmd->add_option("-m,--model", args->model, "GGUF file whose tokenizer.chat_template to render");
  cmd->add_option("--name", args->name, "Named variant: tokenizer.chat_template.<NAME> (e.g. tool_use)");
  cmd->add_option("--input", args->input,
                  "JSON: messages, tools, add_generation_prompt, bos_token, eos_token, extra variables")
      ->required();
  cmd->add_option("--now", args->now, "Time strftime_now() reads, YYYY-MM-DDTHH:MM[:SS] (default: local time)");
  cmd->callback([args] { run_template(*args); });
}

RegisterCommand reg_template("template", setup_template);

}  // namespace
}  // namespace infer::cli
