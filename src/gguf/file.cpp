// gguf::File: opening (mapped or copied, read with pread), metadata/tensor lookup and page control.
// Parsing is in reader.cpp.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/file.h"

namespace infer::gguf {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes the descriptor on every path out of open(); the mapping keeps the file alive.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

constexpr uint64_t kHugePage = 2u << 20;
// First prefix read to parse a mapped file's header; it grows until the tensor table fits.
constexpr uint64_t kFirstHeaderRead = 1u << 20;

// Reads bytes [offset, offset + n) with pread, so that a file shorter than its stat said is an error
// (through a mapping it would be SIGBUS).
void read_exactly(int fd, uint8_t* dst, uint64_t n, uint64_t offset, const std::string& path) {
  for (uint64_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;  // a signal arrived before any byte was read
    if (got <= 0) {
      throw Error(path + ": cannot read: " +
                  (got == 0 ? "the file shrank while being read (replace model files by rename)" : errno_text()));
    }
    done += static_cast<uint64_t>(got);
  }
}

// Anonymous memory rounded up to whole 2 MiB pages, advised for THP, filled from the file, then made
// read-only. The mapping is over-allocated by one huge page so that it can start on a 2 MiB boundary
// (THP only backs aligned 2 MiB ranges); the unused head and tail are unmapped again.
uint8_t* copy_into_huge_pages(int fd, uint64_t size, uint64_t& mapped, const std::string& path) {
  mapped = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = ::mmap(nullptr, mapped + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw Error(path + ": cannot allocate " + std::to_string(size) + " bytes: " + errno_text());
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const uintptr_t tail = start + mapped + kHugePage - (aligned + mapped)) {
    ::munmap(reinterpret_cast<void*>(aligned + mapped), tail);
  }
  auto* base = reinterpret_cast<uint8_t*>(aligned);
  ::madvise(base, mapped, MADV_HUGEPAGE);  // advice only: without THP this is plain memory
  try {
    read_exactly(fd, base, size, 0, path);
  } catch (...) {
    ::munmap(base, mapped);
    throw;
  }
  ::mprotect(base, mapped, PROT_READ);
  return base;
}

// Refuses a file whose size or modification time moved since `before`: it was rewritten (e.g. cp over
// it) while being read, and what was read may mix its old and new contents.
void check_unchanged(int fd, const struct stat& before, const std::string& path) {
  struct stat now {};
  if (::fstat(fd, &now) != 0) throw Error(path + ": cannot stat: " + errno_text());
  if (now.st_size != before.st_size || now.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
    throw Error(path + ": the file changed while being read (size " + std::to_string(before.st_size) + " -> " +
                std::to_string(now.st_size) + "); replace model files by rename, then load again");
  }
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path, const OpenOptions& opts) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it is refused below as not regular.
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) throw Error(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw Error(path + ": cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
  if (st.st_size == 0) throw Error(path + ": empty file, not a GGUF file");
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (opts.after_size_known) opts.after_size_known();
  if (opts.huge_page_copy) {
    f->base_ = copy_into_huge_pages(fd.fd, f->size_, f->mapped_size_, path);
    f->copied_ = true;
    f->owns_mapping_ = true;
    f->parse(f->base_, f->size_);  // on throw, ~File unmaps
  } else {
    const int flags = MAP_PRIVATE | (opts.populate ? MAP_POPULATE : 0);
    void* p = ::mmap(nullptr, f->size_, PROT_READ, flags, fd.fd, 0);
    if (p == MAP_FAILED) throw Error(path + ": cannot map " + std::to_string(f->size_) + " bytes: " + errno_text());
    f->base_ = static_cast<const uint8_t*>(p);
    f->mapped_size_ = f->size_;
    f->owns_mapping_ = true;
    f->parse_from_descriptor(fd.fd);  // not through the mapping: a shrunken file is an error, not SIGBUS
  }
  check_unchanged(fd.fd, st, path);
  if (opts.lock_in_memory) f->locked_ = ::mlock(f->base_, f->size_) == 0;  // best effort: see locked()
  return f;
}

void File::parse_from_descriptor(int fd) {
  std::vector<uint8_t> head(std::min(size_, kFirstHeaderRead));
  read_exactly(fd, head.data(), head.size(), 0, path_);
  for (uint64_t need = parse(head.data(), head.size()); need != 0; need = parse(head.data(), head.size())) {
    const uint64_t had = head.size();
    head.resize(std::min(size_, std::max(need, 2 * had)));  // need <= size_: the parser checked it
    read_exactly(fd, head.data() + had, head.size() - had, had, path_);
  }
}

std::unique_ptr<File> File::from_memory(const uint8_t* bytes, size_t size) {
  std::unique_ptr<File> f(new File());
  f->path_ = "<memory>";
  f->base_ = bytes;
  f->size_ = size;
  f->parse(bytes, size);
  return f;
}

File::~File() {
  if (owns_mapping_ && base_) {
    if (locked_) ::munlock(base_, size_);
    ::munmap(const_cast<uint8_t*>(base_), mapped_size_);
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorView* File::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (!v) throw Error(f.path() + ": missing metadata key " + std::string(key));
  return *v;
}

// Runs a conversion, naming the key when it fails.
template <typename F>
auto convert(const File& f, std::string_view key, const Value& v, F&& fn) {
  try {
    return fn(v);
  } catch (const Error& e) {
    throw Error(f.path() + ": key " + std::string(key) + ": " + e.what());
  }
}

}  // namespace

std::string File::get_string(std::string_view key) const {
  return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_string(); });
}
std::string File::get_string(std::string_view key, std::string_view fallback) const {
  const Value* v = find(key);
  if (!v) return std::string(fallback);
  return convert(*this, key, *v, [](const Value& x) { return x.as_string(); });
}
int64_t File::get_int(std::string_view key) const {
  return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_int(); });
}
int64_t File::get_int(std::string_view key, int64_t fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  return convert(*this, key, *v, [](const Value& x) { return x.as_int(); });
}
double File::get_float(std::string_view key) const {
  return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_float(); });
}
double File::get_float(std::string_view key, double fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  return convert(*this, key, *v, [](const Value& x) { return x.as_float(); });
}
bool File::get_bool(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  return convert(*this, key, *v, [](const Value& x) { return x.as_bool(); });
}

void File::rewrite(const std::vector<std::string>& names,
                   const std::function<void(const TensorView&, uint8_t* bytes)>& edit) {
  if (!copied_) throw Error(path_ + ": tensors can be rewritten only in a copy, not in a mapping");
  std::vector<const TensorView*> views;
  for (const std::string& name : names) {
    const TensorView* t = tensor(name);
    if (!t) throw Error(path_ + ": no tensor " + name + " to rewrite");
    views.push_back(t);
  }
  // The whole copy at once: changing part of a 2 MiB page's protection would split it.
  auto* base = const_cast<uint8_t*>(base_);
  ::mprotect(base, mapped_size_, PROT_READ | PROT_WRITE);
  struct Seal {
    uint8_t* base;
    uint64_t size;
    ~Seal() { ::mprotect(base, size, PROT_READ); }
  } seal{base, mapped_size_};
  for (const TensorView* t : views) edit(*t, base + (t->data - base_));
}

void File::prefetch() const {
  if (owns_mapping_ && !copied_) ::madvise(const_cast<uint8_t*>(base_), size_, MADV_WILLNEED);
}

void File::release() const {
  // Locked pages cannot be dropped; the mapping is file-backed and private but never written, so
  // dropped pages fault back in from the file. A copy has no file behind it: dropping would zero it.
  if (owns_mapping_ && !copied_ && !locked_) ::madvise(const_cast<uint8_t*>(base_), size_, MADV_DONTNEED);
}

}  // namespace infer::gguf
