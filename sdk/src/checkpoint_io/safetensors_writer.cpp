// save_safetensors: writes tensors and string metadata in the safetensors format, through a
// temporary file renamed into place.
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/strings.h"

#include <fcntl.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <optional>
#include <system_error>

namespace shardformer {
namespace {

namespace fs = std::filesystem;

constexpr size_t kHeaderAlignment = 8;  // the Python library pads the header to this

std::string dtype_name_of(const fs::path& path, const std::string& name, const at::Tensor& tensor) {
  try {
    return safetensors_dtype_name(tensor.scalar_type());
  } catch (const Error& e) {
    throw CheckpointError(str(path.string(), ": tensor '", name, "': ", e.what()));
  }
}

// A CPU tensor as [rows, cols] rows of contiguous elements a fixed stride apart, without a copy
// (a slice of the last dimension: tensor-parallel logits narrowed past their vocabulary
// padding); nullopt when its layout is not that.
std::optional<at::Tensor> as_strided_rows(const at::Tensor& t) {
  if (t.dim() < 2 || t.stride(-1) != 1) return std::nullopt;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) != t.stride(d + 1) * t.size(d + 1)) return std::nullopt;
  }
  const int64_t cols = t.size(-1);
  return t.as_strided({t.numel() / std::max<int64_t>(cols, 1), cols}, {t.stride(-2), 1});
}

// The tensor as it is written: contiguous, or rows a stride apart (written row by row).
at::Tensor writable(const at::Tensor& tensor) {
  at::Tensor cpu = tensor.to(at::kCPU);
  if (cpu.is_contiguous() || cpu.numel() == 0) return cpu.contiguous();
  if (as_strided_rows(cpu)) return cpu;
  return cpu.contiguous();
}

// The header JSON, padded with spaces to a multiple of kHeaderAlignment bytes. `tensors` are
// writable() CPU tensors; their data follows in map (name) order.
std::string make_header(const fs::path& path, const std::map<std::string, at::Tensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const uint64_t end = offset + tensor.nbytes();
    header[name] = {{"dtype", dtype_name_of(path, name, tensor)},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  return text;
}

void write_file(const fs::path& path, const std::string& header,
                const std::map<std::string, at::Tensor>& tensors) {
  const runtime::OperationScope activity("write_file", str("writing ", path.string()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  char length[8];
  for (size_t i = 0; i < sizeof(length); ++i) length[i] = char((header.size() >> (8 * i)) & 0xff);
  out.write(length, sizeof(length));
  out.write(header.data(), std::streamsize(header.size()));
  for (const auto& [name, tensor] : tensors) {
    if (tensor.is_contiguous()) {
      out.write(static_cast<const char*>(tensor.const_data_ptr()),
                std::streamsize(tensor.nbytes()));
      continue;
    }
    const at::Tensor rows = *as_strided_rows(tensor);  // [rows, cols]
    const auto row_bytes = std::streamsize(rows.size(1) * rows.element_size());
    const auto* base = static_cast<const char*>(rows.const_data_ptr());
    const int64_t stride_bytes = rows.stride(0) * rows.element_size();
    for (int64_t r = 0; r < rows.size(0); ++r) out.write(base + r * stride_bytes, row_bytes);
  }
  out.close();
  if (!out) throw CheckpointError(str(path.string(), ": cannot write the file"));
  sync_to_disk(path);
}

}  // namespace

void sync_to_disk(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw CheckpointError(str(path.string(), ": cannot sync to disk"));
}

void save_safetensors(const std::filesystem::path& path,
                      const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::map<std::string, at::Tensor> writables;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || !tensor.defined()) {
      throw CheckpointError(str(path.string(), ": tensor '", name,
                                "': cannot be saved (reserved name or undefined tensor)"));
    }
    writables.emplace(name, writable(tensor));
  }
  const std::string header = make_header(path, writables, metadata);

  fs::path temporary = path;  // unique per process: concurrent writers never share it
  temporary += ".tmp." + std::to_string(::getpid());
  std::error_code error;
  try {
    write_file(temporary, header, writables);
  } catch (...) {
    fs::remove(temporary, error);
    throw;
  }
  fs::rename(temporary, path, error);
  if (error) {
    const std::string reason = error.message();
    fs::remove(temporary, error);
    throw CheckpointError(
        str(path.string(), ": cannot rename ", temporary.string(), " into place: ", reason));
  }
}

}  // namespace shardformer
