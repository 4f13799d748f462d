// Jinja2's filters, tests and globals, and the Python methods of str, dict and list that templates call,
// under the immutable sandbox (methods that would mutate a list or dict are refused).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace infer::chat::jinja {

class Interpreter;

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);

// Whether `obj.name` is a Python method of a str, dict or list (a bound method, called by call_method).
bool is_method(const Value& obj, std::string_view name);
// Whether the immutable sandbox refuses `obj.name` (list.append, dict.update, ...).
bool is_unsafe_method(const Value& obj, std::string_view name);
Value call_method(Interpreter& in, const Value& obj, const std::string& name, const CallArgs& args);

// range, dict, namespace, raise_exception, strftime_now.
std::vector<std::pair<std::string, Value>> make_globals();

// Python's str methods used by filters too.
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const Value& sep, std::int64_t maxsplit);
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);

}  // namespace infer::chat::jinja
