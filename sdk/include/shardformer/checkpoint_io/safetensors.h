// Reading and writing safetensors files. Reading maps the file and validates its header
// strictly; a tensor, or a contiguous range of its rows or columns, is read without
// materialising the rest of the tensor.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace shardformer {

// One tensor entry of a safetensors header.
struct TensorInfo {
  std::string name;
  std::string dtype_name;  // as written in the file: "F32", "BF16", ...
  c10::ScalarType dtype;   // its LibTorch type
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
  uint64_t end = 0;

  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// What identifies the contents of a file on disk: a rewrite changes its size or modification
// time, a replacement its inode.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  bool operator==(const FileIdentity&) const = default;
};

// Largest header accepted (the format's reference implementation uses 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1024 * 1024;

// A safetensors file mapped copy-on-write (the file itself is never written). Construction
// validates the whole header: length within the file and under kMaxSafetensorsHeaderBytes, valid
// JSON, known dtypes, shapes whose byte size equals the offsets' range, offsets inside the data
// section, no overlaps, no duplicate names. Every failure throws CheckpointError naming the file
// and the tensor. A read refuses a file rewritten in place since it was mapped (its size or
// modification time changed); a tensor already handed out in place is not protected from that.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Entries sorted by name (the file's own: no views).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  // Throws CheckpointError naming the file when the tensor is absent.
  const TensorInfo& info(const std::string& name) const;

  // Makes rows [first_row, first_row + rows) of tensor `source` (all of it when rows < 0)
  // readable as a tensor `name` of their own, from the same bytes: every read below serves it.
  // Throws CheckpointError naming the file for an absent source, rows outside it, or a name
  // taken. Views of one tensor must not overlap (Checkpoint::add_views checks): each is handed
  // out in place once, as a tensor is.
  void add_view(const std::string& name, const std::string& source, int64_t first_row,
                int64_t rows);

  // The whole tensor (CPU, the file's dtype, contiguous). The first read of a tensor whose
  // bytes are aligned for its dtype uses the mapping in place: no copy and no page zeroing,
  // its pages are the page cache's until written (then copied, page by page, for this process
  // only), and the mapping lives as long as any such tensor. Later reads of the same tensor
  // are copies read from the file, so two reads never alias and never see each other's writes.
  at::Tensor read(const std::string& name) const;
  // Rows [start, start + length) of dimension 0 (a tensor-parallel rank's block), in place from
  // the mapping as read() gives the whole tensor: the first read of the tensor when the block is
  // aligned for its dtype; a copy otherwise.
  at::Tensor read_rows(const std::string& name, int64_t start, int64_t length) const;

  // Rows [start, start + length) of dimension `dim` of the tensor, copied out of the mapping.
  // Only the bytes of that range are touched: for dim 0 one contiguous block; for another
  // dim one strided block per outer index. Throws CheckpointError on an out-of-range request.
  at::Tensor read_slice(const std::string& name, int64_t dim, int64_t start, int64_t length) const;
  // The same slice written into `out`, a contiguous CPU tensor of the slice's shape and the
  // file's dtype (e.g. a dim-0 narrow of a larger buffer), so no temporary copy is made.
  void read_slice_into(const std::string& name, int64_t dim, int64_t start, int64_t length,
                       const at::Tensor& out) const;

  // Bytes of the tensor's data (zero-copy view into the mapping, valid while this lives).
  const std::byte* data(const TensorInfo& info) const;

 private:
  at::Tensor read_from_file(const TensorInfo& tensor) const;
  // `size` bytes of the mapping at `bytes` (all or rows of `tensor`) as a tensor of `shape` that
  // keeps the mapping alive, recorded in in_place_: only the first time the tensor is asked for,
  // and only when the bytes are aligned for its dtype. An undefined tensor otherwise.
  at::Tensor claim_in_place(const TensorInfo& tensor, std::byte* bytes, uint64_t size,
                            const std::vector<int64_t>& shape) const;
  // Whether the tensor was handed out in place (its mapped pages may have been written since).
  bool handed_out_in_place(const std::string& name) const;
  // Throws CheckpointError naming the file and tensor when the file was rewritten in place since
  // it was mapped.
  void check_unchanged(const std::string& name) const;

  std::filesystem::path path_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, TensorInfo> views_;  // add_view's, by name
  std::map<std::string, std::string> metadata_;
  const std::byte* mapping_ = nullptr;
  uint64_t file_size_ = 0;
  std::shared_ptr<void> keep_mapped_;  // unmaps when this and every in-place tensor are gone
  mutable std::mutex in_place_mutex_;
  mutable std::set<std::string> in_place_;  // tensors handed out in place
  uint64_t data_offset_ = 0;                // 8 + header length
  FileIdentity identity_;                   // of the file when it was mapped
};

// fsync of a file or a folder (after a rename into it): the data is on disk when it returns.
// Throws CheckpointError naming the path.
void sync_to_disk(const std::filesystem::path& path);

// Writes tensors (any device and layout; copied to contiguous CPU) to a safetensors file,
// names sorted, with optional string metadata. Written to a temporary file, synced to disk
// and renamed, so a failure never leaves a truncated file behind.
void save_safetensors(const std::filesystem::path& path,
                      const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace shardformer
