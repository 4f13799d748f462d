// Metadata values: type names and the checked conversions of gguf::Value.
#include <limits>
#include <string>

#include "gguf/file.h"

namespace infer::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "INVALID";
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* wanted) {
  throw Error(std::string("metadata value of type ") + std::string(value_type_name(v.type)) + " is not " + wanted);
}
}  // namespace

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool Value::is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

int64_t Value::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error("metadata value " + std::to_string(*u) + " does not fit in int64");
    }
    return static_cast<int64_t>(*u);
  }
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  wrong_kind(*this, "an integer");
}

uint64_t Value::as_uint() const {
  if (auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (auto* i = std::get_if<int64_t>(&data)) {
    if (*i < 0) throw Error("metadata value " + std::to_string(*i) + " is negative where unsigned is required");
    return static_cast<uint64_t>(*i);
  }
  wrong_kind(*this, "an integer");
}

double Value::as_float() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  wrong_kind(*this, "a number");
}

bool Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&data)) return *b;
  wrong_kind(*this, "a bool");
}

const std::string& Value::as_string() const {
  if (auto* s = std::get_if<std::string>(&data)) return *s;
  wrong_kind(*this, "a string");
}

const std::vector<Value>& Value::as_array() const {
  if (auto* a = std::get_if<std::vector<Value>>(&data)) return *a;
  wrong_kind(*this, "an array");
}

}  // namespace infer::gguf
