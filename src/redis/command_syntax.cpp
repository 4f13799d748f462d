#include "redis/command_syntax.h"

#include <cctype>
#include <deque>
#include <memory>
#include <vector>

namespace infer::redis {
namespace {

// What a parsed item becomes before it is laid out as RedisModuleCommandArg arrays.
struct Node {
  std::string name, token;
  int type = REDISMODULE_ARG_TYPE_STRING;
  int key_spec = -1;
  int flags = 0;
  std::vector<Node> children;
};

// Storage for every tree built: strings and arrays whose addresses Redis keeps.
struct Arena {
  std::deque<std::string> strings;
  std::deque<std::vector<RedisModuleCommandArg>> arrays;
  const char* keep(const std::string& s) { return strings.emplace_back(s).c_str(); }
};
Arena& arena() {
  static Arena* a = new Arena;  // never freed: the module's commands live until the server exits
  return *a;
}

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  std::vector<Node> parse() {
    std::vector<Node> items = sequence();
    skip_space();
    if (at_ < s_.size()) fail("unexpected '" + std::string(1, s_[at_]) + "'");
    return items;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("command syntax, at " + std::to_string(at_) + ": " + why + " in \"" + s_ + "\"");
  }
  void skip_space() {
    while (at_ < s_.size() && s_[at_] == ' ') ++at_;
  }
  bool peek(char c) {
    skip_space();
    return at_ < s_.size() && s_[at_] == c;
  }
  bool ends_sequence() {
    skip_space();
    return at_ >= s_.size() || s_[at_] == ']' || s_[at_] == '}' || s_[at_] == ')' || s_[at_] == '|';
  }

  // Items up to a closing bracket or '|'; a token directly before an argument or group becomes its token.
  std::vector<Node> sequence() {
    std::vector<Node> items;
    while (!ends_sequence()) {
      Node n = item();
      if (n.type == REDISMODULE_ARG_TYPE_PURE_TOKEN && n.flags == 0 && !ends_sequence()) {  // a bare word
        Node next = item();
        if (next.token.empty() && next.type != REDISMODULE_ARG_TYPE_PURE_TOKEN) {
          next.token = n.token;
          if (next.type == REDISMODULE_ARG_TYPE_BLOCK || next.type == REDISMODULE_ARG_TYPE_ONEOF) next.name = lower(n.token);
          items.push_back(std::move(next));
          continue;
        }
        items.push_back(std::move(n));
        items.push_back(std::move(next));
        continue;
      }
      items.push_back(std::move(n));
    }
    return items;
  }

  Node item() {
    Node n = atom();
    if (s_.compare(at_, 3, "...") == 0) {
      at_ += 3;
      // A repeated group with a token repeats the token too (STOP s STOP s); a repeated value does not.
      n.flags |= n.token.empty() || n.type == REDISMODULE_ARG_TYPE_PURE_TOKEN ? REDISMODULE_CMD_ARG_MULTIPLE
                                                                              : REDISMODULE_CMD_ARG_MULTIPLE_TOKEN;
    }
    return n;
  }

  // The items of a bracket as one node: the item itself when alone, else a block.
  static Node group(std::vector<Node> items) {
    if (items.size() == 1) return std::move(items[0]);
    Node b;
    b.type = REDISMODULE_ARG_TYPE_BLOCK;
    for (const Node& i : items)
      if (!i.token.empty()) {
        b.name = lower(i.token);
        break;
      }
    if (b.name.empty()) b.name = items[0].name;
    b.children = std::move(items);
    return b;
  }

  Node atom() {
    skip_space();
    if (at_ >= s_.size()) fail("an item expected");
    const char c = s_[at_];
    if (c == '[' || c == '(') {
      ++at_;
      Node n = group(sequence());
      if (!peek(c == '[' ? ']' : ')')) fail(std::string("'") + (c == '[' ? ']' : ')') + "' expected");
      ++at_;
      if (c == '[') n.flags |= REDISMODULE_CMD_ARG_OPTIONAL;
      return n;
    }
    if (c == '{') {
      ++at_;
      Node n;
      n.type = REDISMODULE_ARG_TYPE_ONEOF;
      do {
        if (peek('|')) ++at_;
        n.children.push_back(group(sequence()));
      } while (peek('|'));
      if (!peek('}')) fail("'}' expected");
      ++at_;
      n.name = n.children[0].token.empty() ? n.children[0].name : lower(n.children[0].token);
      return n;
    }
    const size_t start = at_;
    while (at_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '-' || s_[at_] == '_' ||
                               s_[at_] == ':' || s_[at_] == '@'))
      ++at_;
    if (at_ == start) fail("unexpected '" + std::string(1, c) + "'");
    const std::string word = s_.substr(start, at_ - start);
    Node n;
    const size_t colon = word.find(':');
    if (colon == std::string::npos) {
      for (char ch : word)
        if (std::islower(static_cast<unsigned char>(ch))) fail("'" + word + "': a token is upper case, an argument name:type");
      n.type = REDISMODULE_ARG_TYPE_PURE_TOKEN;
      n.token = word;
      n.name = lower(word);
      return n;
    }
    n.name = word.substr(0, colon);
    const std::string type = word.substr(colon + 1);
    if (type == "string") n.type = REDISMODULE_ARG_TYPE_STRING;
    else if (type == "integer") n.type = REDISMODULE_ARG_TYPE_INTEGER;
    else if (type == "double") n.type = REDISMODULE_ARG_TYPE_DOUBLE;
    else if (type.rfind("key@", 0) == 0 && type.size() > 4 && std::isdigit(static_cast<unsigned char>(type[4]))) {
      n.type = REDISMODULE_ARG_TYPE_KEY;
      n.key_spec = std::stoi(type.substr(4));
    } else {
      fail("unknown type '" + type + "'");
    }
    return n;
  }

  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  const std::string& s_;
  size_t at_ = 0;
};

RedisModuleCommandArg* lay_out(const std::vector<Node>& nodes) {
  if (nodes.empty()) return nullptr;
  Arena& a = arena();
  std::vector<RedisModuleCommandArg>& out = a.arrays.emplace_back(nodes.size() + 1);  // zeroed terminator
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    RedisModuleCommandArg& arg = out[i];
    arg.name = a.keep(n.name);
    arg.type = n.type;
    arg.key_spec_index = n.key_spec;
    arg.token = n.token.empty() ? nullptr : a.keep(n.token);
    arg.flags = n.flags;
    arg.subargs = lay_out(n.children);
  }
  return out.data();
}

}  // namespace

RedisModuleCommandArg* parse_command_syntax(const std::string& syntax) {
  return lay_out(Parser(syntax).parse());
}

}  // namespace infer::redis
