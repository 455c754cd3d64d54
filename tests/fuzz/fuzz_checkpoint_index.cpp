// Fuzz target: model.safetensors.index.json of a sharded checkpoint, read by Checkpoint from a
// folder that holds a valid config.json and two valid shards (the tensors of the Python-written
// fixture tests/sdk reads). CheckpointError is the expected outcome for a bad index.
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"

#include <ATen/core/Tensor.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct FixtureTensor {
  std::string name;
  std::vector<int64_t> shape;  // float32
};

// A safetensors file of float32 tensors holding zeros, written without LibTorch.
void write_shard(const fs::path& path, const std::vector<FixtureTensor>& tensors) {
  std::string header = "{\"__metadata__\": {\"format\": \"pt\"}";
  uint64_t offset = 0;
  for (const FixtureTensor& tensor : tensors) {
    uint64_t bytes = 4;
    std::string shape;
    for (int64_t dim : tensor.shape) {
      bytes *= static_cast<uint64_t>(dim);
      shape += (shape.empty() ? "" : ", ") + std::to_string(dim);
    }
    header += ", \"" + tensor.name + "\": {\"dtype\": \"F32\", \"shape\": [" + shape +
              "], \"data_offsets\": [" + std::to_string(offset) + ", " +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  file += header;
  file.append(offset, '\0');
  std::ofstream(path, std::ios::binary) << file;
}

// The checkpoint folder, in /dev/shm when there is one (no disk traffic per input); removed at
// exit.
class Fixture {
 public:
  Fixture() {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir_ = base / ("shardformer-fuzz-index-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json")
        << R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 4,)"
        << R"( "n_layer": 2, "n_head": 2, "vocab_size": 8, "layer_norm_epsilon": 1e-05})";
    write_shard(dir_ / "model-00001-of-00002.safetensors",
                {{"transformer.wte.weight", {8, 4}},
                 {"transformer.h.0.attn.c_attn.weight", {4, 12}},
                 {"transformer.h.0.attn.c_attn.bias", {12}}});
    write_shard(dir_ / "model-00002-of-00002.safetensors",
                {{"transformer.h.1.mlp.c_fc.weight", {4, 16}}, {"transformer.ln_f.weight", {4}}});
  }
  ~Fixture() {
    std::error_code error;
    fs::remove_all(dir_, error);
  }

  const fs::path& dir() const { return dir_; }

  void write_index(const uint8_t* data, size_t size) const {
    std::ofstream out(dir_ / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();
  }

 private:
  fs::path dir_;
};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

// An accepted checkpoint opened files of the folder by their exact names and resolves every
// tensor name to the one file that holds it.
void exercise(const shardformer::Checkpoint& checkpoint, const fs::path& dir) {
  for (const auto& file : checkpoint.files()) {
    const std::string& path = file->path().native();
    check(file->path().parent_path() == dir && path.find('\0') == std::string::npos,
          "shards are files of the folder, named without a NUL");
  }
  uint64_t bytes = 0;
  for (const std::string& name : checkpoint.tensor_names()) {
    const shardformer::TensorInfo& info = checkpoint.info(name);
    check(checkpoint.file_of(name).contains(name), "file_of() holds the tensor");
    check(checkpoint.read(name).numel() == info.numel(), "read() has the entry's element count");
    bytes += info.nbytes();
  }
  check(bytes == checkpoint.total_bytes(), "total_bytes() sums the tensors");
  try {
    checkpoint.info("transformer.h.9.no_such_tensor");
    check(false, "an absent tensor is refused");
  } catch (const shardformer::CheckpointError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture fixture;
  fixture.write_index(data, size);
  try {
    exercise(shardformer::Checkpoint(fixture.dir()), fixture.dir());
  } catch (const shardformer::Error&) {
    // A malformed index: refused with an error naming it, as it should be.
  }
  return 0;
}
