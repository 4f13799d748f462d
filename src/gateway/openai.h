// OpenAI's HTTP API in terms of the module's commands: request bodies to INFER.GENERATE / INFER.EMBED
// arguments, the module's RESP2 replies to OpenAI's response objects, the module's errors to OpenAI's
// error object and HTTP status. Pure functions: no sockets here (gateway.cpp does the I/O).
#pragma once
#include <hiredis/hiredis.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace infer::gateway {

using nlohmann::json;

// A request the gateway answers with OpenAI's error object: {"error": {message, type, param, code}}.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

json error_body(const ApiError& e);
// The module's error reply (e.g. "BUSY queue full ...", "ERR unknown model 'x' ...") as an ApiError:
// BUSY 429, unknown model 404, NOPERM 403, WRONGPASS/NOAUTH 401, TIMEOUT 504, anything else 400.
ApiError module_error(const std::string& reply_text);

// One generation request: the INFER.GENERATE arguments (WITHSTATS always, no STREAM: the gateway adds
// `STREAM key` for streamed requests) and how to answer.
struct GenerationCall {
  std::string model;
  std::vector<std::string> argv;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool logprobs = false;
  bool may_call_tools = false;  // tools offered and tool_choice not "none": streamed text is held back
};

// The `X-Infer-Cache: key[; threshold=0.95][; ttl=3600][; sampled]` header as the module's CACHE
// arguments (empty for an empty header); throws ApiError (400) for a malformed one.
std::vector<std::string> cache_arguments(const std::string& header);

// Throws ApiError (400, naming the field) for a body OpenAI would refuse or this gateway cannot serve.
GenerationCall chat_call(const json& body);
GenerationCall completion_call(const json& body);

// What INFER.GENERATE ... WITHSTATS replied (RESP2 key/value array).
struct Generation {
  std::string text;
  std::string finish;  // the module's reason: length, stop, tool_calls, deadline, cancelled, ...
  long long prompt_tokens = 0;
  long long completion_tokens = 0;
  json tool_calls = json::array();  // OpenAI's shape: [{id, type, function: {name, arguments}}]
  json logprobs;                    // OpenAI's chat shape: [{token, logprob, bytes, top_logprobs}], or null
  std::optional<bool> cached;       // with CACHE: whether the semantic cache answered
  double cache_similarity = 0;      // on a hit
};
// Throws ApiError (502) when the reply is not the shape the module documents.
Generation parse_generation(const redisReply* r);

// OpenAI's finish_reason for the module's: stop, length, tool_calls (deadline is length; cancelled,
// shutdown and failover are stop).
std::string finish_reason(const std::string& module_finish);

json usage(long long prompt_tokens, long long completion_tokens);
json chat_completion(const std::string& id, const std::string& model, long long created, const Generation& g);
json text_completion(const std::string& id, const std::string& model, long long created, const Generation& g);
// A chat.completion.chunk with one choice (delta, finish_reason or null, logprobs content or null), or
// with no choice and `usage` when `usage` is given.
json chat_chunk(const std::string& id, const std::string& model, long long created, const json& delta,
                const std::optional<std::string>& finish, const json& logprobs = nullptr,
                const json& usage = nullptr);
json text_chunk(const std::string& id, const std::string& model, long long created, const std::string& text,
                const std::optional<std::string>& finish, const json& usage = nullptr);
// A stream entry's `logprobs` field (the module's JSON array) in OpenAI's chat shape.
json stream_logprobs(const std::string& module_json);

// The embeddings request's texts (a string or a list of strings) and encoding (float or base64).
struct EmbeddingCall {
  std::string model;
  std::vector<std::string> inputs;
  bool base64 = false;
};
EmbeddingCall embedding_call(const json& body);
// One embedding object from the module's FP32 blob.
json embedding_object(size_t index, const std::string& fp32_blob, bool base64);

// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump(const json& j);

}  // namespace infer::gateway
