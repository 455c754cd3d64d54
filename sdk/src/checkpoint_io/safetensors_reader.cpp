// SafetensorsFile: maps a safetensors file read-only, validates its header strictly and
// copies whole tensors or row/column ranges of them out of the mapping.
#include "../json_file.h"
#include "large_pages.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/strings.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

namespace shardformer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kHeaderLengthBytes = 8;

[[noreturn]] void fail(const fs::path& path, const std::string& reason) {
  throw CheckpointError(str(path.string(), ": ", reason));
}

[[noreturn]] void fail_tensor(const fs::path& path, const std::string& name,
                              const std::string& reason) {
  throw CheckpointError(str(path.string(), ": tensor '", name, "': ", reason));
}

struct Mapping {
  const std::byte* data = nullptr;
  uint64_t size = 0;
  FileIdentity identity;
};

int64_t mtime_ns(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

FileIdentity identity_of(const struct stat& st) {
  return {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size), mtime_ns(st)};
}

// Maps the whole file copy-on-write (MAP_PRIVATE: in-place tensors may be written, the file
// never is); files shorter than the length prefix fail.
Mapping map_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, str("cannot open the file: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int error = errno;
    ::close(fd);
    fail(path, str("cannot stat the file: ", std::strerror(error)));
  }
  auto size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderLengthBytes) {
    ::close(fd);
    fail(path, str("the file is ", size, " bytes, shorter than the 8-byte header length"));
  }
  // Pages this mapping reads from disk come in 2 MiB folios, mapped with one TLB entry each:
  // decoding reads every weight once per step, and its steps took 0.80x the time of the same
  // weights in 4 KiB pages (docs/benchmarks.md). A file the page cache holds in 4 KiB pages
  // (as it does one just written, e.g. converted) would stay in them, so it is dropped from the
  // cache and mapped again. Only advice: a kernel without transparent huge pages maps 4 KiB.
  const auto map = [&]() {
    void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      fail(path, str("cannot map the file: ", std::strerror(error)));
    }
    ::madvise(data, size, MADV_HUGEPAGE);
    return static_cast<const std::byte*>(data);
  };
  const std::byte* data = map();
  if (detail::drop_if_cached_in_small_pages(fd, data, size, path)) {
    ::munmap(const_cast<std::byte*>(data), size);
    data = map();
  }
  ::close(fd);
  return {data, size, identity_of(st)};
}

uint64_t read_u64_le(const std::byte* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | std::to_integer<uint64_t>(bytes[i]);
  return value;
}

// Parses the header JSON, rejecting duplicate top-level keys (nlohmann keeps the last one).
json parse_header_json(const fs::path& path, std::string_view text) {
  std::set<std::string> names;
  json::parser_callback_t reject_duplicates = [&](int depth, json::parse_event_t event,
                                                  json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !names.insert(parsed.get<std::string>()).second) {
      fail(path, str("duplicate tensor name '", parsed.get<std::string>(), "' in the header"));
    }
    return true;
  };
  json header = detail::parse_json_text(text, path, reject_duplicates);
  if (!header.is_object()) {
    fail(path, str("the header must be a JSON object, found ", detail::describe_json(header)));
  }
  return header;
}

std::map<std::string, std::string> parse_metadata(const fs::path& path, const json& value) {
  bool valid = value.is_object() &&
               std::all_of(value.begin(), value.end(), [](auto& v) { return v.is_string(); });
  if (!valid) {
    fail(path,
         str("'__metadata__' must be an object of strings, found ", detail::describe_json(value)));
  }
  return value.get<std::map<std::string, std::string>>();
}

const json& field(const fs::path& path, const std::string& name, const json& entry,
                  const char* key) {
  auto it = entry.find(key);
  if (it == entry.end()) fail_tensor(path, name, str("missing '", key, "'"));
  return *it;
}

std::vector<int64_t> parse_shape(const fs::path& path, const std::string& name, const json& value) {
  if (!value.is_array()) {
    fail_tensor(path, name,
                str("'shape' must be an array of integers, found ", detail::describe_json(value)));
  }
  std::vector<int64_t> shape;
  for (const json& dim : value) {
    if (!dim.is_number_integer() ||
        (dim.is_number_unsigned() && dim.get<uint64_t>() > uint64_t(INT64_MAX))) {
      fail_tensor(
          path, name,
          str("'shape' must be an array of integers, found ", detail::describe_json(value)));
    }
    if (dim.get<int64_t>() < 0) {
      fail_tensor(path, name,
                  str("negative dimension ", dim.get<int64_t>(), " in shape ",
                      detail::describe_json(value)));
    }
    shape.push_back(dim.get<int64_t>());
  }
  return shape;
}

// Bytes a tensor of this shape and dtype needs. Fails when that overflows 64 bits, or when the
// product of the non-zero dimensions exceeds int64: LibTorch's element counts and strides
// multiply them (in any order) even for a tensor with a zero dimension.
uint64_t byte_size(const fs::path& path, const std::string& name, const std::vector<int64_t>& shape,
                   c10::ScalarType dtype) {
  uint64_t elements = 1;
  bool has_zero = false;
  for (int64_t dim : shape) {
    if (dim == 0) has_zero = true;
    if (dim != 0 && (__builtin_mul_overflow(elements, uint64_t(dim), &elements) ||
                     elements > uint64_t(std::numeric_limits<int64_t>::max()))) {
      fail_tensor(path, name, str("shape ", shape_str(shape), " is too large"));
    }
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, uint64_t(c10::elementSize(dtype)), &bytes)) {
    fail_tensor(path, name, str("shape ", shape_str(shape), " is too large"));
  }
  return has_zero ? 0 : bytes;
}

TensorInfo parse_entry(const fs::path& path, const std::string& name, const json& entry,
                       uint64_t data_size) {
  if (!entry.is_object()) {
    fail_tensor(path, name,
                str("the entry must be an object, found ", detail::describe_json(entry)));
  }
  TensorInfo info;
  info.name = name;
  const json& dtype = field(path, name, entry, "dtype");
  if (!dtype.is_string()) {
    fail_tensor(path, name, str("'dtype' must be a string, found ", detail::describe_json(dtype)));
  }
  info.dtype_name = dtype.get<std::string>();
  auto scalar_type = scalar_type_from_safetensors(info.dtype_name);
  if (!scalar_type && is_packed_safetensors_dtype(info.dtype_name)) {
    fail_tensor(
        path, name,
        str("dtype '", info.dtype_name, "' packs several values per byte and is not supported"));
  }
  if (!scalar_type) fail_tensor(path, name, str("unknown dtype '", info.dtype_name, "'"));
  info.dtype = *scalar_type;
  info.shape = parse_shape(path, name, field(path, name, entry, "shape"));

  const json& offsets = field(path, name, entry, "data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail_tensor(path, name,
                str("'data_offsets' must be two non-negative integers, found ",
                    detail::describe_json(offsets)));
  }
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  if (info.begin > info.end) {
    fail_tensor(path, name, str("data_offsets begin ", info.begin, " > end ", info.end));
  }
  if (info.end > data_size) {
    fail_tensor(path, name,
                str("data_offsets [", info.begin, ", ", info.end,
                    "] lie outside the data section of ", data_size, " bytes"));
  }
  uint64_t expected = byte_size(path, name, info.shape, info.dtype);
  if (expected != info.nbytes()) {
    fail_tensor(path, name,
                str("shape ", shape_str(info.shape), " of dtype ", info.dtype_name, " needs ",
                    expected, " bytes but data_offsets [", info.begin, ", ", info.end, "] span ",
                    info.nbytes(), " bytes"));
  }
  return info;
}

// Fails when two tensors share a byte of the data section (empty tensors share none).
void check_no_overlap(const fs::path& path, const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_begin;
  for (const TensorInfo& info : tensors) {
    if (info.nbytes() > 0) by_begin.push_back(&info);
  }
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const TensorInfo* furthest = nullptr;  // the tensor reaching furthest so far
  for (const TensorInfo* info : by_begin) {
    if (furthest != nullptr && info->begin < furthest->end) {
      fail(path, str("tensors '", furthest->name, "' [", furthest->begin, ", ", furthest->end,
                     ") and '", info->name, "' [", info->begin, ", ", info->end, ") overlap"));
    }
    if (furthest == nullptr || info->end > furthest->end) furthest = info;
  }
}

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;
};

Header parse_header(const fs::path& path, const Mapping& mapping) {
  uint64_t length = read_u64_le(mapping.data);
  if (length > kMaxSafetensorsHeaderBytes) {
    fail(path, str("header length ", length, " exceeds the limit of ", kMaxSafetensorsHeaderBytes,
                   " bytes"));
  }
  if (length > mapping.size - kHeaderLengthBytes) {
    fail(path, str("header length ", length, " exceeds the ", mapping.size - kHeaderLengthBytes,
                   " bytes that follow the length in the file"));
  }
  Header header;
  header.data_offset = kHeaderLengthBytes + length;
  std::string_view text(reinterpret_cast<const char*>(mapping.data) + kHeaderLengthBytes, length);
  json entries = parse_header_json(path, text);
  uint64_t data_size = mapping.size - header.data_offset;
  for (const auto& [name, entry] : entries.items()) {
    if (name == "__metadata__") {
      header.metadata = parse_metadata(path, entry);
    } else {
      header.tensors.push_back(parse_entry(path, name, entry, data_size));
    }
  }
  check_no_overlap(path, header.tensors);
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return header;
}

// Fails unless rows [start, start + length) of dimension `dim` lie inside the tensor.
void check_slice(const fs::path& path, const TensorInfo& tensor, int64_t dim, int64_t start,
                 int64_t length) {
  const auto rank = static_cast<int64_t>(tensor.shape.size());
  if (dim < 0 || dim >= rank) {
    fail_tensor(
        path, tensor.name,
        str("slice dimension ", dim, " is out of range for shape ", shape_str(tensor.shape)));
  }
  if (start < 0 || length < 0 || start > tensor.shape[dim] - length) {
    int64_t end = 0;
    const std::string range = __builtin_add_overflow(start, length, &end)
                                  ? str("[", start, ", ", start, " + ", length, ")")
                                  : str("[", start, ", ", end, ")");
    fail_tensor(path, tensor.name,
                str("slice ", range, " of dimension ", dim, " is out of range for shape ",
                    shape_str(tensor.shape)));
  }
}

}  // namespace

int64_t TensorInfo::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  Mapping mapping = map_file(path);
  mapping_ = mapping.data;
  file_size_ = mapping.size;
  identity_ = mapping.identity;
  try {
    Header header = parse_header(path, mapping);
    tensors_ = std::move(header.tensors);
    metadata_ = std::move(header.metadata);
    data_offset_ = header.data_offset;
  } catch (...) {
    ::munmap(const_cast<std::byte*>(mapping_), file_size_);
    throw;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  const uint64_t size = file_size_;
  keep_mapped_ = std::shared_ptr<void>(const_cast<std::byte*>(mapping_),
                                       [size](void* data) { ::munmap(data, size); });
}

// Drops the mapped pages of bytes already copied out, so a rank's resident memory holds its
// own shard and not the file pages it read it from (they are read again if touched again).
// Only pages wholly inside the range: a neighbour may be an in-place tensor, whose written
// (copied-on-write) pages must never be dropped.
static void release_pages(const std::byte* begin, uint64_t size) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + size) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// Maps the pages of an in-place tensor into the page table now, while the model loads, as
// llama.cpp's MAP_POPULATE does: otherwise the first forward faults them in as it first reads
// them (SmolLM2-135M, tp 1 on a Zen 3: the first token after 86-117 ms with the pages mapped at
// load, which takes 60-90 ms longer, against 119-135 ms). Only advice: a kernel before Linux
// 5.14 lacks MADV_POPULATE_READ, and the pages are mapped on first touch.
static void populate_pages(const std::byte* begin, uint64_t size) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t last = reinterpret_cast<uintptr_t>(begin) + size;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_READ);
}

SafetensorsFile::~SafetensorsFile() = default;

// A file rewritten in place after it was mapped would hand out torn data, or kill the process
// with SIGBUS where it became shorter; one replaced by a rename leaves the mapping intact.
void SafetensorsFile::check_unchanged(const std::string& name) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return;
  const FileIdentity now = identity_of(st);
  if (now.device != identity_.device || now.inode != identity_.inode || now == identity_) return;
  const std::string change = now.size != identity_.size
                                 ? str(identity_.size, " bytes then, ", now.size, " now")
                                 : std::string("modified since, same size");
  fail_tensor(path_, name,
              str("the file changed after it was opened (", change,
                  "): was it rewritten while the job read it?"));
}

bool SafetensorsFile::contains(const std::string& name) const {
  return index_.count(name) > 0 || views_.count(name) > 0;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  if (auto it = index_.find(name); it != index_.end()) return tensors_[it->second];
  auto view = views_.find(name);
  if (view == views_.end()) fail_tensor(path_, name, "no such tensor in the file");
  return view->second;
}

void SafetensorsFile::add_view(const std::string& name, const std::string& source,
                               int64_t first_row, int64_t rows) {
  if (contains(name))
    fail_tensor(path_, name, str("a view of '", source, "' cannot take the name"));
  TensorInfo view = info(source);
  view.name = name;
  if (rows >= 0) {
    if (view.shape.empty())
      fail_tensor(path_, source, str("a scalar has no rows for '", name, "'"));
    const int64_t all = view.shape[0];
    if (first_row < 0 || first_row + rows > all) {
      fail_tensor(path_, source,
                  str("rows [", first_row, ", ", first_row + rows, ") asked for '", name,
                      "' lie outside its ", all, " rows"));
    }
    const uint64_t row_bytes = all > 0 ? view.nbytes() / all : 0;
    view.shape[0] = rows;
    view.begin += static_cast<uint64_t>(first_row) * row_bytes;
    view.end = view.begin + static_cast<uint64_t>(rows) * row_bytes;
  }
  views_.emplace(name, std::move(view));
}

const std::byte* SafetensorsFile::data(const TensorInfo& info) const {
  return mapping_ + data_offset_ + info.begin;
}

at::Tensor SafetensorsFile::read(const std::string& name) const {
  const TensorInfo& tensor = info(name);
  const runtime::OperationScope activity(
      "read_tensor", str("reading tensor '", name, "' of ", path_.filename().string()));
  auto* bytes = const_cast<std::byte*>(data(tensor));
  if (at::Tensor mapped = claim_in_place(tensor, bytes, tensor.nbytes(), tensor.shape);
      mapped.defined()) {
    return mapped;
  }
  check_unchanged(name);
  if (handed_out_in_place(name)) return read_from_file(tensor);  // the mapping may be written
  at::Tensor out = at::empty(tensor.shape, at::TensorOptions().dtype(tensor.dtype));
  if (tensor.nbytes() > 0) std::memcpy(out.data_ptr(), bytes, tensor.nbytes());
  release_pages(bytes, tensor.nbytes());
  return out;
}

at::Tensor SafetensorsFile::read_rows(const std::string& name, int64_t start,
                                      int64_t length) const {
  const TensorInfo& tensor = info(name);
  check_slice(path_, tensor, 0, start, length);
  std::vector<int64_t> shape = tensor.shape;
  shape[0] = length;
  const uint64_t row_bytes = tensor.shape[0] > 0 ? tensor.nbytes() / tensor.shape[0] : 0;
  auto* bytes = const_cast<std::byte*>(data(tensor)) + start * row_bytes;
  {
    const runtime::OperationScope activity(
        "read_tensor", str("reading rows of tensor '", name, "' of ", path_.filename().string()));
    if (at::Tensor mapped = claim_in_place(tensor, bytes, length * row_bytes, shape);
        mapped.defined()) {
      return mapped;
    }
  }
  return read_slice(name, 0, start, length);
}

at::Tensor SafetensorsFile::claim_in_place(const TensorInfo& tensor, std::byte* bytes,
                                           uint64_t size, const std::vector<int64_t>& shape) const {
  if (size == 0 || reinterpret_cast<uintptr_t>(bytes) % c10::elementSize(tensor.dtype) != 0) {
    return {};
  }
  check_unchanged(tensor.name);
  {
    std::lock_guard<std::mutex> lock(in_place_mutex_);
    if (!in_place_.insert(tensor.name).second) return {};
  }
  // When the tensor dies (a family that converted it keeps only its copy), its pages leave the
  // rank's resident memory as those of a copied tensor do.
  std::shared_ptr<void> keep = keep_mapped_;
  populate_pages(bytes, size);
  return at::from_blob(
      bytes, shape, [keep, bytes, size](void*) { release_pages(bytes, size); },
      at::TensorOptions().dtype(tensor.dtype));
}

bool SafetensorsFile::handed_out_in_place(const std::string& name) const {
  std::lock_guard<std::mutex> lock(in_place_mutex_);
  return in_place_.count(name) > 0;
}

at::Tensor SafetensorsFile::read_from_file(const TensorInfo& tensor) const {
  at::Tensor out = at::empty(tensor.shape, at::TensorOptions().dtype(tensor.dtype));
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_tensor(path_, tensor.name, str("cannot open the file: ", std::strerror(errno)));
  struct stat st {};
  const bool same = ::fstat(fd, &st) == 0 && identity_of(st) == identity_;
  if (!same) {
    ::close(fd);
    fail_tensor(path_, tensor.name,
                "the file was replaced after it was opened (was it rewritten while the job read "
                "it?)");
  }
  auto* target = static_cast<char*>(out.data_ptr());
  uint64_t done = 0;
  while (done < tensor.nbytes()) {
    const ssize_t got = ::pread(fd, target + done, tensor.nbytes() - done,
                                static_cast<off_t>(data_offset_ + tensor.begin + done));
    if (got <= 0) {
      const int error = got < 0 ? errno : 0;
      ::close(fd);
      fail_tensor(path_, tensor.name,
                  error != 0 ? str("cannot read the file: ", std::strerror(error))
                             : std::string("the file became shorter while reading it"));
    }
    done += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return out;
}

at::Tensor SafetensorsFile::read_slice(const std::string& name, int64_t dim, int64_t start,
                                       int64_t length) const {
  const TensorInfo& tensor = info(name);
  // Checked before the allocation: an invalid length must not fail (or attempt) it first.
  check_slice(path_, tensor, dim, start, length);
  std::vector<int64_t> shape = tensor.shape;
  shape[dim] = length;
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(tensor.dtype));
  read_slice_into(name, dim, start, length, out);
  return out;
}

void SafetensorsFile::read_slice_into(const std::string& name, int64_t dim, int64_t start,
                                      int64_t length, const at::Tensor& out) const {
  const TensorInfo& tensor = info(name);
  check_slice(path_, tensor, dim, start, length);
  const auto rank = static_cast<int64_t>(tensor.shape.size());
  std::vector<int64_t> shape = tensor.shape;
  shape[dim] = length;
  if (out.sizes().vec() != shape || out.scalar_type() != tensor.dtype || !out.is_contiguous() ||
      !out.device().is_cpu()) {
    fail_tensor(path_, name,
                str("slice destination must be a contiguous CPU ", tensor.dtype_name,
                    " tensor of shape ", shape_str(shape)));
  }
  if (out.numel() == 0) return;
  const runtime::OperationScope activity(
      "read_tensor", str("reading a slice of tensor '", name, "' of ", path_.filename().string()));
  check_unchanged(name);

  // View the tensor as [outer, shape[dim], inner]: copy one block of `length` rows per outer.
  auto product = [&](int64_t from, int64_t to) {
    return std::accumulate(shape.begin() + from, shape.begin() + to, int64_t{1},
                           std::multiplies<>());
  };
  const int64_t outer = product(0, dim);
  const int64_t inner_bytes = product(dim + 1, rank) * int64_t(c10::elementSize(tensor.dtype));
  const int64_t block_bytes = length * inner_bytes;
  const int64_t row_bytes = tensor.shape[dim] * inner_bytes;
  // A tensor handed out in place may have been written through the mapping: read the file.
  const bool in_place = handed_out_in_place(name);
  at::Tensor pristine;
  if (in_place) pristine = read_from_file(tensor);
  const std::byte* source =
      (in_place ? static_cast<const std::byte*>(pristine.data_ptr()) : data(tensor)) +
      start * inner_bytes;
  auto* target = static_cast<std::byte*>(out.data_ptr());
  for (int64_t i = 0; i < outer; ++i) {
    std::memcpy(target + i * block_bytes, source + i * row_bytes, block_bytes);
  }
  if (!in_place) release_pages(data(tensor), tensor.nbytes());
}

}  // namespace shardformer
