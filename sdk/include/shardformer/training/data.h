// Training data: token ids from a flat binary file (uint16 or uint32, as nanoGPT and Megatron
// write them) or JSON lines of id lists (or source / target pairs, as ids or text), cut into
// samples of seq_len tokens; or labelled images (JSON lines or a folder per class); a held-out
// split, and a reproducible sample order (a seeded permutation per epoch) that a resumed run
// continues.
#pragma once

#include "shardformer/vision/image_processor.h"

#include <ATen/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardformer::tokenizer {
class Tokenizer;
}

namespace shardformer::training {

struct DataOptions {
  // *.bin: flat ids cut into samples of seq_len; *.jsonl: a sample a line, {"input_ids": [...]}
  // with at most seq_len ids (shorter ones are padded and their padding is not learned), for
  // classification {"input_ids": [...], "label": k} on every line, and for sequence-to-sequence
  // models {"input_ids": [...], "labels": [...]} or {"source": "text", "target": "text"} (each
  // tokenized as HF's tokenizer(source, text_target=target), with the post-processor's special
  // tokens) on every line. Image classification: {"image": "file", "label": k} on every line
  // (paths relative to the .jsonl file's folder), or a folder holding a folder of images per
  // class (see ImageClasses).
  std::filesystem::path path;
  std::string dtype = "uint16";  // of a .bin file: uint16 or uint32
  int64_t seq_len = 128;         // tokens per sample (token data only)
  uint64_t seed = 1234;          // the order's seed
  bool shuffle = true;           // false: samples in file order every epoch
  // The last part of the samples, held out for evaluation (a folder per class: the last part of
  // each class's files).
  double eval_fraction = 0.0;
  // Masked-LM data (> 0): each position of a sample is picked with this probability, its label
  // is its id and the others' -100; a picked id becomes mask_token_id (80 %), a random id
  // (10 %) or stays (10 %). The masks are static: drawn with splitmix64 from
  // seed ^ splitmix64(kMaskStream + index * golden) (tools/train_reference.py --mlm draws the
  // same), the same every epoch.
  double mlm_probability = 0.0;
  int64_t mask_token_id = -1;
};

// What labelled images need: the model folder's image processor, which prepares every image as
// HF's does (vision::pixel_values), and the model's classes (config.json's id2label by id; a
// label must be below their number). A folder per class gives its images the label of the
// class whose name the folder has when every folder is named after one; otherwise folders
// sorted by name are labels 0, 1, ... (torchvision's ImageFolder), files sorted by name within.
struct ImageClasses {
  vision::ImageProcessorOptions processor{};
  std::vector<std::string> names{};
};

// A batch of samples: [rows, seq_len] each; labels are the ids with padding as -100 (masked-LM
// data: the picked positions' original ids, -100 elsewhere; classification data: [rows];
// source / target data: the targets [rows, longest target of the file], padding -100). Image
// data: pixel_values [rows, 3, height, width] and labels [rows]; no ids.
struct Batch {
  at::Tensor input_ids{}, attention_mask{}, labels{}, pixel_values{};
};

class TokenDataset {
 public:
  // Reads (a .bin file: maps) the data; throws ConfigError naming the file for a missing or
  // unreadable file, a size that is no multiple of the dtype, an id >= vocab_size (naming its
  // position), or fewer samples than one. `tokenizer` turns text lines into ids (none: text
  // lines are refused naming the line). `images` serves image data, which is decoded and
  // prepared here, once (every image must give pixel values of one size); none: image data is
  // refused. A broken image or a label outside the classes is an error naming the file.
  TokenDataset(const DataOptions& options, int64_t vocab_size,
               const tokenizer::Tokenizer* tokenizer = nullptr,
               const ImageClasses* images = nullptr);
  ~TokenDataset();
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  int64_t num_train() const { return num_train_; }
  int64_t num_eval() const { return num_samples_ - num_train_; }
  int64_t seq_len() const { return options_.seq_len; }
  const DataOptions& options() const { return options_; }

  // Whether the samples carry class labels (JSON lines with "label"): classification data.
  bool has_class_labels() const;
  // Whether the samples are source / target pairs: sequence-to-sequence data.
  bool has_targets() const;
  // Whether the samples are labelled images (and have class labels).
  bool has_images() const;
  // A folder per class: each folder's name and the label its images have; empty otherwise.
  const std::vector<std::pair<std::string, int64_t>>& class_folders() const;
  // Training samples (indices in [0, num_train)) or held-out ones ([0, num_eval)) as a batch.
  Batch train_batch(const std::vector<int64_t>& indices) const;
  Batch eval_batch(const std::vector<int64_t>& indices) const;

 private:
  struct Storage;
  Batch batch(const std::vector<int64_t>& samples) const;  // absolute sample indices

  DataOptions options_;
  std::unique_ptr<Storage> storage_;
  int64_t num_samples_ = 0, num_train_ = 0;
  int64_t vocab_size_ = 0;
};

// The order of training samples: epoch e is permutation(num_samples, seed, e) (Fisher-Yates
// over splitmix64, as tools/train_reference.py writes it), epochs one after another. A
// position counts the samples handed out, so a resumed run continues the same stream.
class SampleStream {
 public:
  SampleStream(int64_t num_samples, uint64_t seed, bool shuffle);
  std::vector<int64_t> next(int64_t count);
  int64_t position() const { return position_; }
  void seek(int64_t position) { position_ = position; }

  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

 private:
  int64_t num_samples_;
  uint64_t seed_;
  bool shuffle_;
  int64_t position_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace shardformer::training
