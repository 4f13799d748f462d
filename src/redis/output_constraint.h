// FORMAT json / JSONSCHEMA / GRAMMAR turned into the grammar an engine request is decoded under.
// Background threads only: parsing a schema or grammar grows with its text (up to kMaxConstraintBytes).
#pragma once
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "redis/generation_job.h"
#include "redis/models.h"

namespace infer::redis {

// Compiles `text` (unused for FORMAT json) for the model's vocabulary into req. Returns "" or the error
// to reply, naming the option and the position or keyword at fault.
std::string constrain_request(const LoadedModel& m, OutputConstraint kind, std::string_view text,
                              engine::Request& req);

}  // namespace infer::redis
