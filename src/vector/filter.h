// FILTER expressions of VSIM, evaluated against an element's JSON attributes (grammar as Redis 8 vector
// sets): `.field` reads a top-level attribute; literals are numbers, "strings" / 'strings', true/false
// (1/0) and [arrays]; operators by increasing precedence:
//   or ||  <  and &&  <  == != < <= > >= in  <  + -  <  * / %  <  ** (right-assoc)  <  unary not ! -
// `x in [a, b]` tests membership, `"sub" in .text` a substring (in linear time: glibc's two-way memmem).
// JSON booleans become 1/0. String literals take JSON's escapes (\" \\ \/ \b \f \n \r \t \uXXXX, a
// surrogate pair giving one UTF-8 character) and \' in either quote style; any other escape is an error.
// An element whose attributes are missing, not a JSON object, lack a referenced field, or give operands
// of the wrong type does not match; it is never an error. Inside `and`/`or` such an operand counts as
// false, so `.a == 1 or .b == 2` still matches an element that has only `b`.
//
// Limits (parse() refuses beyond them, naming the limit): at most kFilterMaxNodes operands and operators
// (literals, fields, array items and operators each count one; this bounds the work per element) and a
// tree at most kFilterMaxDepth levels deep (each bracket, unary operator, ** and each operator of a
// left-associative chain other than and/or adds a level; a whole and/or chain adds one). Attribute
// values nested deeper than kFilterMaxDepth do not match. An expression is at most kFilterMaxBytes long:
// it is parsed on Redis's main thread (MainThreadBudget.VsimFilterOfLongStringsOverLongAttributes).
//
// Work: evaluating over many elements is charged to a FilterBudget (attribute bytes parsed, operand bytes
// compared, nodes visited, in work units); past its limit matches() throws FilterLimitError, so a search
// with a filter has a bounded cost whatever the operands. estimate_units() predicts the charge per element.
//
// Thread-safety: a parsed Filter is immutable; matches() may run concurrently (each with its own budget).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace infer::vector {

inline constexpr size_t kFilterMaxNodes = 4096;
inline constexpr int kFilterMaxDepth = 200;
inline constexpr size_t kFilterMaxBytes = size_t{1} << 20;

// A malformed expression; what() names the problem and its byte offset.
struct FilterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The evaluation work of one search went past its budget.
struct FilterLimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Work units a search's filter evaluations may use: about half a nanosecond each (measured on x86-64).
// A byte compared costs one, a byte of substring search kFilterSearchByteUnits (glibc's memmem is linear
// but takes up to ~4 ns a byte on repetitive text), an attribute byte parsed kFilterJsonByteUnits, a
// node evaluated kFilterNodeUnits.
inline constexpr uint64_t kFilterSearchByteUnits = 8;
inline constexpr uint64_t kFilterJsonByteUnits = 16;
inline constexpr uint64_t kFilterNodeUnits = 16;

class FilterBudget {
 public:
  explicit FilterBudget(uint64_t limit) : limit_(limit) {}
  // Throws FilterLimitError when the total passes the limit (before the work is done).
  void charge(uint64_t units) {
    used_ += units;
    if (used_ > limit_) throw FilterLimitError("FILTER work limit exceeded: more than " + std::to_string(limit_) +
                                               " units (attribute and operand bytes over the elements inspected)");
  }
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
};

class Filter {
 public:
  // Throws FilterError.
  static Filter parse(std::string_view expr);
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;
  ~Filter();

  // Parses `json_attrs` (empty: no attributes) and evaluates; invalid JSON does not match. With a
  // budget, the work is charged to it (throws FilterLimitError past its limit).
  bool matches(std::string_view json_attrs, FilterBudget* budget = nullptr) const;
  bool matches_parsed(const nlohmann::json& attrs, FilterBudget* budget = nullptr) const;
  // Units matches() is expected to charge for one element whose attributes are `attr_bytes` long: its
  // parse, every node, each literal and each field's value searched once.
  uint64_t estimate_units(uint64_t attr_bytes) const;

  struct Node;

 private:
  explicit Filter(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
  uint64_t nodes_ = 0, fields_ = 0, literal_bytes_ = 0;
};

}  // namespace infer::vector
