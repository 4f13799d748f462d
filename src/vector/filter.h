// FILTER expressions of VSIM, evaluated against an element's JSON attributes (grammar as Redis 8 vector
// sets): `.field` reads a top-level attribute; literals are numbers, "strings" / 'strings', true/false
// (1/0) and [arrays]; operators by increasing precedence:
//   or ||  <  and &&  <  == != < <= > >= in  <  + -  <  * / %  <  ** (right-assoc)  <  unary not ! -
// `x in [a, b]` tests membership, `"sub" in .text` a substring. JSON booleans become 1/0.
// An element whose attributes are missing, not a JSON object, lack a referenced field, or give operands
// of the wrong type does not match; it is never an error. Inside `and`/`or` such an operand counts as
// false, so `.a == 1 or .b == 2` still matches an element that has only `b`.
//
// Limits (parse() refuses beyond them, naming the limit): at most kFilterMaxNodes operands and operators
// (literals, fields, array items and operators each count one; this bounds the work per element) and a
// tree at most kFilterMaxDepth levels deep (each bracket, unary operator, ** and each operator of a
// left-associative chain other than and/or adds a level; a whole and/or chain adds one). Attribute
// values nested deeper than kFilterMaxDepth do not match.
//
// Thread-safety: a parsed Filter is immutable; matches() may run concurrently.
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace infer::vector {

inline constexpr size_t kFilterMaxNodes = 4096;
inline constexpr int kFilterMaxDepth = 200;

// A malformed expression; what() names the problem and its byte offset.
struct FilterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Filter {
 public:
  // Throws FilterError.
  static Filter parse(std::string_view expr);
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;
  ~Filter();

  // Parses `json_attrs` (empty: no attributes) and evaluates; invalid JSON does not match.
  bool matches(std::string_view json_attrs) const;
  bool matches_parsed(const nlohmann::json& attrs) const;

  struct Node;

 private:
  explicit Filter(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
};

}  // namespace infer::vector
