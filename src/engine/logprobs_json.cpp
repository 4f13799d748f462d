#include "engine/logprobs_json.h"

namespace infer::engine {
namespace {

nlohmann::ordered_json token_json(int32_t id, const std::string& piece, float logprob) {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["token"] = piece;
  auto bytes = nlohmann::ordered_json::array();
  for (char c : piece) bytes.push_back(static_cast<unsigned char>(c));
  j["bytes"] = std::move(bytes);
  j["logprob"] = logprob;
  return j;
}

}  // namespace

nlohmann::ordered_json logprobs_json(const TokenLogprobs& e) {
  nlohmann::ordered_json j = token_json(e.id, e.piece, e.logprob);
  auto top = nlohmann::ordered_json::array();
  for (const TokenAlternative& a : e.top) top.push_back(token_json(a.id, a.piece, a.logprob));
  j["top_logprobs"] = std::move(top);
  return j;
}

std::string dump_logprobs_json(const TokenLogprobs& e) {
  return logprobs_json(e).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace infer::engine
