#include "gateway/openai.h"

#include <cstring>

namespace infer::gateway {

namespace {

std::string text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string(r->str, r->len) : "";
}

double number_of(const redisReply* r) {
  if (!r) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return static_cast<double>(r->integer);
  if (r->type == REDIS_REPLY_STRING) return std::strtod(std::string(r->str, r->len).c_str(), nullptr);
  return 0;
}

// RESP2 maps are flat arrays: key, value, key, value ...
const redisReply* field(const redisReply* map, const char* name) {
  if (!map || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2)
    if (text_of(map->element[i]) == name) return map->element[i + 1];
  return nullptr;
}

json byte_list(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

json token_logprob(const redisReply* m) {
  const std::string token = text_of(field(m, "token"));
  return {{"token", token}, {"logprob", number_of(field(m, "logprob"))}, {"bytes", byte_list(token)}};
}

void need(bool ok, const char* param, const std::string& what) {
  if (!ok) throw ApiError(400, std::string("'") + param + "' " + what, param);
}

// Options shared by chat and text completions.
void sampling_options(const json& body, GenerationCall* call) {
  if (body.contains("n") && !body["n"].is_null()) {
    need(body["n"].is_number_integer(), "n", "must be an integer");
    if (body["n"].get<long long>() != 1)
      throw ApiError(400, "n > 1 is not supported: send one request per choice", "n", "unsupported_value");
  }
  for (const char* p : {"frequency_penalty", "presence_penalty"}) {
    if (body.contains(p) && !body[p].is_null()) {
      need(body[p].is_number(), p, "must be a number");
      if (body[p].get<double>() != 0) throw ApiError(400, std::string("'") + p + "' is not supported", p, "unsupported_parameter");
    }
  }
  const char* max_field = body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()
                              ? "max_completion_tokens" : "max_tokens";
  if (body.contains(max_field) && !body[max_field].is_null()) {
    need(body[max_field].is_number_integer() && body[max_field].get<long long>() >= 1, max_field,
         "must be a positive integer");
    call->argv.insert(call->argv.end(), {"MAXTOKENS", std::to_string(body[max_field].get<long long>())});
  }
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    need(body["temperature"].is_number() && body["temperature"].get<double>() >= 0, "temperature",
         "must be a number >= 0");
    call->argv.insert(call->argv.end(), {"TEMP", dump(body["temperature"])});
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    need(body["top_p"].is_number(), "top_p", "must be a number");
    call->argv.insert(call->argv.end(), {"TOPP", dump(body["top_p"])});
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    need(body["seed"].is_number_integer(), "seed", "must be an integer");
    call->argv.insert(call->argv.end(), {"SEED", std::to_string(body["seed"].get<long long>())});
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    need(stop.is_string() || stop.is_array(), "stop", "must be a string or a list of strings");
    for (const json& s : stop.is_string() ? json::array({stop}) : stop) {
      need(s.is_string(), "stop", "must be a string or a list of strings");
      call->argv.insert(call->argv.end(), {"STOP", s.get<std::string>()});
    }
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    need(body["stream"].is_boolean(), "stream", "must be a boolean");
    call->stream = body["stream"].get<bool>();
  }
  if (call->stream && body.contains("stream_options") && body["stream_options"].is_object()) {
    const json& o = body["stream_options"];
    call->include_usage = o.contains("include_usage") && o["include_usage"].is_boolean() && o["include_usage"].get<bool>();
  }
}

std::string model_of(const json& body) {
  need(body.is_object(), "body", "must be a JSON object");
  need(body.contains("model") && body["model"].is_string() && !body["model"].get<std::string>().empty(), "model",
       "is required (a model name from GET /v1/models)");
  return body["model"].get<std::string>();
}

}  // namespace

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiError module_error(const std::string& text) {
  auto starts = [&](const char* p) { return text.rfind(p, 0) == 0; };
  std::string msg = text;
  if (const size_t sp = text.find(' '); sp != std::string::npos && sp < 12) msg = text.substr(sp + 1);
  if (starts("BUSY")) return ApiError(429, msg, "", "rate_limit_exceeded", "rate_limit_error");
  if (starts("WRONGPASS") || starts("NOAUTH"))
    return ApiError(401, "invalid API key: " + msg, "", "invalid_api_key", "invalid_request_error");
  if (starts("NOPERM")) return ApiError(403, msg, "", "permission_denied", "permission_error");
  if (starts("TIMEOUT")) return ApiError(504, msg, "", "timeout", "timeout_error");
  if (text.find("unknown model") != std::string::npos) return ApiError(404, msg, "model", "model_not_found");
  return ApiError(400, msg);
}

std::vector<std::string> cache_arguments(const std::string& header) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= header.size()) {
    const size_t semi = header.find(';', at);
    std::string p = header.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
    p.erase(0, p.find_first_not_of(' '));
    p.erase(p.find_last_not_of(' ') + 1);
    if (!p.empty()) parts.push_back(p);
    if (semi == std::string::npos) break;
    at = semi + 1;
  }
  if (parts.empty()) return {};
  auto bad = [&](const std::string& why) {
    return ApiError(400, "X-Infer-Cache: " + why + " (expected: key[; threshold=S][; ttl=SECONDS][; sampled])", "",
                    "invalid_cache_header");
  };
  if (parts[0].find('=') != std::string::npos) throw bad("the first item must be the cache's key");
  std::vector<std::string> args = {"CACHE", parts[0]};
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string name = parts[i].substr(0, eq), value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (name == "threshold" && !value.empty()) args.insert(args.end(), {"THRESHOLD", value});
    else if (name == "ttl" && !value.empty()) args.insert(args.end(), {"TTL", value});
    else if (name == "sampled" && eq == std::string::npos) args.push_back("SAMPLED");
    else throw bad("unknown item '" + parts[i] + "'");
  }
  return args;
}

GenerationCall chat_call(const json& body) {
  GenerationCall call;
  call.model = model_of(body);
  need(body.contains("messages") && body["messages"].is_array() && !body["messages"].empty(), "messages",
       "must be a non-empty list of messages");
  for (const json& m : body["messages"]) {
    need(m.is_object() && m.contains("role") && m["role"].is_string(), "messages", "must each have a role");
    const std::string role = m["role"].get<std::string>();
    need(role == "system" || role == "developer" || role == "user" || role == "assistant" || role == "tool",
         "messages", "role '" + role + "' is not one of system, developer, user, assistant, tool");
  }
  call.argv = {"INFER.GENERATE", call.model, "MESSAGES", dump(body["messages"])};
  // Extensions (as vLLM names them): the template to render with, for a GGUF without one or to pick a
  // named variant, and extra template variables such as enable_thinking.
  if (body.contains("chat_template") && !body["chat_template"].is_null()) {
    need(body["chat_template"].is_string(), "chat_template", "must be a template name (e.g. chatml or tool_use)");
    call.argv.insert(call.argv.end(), {"TEMPLATE", body["chat_template"].get<std::string>()});
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    need(body["chat_template_kwargs"].is_object(), "chat_template_kwargs", "must be an object");
    call.argv.insert(call.argv.end(), {"CHATARGS", dump(body["chat_template_kwargs"])});
  }
  sampling_options(body, &call);
  if (body.contains("tools") && !body["tools"].is_null()) {
    need(body["tools"].is_array(), "tools", "must be a list of tools");
    if (!body["tools"].empty()) {
      call.argv.insert(call.argv.end(), {"TOOLS", dump(body["tools"])});
      call.may_call_tools = true;
    }
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    std::string choice;
    if (tc.is_string()) {
      choice = tc.get<std::string>();
      need(choice == "auto" || choice == "none" || choice == "required", "tool_choice",
           "must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    } else {
      need(tc.is_object() && tc.contains("function") && tc["function"].is_object() &&
               tc["function"].contains("name") && tc["function"]["name"].is_string(),
           "tool_choice", "must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      choice = tc["function"]["name"].get<std::string>();
    }
    if (call.may_call_tools) {
      call.argv.insert(call.argv.end(), {"TOOLCHOICE", choice});
      if (choice == "none") call.may_call_tools = false;
    } else if (choice != "none" && choice != "auto") {
      throw ApiError(400, "'tool_choice' needs 'tools'", "tool_choice");
    }
  }
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const json& rf = body["response_format"];
    need(rf.is_object() && rf.contains("type") && rf["type"].is_string(), "response_format",
         "must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
    const std::string type = rf["type"].get<std::string>();
    if (type == "json_object") {
      call.argv.insert(call.argv.end(), {"FORMAT", "json"});
    } else if (type == "json_schema") {
      need(rf.contains("json_schema") && rf["json_schema"].is_object() && rf["json_schema"].contains("schema") &&
               rf["json_schema"]["schema"].is_object(),
           "response_format", "json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
      call.argv.insert(call.argv.end(), {"JSONSCHEMA", dump(rf["json_schema"]["schema"])});
    } else {
      need(type == "text", "response_format", "type '" + type + "' is not text, json_object or json_schema");
    }
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    need(body["logprobs"].is_boolean(), "logprobs", "must be a boolean");
    call.logprobs = body["logprobs"].get<bool>();
  }
  long long top = 0;
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    need(body["top_logprobs"].is_number_integer(), "top_logprobs", "must be an integer in 0..20");
    top = body["top_logprobs"].get<long long>();
    need(top >= 0 && top <= 20, "top_logprobs", "must be an integer in 0..20");
    need(call.logprobs, "top_logprobs", "needs 'logprobs': true");
  }
  if (call.logprobs) call.argv.insert(call.argv.end(), {"LOGPROBS", std::to_string(top)});
  call.argv.push_back("WITHSTATS");
  return call;
}

GenerationCall completion_call(const json& body) {
  GenerationCall call;
  call.model = model_of(body);
  need(body.contains("prompt"), "prompt", "is required");
  json prompt = body["prompt"];
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
  need(prompt.is_string(), "prompt", "must be a string (lists of prompts and token arrays are not supported)");
  call.argv = {"INFER.GENERATE", call.model, "PROMPT", prompt.get<std::string>()};
  sampling_options(body, &call);
  if (body.contains("echo") && body["echo"].is_boolean() && body["echo"].get<bool>())
    throw ApiError(400, "'echo' is not supported", "echo", "unsupported_parameter");
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    need(body["logprobs"].is_number_integer() && body["logprobs"].get<long long>() >= 0 &&
             body["logprobs"].get<long long>() <= 20,
         "logprobs", "must be an integer in 0..20");
    call.logprobs = true;
    call.argv.insert(call.argv.end(), {"LOGPROBS", std::to_string(body["logprobs"].get<long long>())});
  }
  call.argv.push_back("WITHSTATS");
  return call;
}

Generation parse_generation(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 2)
    throw ApiError(502, "unexpected reply from INFER.GENERATE", "", "bad_gateway", "api_error");
  Generation g;
  g.text = text_of(field(r, "text"));
  g.finish = text_of(field(r, "finish"));
  g.prompt_tokens = static_cast<long long>(number_of(field(r, "prompt_tokens")));
  g.completion_tokens = static_cast<long long>(number_of(field(r, "generated_tokens")));
  if (const redisReply* c = field(r, "cached")) g.cached = number_of(c) != 0;
  g.cache_similarity = number_of(field(r, "cache_similarity"));
  if (const redisReply* calls = field(r, "tool_calls"); calls && calls->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < calls->elements; ++i) {
      const redisReply* c = calls->element[i];
      g.tool_calls.push_back({{"id", text_of(field(c, "id"))},
                              {"type", "function"},
                              {"function", {{"name", text_of(field(c, "name"))}, {"arguments", text_of(field(c, "arguments"))}}}});
    }
  }
  if (const redisReply* lp = field(r, "logprobs"); lp && lp->type == REDIS_REPLY_ARRAY) {
    g.logprobs = json::array();
    for (size_t i = 0; i < lp->elements; ++i) {
      json entry = token_logprob(lp->element[i]);
      json top = json::array();
      if (const redisReply* alts = field(lp->element[i], "top_logprobs"); alts && alts->type == REDIS_REPLY_ARRAY)
        for (size_t k = 0; k < alts->elements; ++k) top.push_back(token_logprob(alts->element[k]));
      entry["top_logprobs"] = std::move(top);
      g.logprobs.push_back(std::move(entry));
    }
  }
  return g;
}

std::string finish_reason(const std::string& f) {
  if (f == "length" || f == "deadline") return "length";
  if (f == "tool_calls") return "tool_calls";
  return "stop";
}

json usage(long long prompt_tokens, long long completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json chat_completion(const std::string& id, const std::string& model, long long created, const Generation& g) {
  json message = {{"role", "assistant"},
                  {"content", g.tool_calls.empty() || !g.text.empty() ? json(g.text) : json(nullptr)},
                  {"refusal", nullptr}};
  if (!g.tool_calls.empty()) message["tool_calls"] = g.tool_calls;
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"index", 0},
                                    {"message", message},
                                    {"logprobs", g.logprobs.is_null() ? json(nullptr) : json({{"content", g.logprobs}})},
                                    {"finish_reason", finish_reason(g.finish)}}})},
          {"usage", usage(g.prompt_tokens, g.completion_tokens)},
          {"system_fingerprint", nullptr}};
}

json text_completion(const std::string& id, const std::string& model, long long created, const Generation& g) {
  json logprobs = nullptr;
  if (!g.logprobs.is_null()) {
    json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
    size_t offset = 0;
    for (const json& t : g.logprobs) {
      tokens.push_back(t["token"]);
      values.push_back(t["logprob"]);
      json top = json::object();
      for (const json& a : t["top_logprobs"]) top[a["token"].get<std::string>()] = a["logprob"];
      tops.push_back(top);
      offsets.push_back(offset);
      offset += t["token"].get<std::string>().size();
    }
    logprobs = {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({{{"index", 0}, {"text", g.text}, {"logprobs", logprobs},
                                    {"finish_reason", finish_reason(g.finish)}}})},
          {"usage", usage(g.prompt_tokens, g.completion_tokens)}};
}

json chat_chunk(const std::string& id, const std::string& model, long long created, const json& delta,
                const std::optional<std::string>& finish, const json& logprobs, const json& usage_value) {
  json chunk = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"system_fingerprint", nullptr}};
  if (!usage_value.is_null()) {
    chunk["choices"] = json::array();
    chunk["usage"] = usage_value;
    return chunk;
  }
  chunk["choices"] = json::array({{{"index", 0},
                                   {"delta", delta},
                                   {"logprobs", logprobs.is_null() ? json(nullptr) : json({{"content", logprobs}})},
                                   {"finish_reason", finish ? json(*finish) : json(nullptr)}}});
  return chunk;
}

json text_chunk(const std::string& id, const std::string& model, long long created, const std::string& text,
                const std::optional<std::string>& finish, const json& usage_value) {
  json chunk = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}};
  if (!usage_value.is_null()) {
    chunk["choices"] = json::array();
    chunk["usage"] = usage_value;
    return chunk;
  }
  chunk["choices"] = json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                   {"finish_reason", finish ? json(*finish) : json(nullptr)}}});
  return chunk;
}

json stream_logprobs(const std::string& module_json) {
  json in = json::parse(module_json, nullptr, false);
  json out = json::array();
  if (!in.is_array()) return out;
  auto convert = [](const json& t) {
    return json{{"token", t.value("token", "")}, {"logprob", t.value("logprob", 0.0)},
                {"bytes", t.contains("bytes") ? t["bytes"] : json::array()}};
  };
  for (const json& t : in) {
    json entry = convert(t);
    entry["top_logprobs"] = json::array();
    if (t.contains("top_logprobs") && t["top_logprobs"].is_array())
      for (const json& a : t["top_logprobs"]) entry["top_logprobs"].push_back(convert(a));
    out.push_back(std::move(entry));
  }
  return out;
}

EmbeddingCall embedding_call(const json& body) {
  EmbeddingCall call;
  call.model = model_of(body);
  need(body.contains("input"), "input", "is required");
  const json& in = body["input"];
  if (in.is_string()) {
    call.inputs.push_back(in.get<std::string>());
  } else {
    need(in.is_array() && !in.empty(), "input", "must be a string or a non-empty list of strings");
    for (const json& s : in) {
      need(s.is_string(), "input", "must be a string or a list of strings (token arrays are not supported)");
      call.inputs.push_back(s.get<std::string>());
    }
  }
  need(call.inputs.size() <= 2048, "input", "holds more than 2048 texts");
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    need(body["encoding_format"].is_string(), "encoding_format", "must be float or base64");
    const std::string f = body["encoding_format"].get<std::string>();
    need(f == "float" || f == "base64", "encoding_format", "must be float or base64");
    call.base64 = f == "base64";
  }
  if (body.contains("dimensions") && !body["dimensions"].is_null())
    throw ApiError(400, "'dimensions' is not supported: the model's embedding width is fixed", "dimensions",
                   "unsupported_parameter");
  return call;
}

json embedding_object(size_t index, const std::string& blob, bool base64) {
  json out = {{"object", "embedding"}, {"index", index}};
  if (base64) {
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b;
    b.reserve((blob.size() + 2) / 3 * 4);
    for (size_t i = 0; i < blob.size(); i += 3) {
      const uint32_t n = (uint32_t(uint8_t(blob[i])) << 16) | (i + 1 < blob.size() ? uint32_t(uint8_t(blob[i + 1])) << 8 : 0) |
                         (i + 2 < blob.size() ? uint32_t(uint8_t(blob[i + 2])) : 0);
      b += kAlphabet[(n >> 18) & 63];
      b += kAlphabet[(n >> 12) & 63];
      b += i + 1 < blob.size() ? kAlphabet[(n >> 6) & 63] : '=';
      b += i + 2 < blob.size() ? kAlphabet[n & 63] : '=';
    }
    out["embedding"] = b;
  } else {
    json v = json::array();
    for (size_t i = 0; i + 4 <= blob.size(); i += 4) {
      float f;
      std::memcpy(&f, blob.data() + i, 4);
      v.push_back(f);
    }
    out["embedding"] = std::move(v);
  }
  return out;
}

}  // namespace infer::gateway
