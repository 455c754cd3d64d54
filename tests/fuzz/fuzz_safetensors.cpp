// Fuzz target: the safetensors header and data-offset parser (SafetensorsFile) on arbitrary file
// bytes; every tensor of a file it accepts is then read whole and sliced. CheckpointError is the
// expected outcome for a bad file; anything else is a finding.
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"

#include <ATen/core/Tensor.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace {

using shardformer::SafetensorsFile;
using shardformer::TensorInfo;

// An in-memory file (memfd) that the parser opens and maps through /proc/self/fd like a file on
// disk: no disk traffic per input.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("fuzz_safetensors", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }

  // Replaces the file's content; returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t written = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (written <= 0) std::abort();
      done += static_cast<size_t>(written);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// Runs `action`, which must throw CheckpointError (a request the reader has to refuse).
template <typename Action>
void expect_refused(Action action) {
  try {
    action();
  } catch (const shardformer::CheckpointError&) {
    return;
  }
  std::fprintf(stderr, "an invalid request was not refused\n");
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

// Every accepted entry lies inside the data section, reads back byte for byte, and slices of
// it are read (valid ranges) or refused (invalid ones).
void exercise_tensor(const SafetensorsFile& file, const TensorInfo& info, uint64_t data_size) {
  check(info.begin <= info.end && info.end <= data_size, "offsets inside the data section");
  check(&file.info(info.name) == &info, "info() finds the entry");
  at::Tensor whole = file.read(info.name);
  check(whole.numel() == info.numel(), "read() has the entry's element count");
  check(static_cast<uint64_t>(whole.nbytes()) == info.nbytes(), "read() has the entry's bytes");
  if (info.nbytes() > 0) {
    check(std::memcmp(whole.const_data_ptr(), file.data(info), info.nbytes()) == 0,
          "read() copies the file's bytes");
  }
  const auto rank = static_cast<int64_t>(info.shape.size());
  for (int64_t dim = 0; dim < rank; ++dim) {
    const int64_t size = info.shape[dim];
    const int64_t start = size / 2;
    at::Tensor slice = file.read_slice(info.name, dim, start, size - start);
    check(slice.size(dim) == size - start, "read_slice() has the requested length");
    if (size < std::numeric_limits<int64_t>::max()) {
      expect_refused([&] { file.read_slice(info.name, dim, start, size - start + 1); });
      // Refused before the output is allocated: no attempt at an exabyte.
      expect_refused(
          [&] { file.read_slice(info.name, dim, 0, std::numeric_limits<int64_t>::max()); });
    }
    expect_refused([&] { file.read_slice(info.name, dim, -1, 1); });
    expect_refused([&] { file.read_slice(info.name, dim, 0, -1); });
    expect_refused([&] {
      file.read_slice(info.name, dim, std::numeric_limits<int64_t>::max(), size > 0 ? 1 : 0);
    });
  }
  expect_refused([&] { file.read_slice(info.name, rank, 0, 0); });
}

// The size of the data section of a file the reader accepted: what follows the 8-byte length
// and the header.
uint64_t data_section_size(const uint8_t* data, size_t size) {
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | data[i];
  return size - 8 - header_length;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemoryFile memory_file;
  const std::string& path = memory_file.write(data, size);
  try {
    SafetensorsFile file(path);
    const uint64_t data_size = data_section_size(data, size);
    for (const TensorInfo& info : file.tensors()) exercise_tensor(file, info, data_size);
    if (!file.contains("absent")) expect_refused([&] { file.info("absent"); });
  } catch (const shardformer::Error&) {
    // A malformed file: refused with an error naming it, as it should be.
  }
  return 0;
}
