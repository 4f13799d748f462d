// The JSON form of per-token log-probabilities, shared by `infer generate --json` and the entries of
// a Redis STREAM: OpenAI's shape, {"id", "token", "bytes", "logprob", "top_logprobs": [{"id", "token",
// "bytes", "logprob"}, ...]}. "token" is the piece as text (bytes that are not valid UTF-8 on their own,
// a character split across tokens, become U+FFFD when dumped with error_handler_t::replace); "bytes"
// holds the piece's exact bytes. A logprob of -inf is dumped as null.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace infer::engine {

// As a JSON value (its keys sorted, as nlohmann::json keeps them).
nlohmann::json logprobs_json(const TokenLogprobs& e);

// One entry as compact JSON, keys in the order above, invalid UTF-8 replaced (see above).
std::string dump_logprobs_json(const TokenLogprobs& e);

}  // namespace infer::engine
