#include "engine/logprobs_json.h"

namespace infer::engine {
namespace {

template <class Json>
Json token_json(int32_t id, const std::string& piece, float logprob) {
  Json j;
  j["id"] = id;
  j["token"] = piece;
  auto bytes = Json::array();
  for (char c : piece) bytes.push_back(static_cast<unsigned char>(c));
  j["bytes"] = std::move(bytes);
  j["logprob"] = logprob;
  return j;
}

template <class Json>
Json entry_json(const TokenLogprobs& e) {
  Json j = token_json<Json>(e.id, e.piece, e.logprob);
  auto top = Json::array();
  for (const TokenAlternative& a : e.top) top.push_back(token_json<Json>(a.id, a.piece, a.logprob));
  j["top_logprobs"] = std::move(top);
  return j;
}

}  // namespace

nlohmann::json logprobs_json(const TokenLogprobs& e) { return entry_json<nlohmann::json>(e); }

std::string dump_logprobs_json(const TokenLogprobs& e) {
  return entry_json<nlohmann::ordered_json>(e).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace infer::engine
