// The tools both tool-call grammar suites offer: one with a parameter schema, one without.
#pragma once
#include <nlohmann/json.hpp>

namespace infer::chat {

inline nlohmann::ordered_json weather_tools() {
  return nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
       "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}}
  ])");
}

}  // namespace infer::chat
