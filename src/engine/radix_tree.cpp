#include "engine/radix_tree.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace infer::engine {

RadixTree::RadixTree(PageAllocator& pages, int page_tokens)
    : alloc_(pages), page_tokens_(page_tokens), root_(std::make_unique<Node>()) {
  if (page_tokens <= 0) throw std::invalid_argument("RadixTree: page_tokens must be positive");
}

RadixTree::~RadixTree() {
  // Iterative walk: a long chain of nodes must not overflow the stack.
  std::vector<Node*> todo{root_.get()};
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    alloc_.release_all(n->pages);
    for (auto& [key, child] : n->children) todo.push_back(child.get());
  }
}

namespace {
bool same_page(const int32_t* a, const int32_t* b, int page_tokens) {
  return std::equal(a, a + page_tokens, b);
}
}  // namespace

RadixTree::Match RadixTree::match(std::span<const int32_t> tokens, int max_pages) {
  Match m;
  const size_t P = size_t(page_tokens_);
  ++clock_;
  Node* n = root_.get();
  int n_pages = 0;
  size_t pos = 0;
  while (n_pages < max_pages && pos + P <= tokens.size()) {
    auto it = n->children.find(Key(tokens.begin() + pos, tokens.begin() + pos + P));
    if (it == n->children.end()) break;
    Node* child = it->second.get();
    size_t k = 1;  // the key matched the first page
    while (k < child->pages.size() && n_pages + int(k) < max_pages && pos + (k + 1) * P <= tokens.size() &&
           same_page(child->tokens.data() + k * P, tokens.data() + pos + k * P, page_tokens_))
      ++k;
    if (k < child->pages.size()) child = split(child, int(k));
    for (int32_t p : child->pages) {
      alloc_.retain(p);
      m.pages.push_back(p);
    }
    child->last_use = clock_;
    pos += k * P;
    n_pages += int(k);
    n = child;
  }
  if (n != root_.get()) {
    lock_path(n, +1);
    m.node = n;
  }
  m.n_tokens_ = int(pos);
  return m;
}

void RadixTree::unlock(Node* node) {
  if (node) lock_path(node, -1);
}

void RadixTree::lock_path(Node* node, int delta) {
  for (Node* x = node; x && x != root_.get(); x = x->parent) {
    if (delta > 0 && x->lock_ref == 0) evictable_pages_ -= int(x->pages.size());
    x->lock_ref += delta;
    if (x->lock_ref < 0) throw std::logic_error("RadixTree: unlock of an unlocked node");
    if (delta < 0 && x->lock_ref == 0) evictable_pages_ += int(x->pages.size());
  }
}

RadixTree::Node* RadixTree::split(Node* node, int n_pages) {
  const size_t cut = size_t(n_pages) * size_t(page_tokens_);
  Node* parent = node->parent;
  Key key(node->tokens.begin(), node->tokens.begin() + page_tokens_);
  std::unique_ptr<Node> tail = std::move(parent->children[key]);

  auto head = std::make_unique<Node>();
  head->parent = parent;
  head->tokens.assign(tail->tokens.begin(), tail->tokens.begin() + std::ptrdiff_t(cut));
  head->pages.assign(tail->pages.begin(), tail->pages.begin() + n_pages);
  head->lock_ref = tail->lock_ref;  // every lock through the tail passes through the head
  head->last_use = tail->last_use;

  tail->tokens.erase(tail->tokens.begin(), tail->tokens.begin() + std::ptrdiff_t(cut));
  tail->pages.erase(tail->pages.begin(), tail->pages.begin() + n_pages);
  tail->parent = head.get();
  Key tail_key(tail->tokens.begin(), tail->tokens.begin() + page_tokens_);
  head->children[tail_key] = std::move(tail);

  Node* h = head.get();
  parent->children[key] = std::move(head);
  return h;
}

void RadixTree::insert(std::span<const int32_t> tokens, std::span<const int32_t> pages) {
  const size_t P = size_t(page_tokens_);
  const size_t total = pages.size();
  if (tokens.size() < total * P) throw std::invalid_argument("RadixTree::insert: fewer tokens than pages cover");
  ++clock_;
  Node* n = root_.get();
  size_t i = 0;
  while (i < total) {
    auto it = n->children.find(Key(tokens.begin() + i * P, tokens.begin() + (i + 1) * P));
    if (it == n->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->parent = n;
      leaf->tokens.assign(tokens.begin() + i * P, tokens.begin() + total * P);
      leaf->pages.assign(pages.begin() + i, pages.end());
      for (int32_t p : leaf->pages) alloc_.retain(p);
      leaf->last_use = clock_;
      cached_pages_ += int(leaf->pages.size());
      evictable_pages_ += int(leaf->pages.size());
      Key key(leaf->tokens.begin(), leaf->tokens.begin() + page_tokens_);
      n->children[key] = std::move(leaf);
      return;
    }
    Node* child = it->second.get();
    size_t k = 1;
    while (k < child->pages.size() && i + k < total &&
           same_page(child->tokens.data() + k * P, tokens.data() + (i + k) * P, page_tokens_))
      ++k;
    if (k < child->pages.size()) child = split(child, int(k));
    child->last_use = clock_;
    i += k;
    n = child;
  }
}

RadixTree::Node* RadixTree::lru_leaf() const {
  Node* best = nullptr;
  std::vector<Node*> todo{root_.get()};
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    if (n != root_.get() && n->children.empty() && n->lock_ref == 0 && (!best || n->last_use < best->last_use))
      best = n;
    for (auto& [key, child] : n->children) todo.push_back(child.get());
  }
  return best;
}

void RadixTree::trim_leaf(Node* leaf, int n_pages) {
  for (int i = 0; i < n_pages && !leaf->pages.empty(); ++i) {
    alloc_.release(leaf->pages.back());
    leaf->pages.pop_back();
    leaf->tokens.resize(leaf->pages.size() * size_t(page_tokens_));
    --cached_pages_;
    --evictable_pages_;
    ++evicted_pages_;
  }
  if (leaf->pages.empty()) {
    // The key was the first page, which is gone; find the entry by identity.
    auto& siblings = leaf->parent->children;
    for (auto it = siblings.begin(); it != siblings.end(); ++it)
      if (it->second.get() == leaf) {
        siblings.erase(it);
        break;
      }
  }
}

int RadixTree::evict(int n_pages) {
  int released = 0;
  while (released < n_pages) {
    Node* leaf = lru_leaf();
    if (!leaf) break;
    int take = std::min(n_pages - released, int(leaf->pages.size()));
    trim_leaf(leaf, take);
    released += take;
  }
  return released;
}

void RadixTree::flush() { evict(INT_MAX); }

}  // namespace infer::engine
