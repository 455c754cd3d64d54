// Token data files and labelled images, samples and their seeded order.
#include "shardformer/training/data.h"

#include "../json_file.h"
#include "image_data.h"
#include "shardformer/error.h"
#include "shardformer/losses.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/tokenizer.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>

namespace shardformer::training {

// The ids: a mapped .bin file, or the rows of a .jsonl file (each at most seq_len ids).
struct TokenDataset::Storage {
  const void* map = nullptr;
  size_t map_bytes = 0;
  int width = 2;                              // bytes per id of the .bin file
  std::vector<std::vector<int64_t>> rows;     // .jsonl samples
  std::vector<int64_t> labels;                // their "label"s (classification data), or none
  std::vector<std::vector<int64_t>> targets;  // their targets (source / target data), or none
  int64_t target_len = 0;                     // the longest target
  at::Tensor pixels;                          // image data: [samples, 3, height, width]
  std::vector<std::pair<std::string, int64_t>> folders;  // a folder per class: name, label

  ~Storage() {
    if (map != nullptr) munmap(const_cast<void*>(map), map_bytes);
  }
  int64_t id(int64_t i) const {
    return width == 2 ? static_cast<const uint16_t*>(map)[i] : static_cast<const uint32_t*>(map)[i];
  }
};

void fail_data(const DataOptions& o, const std::string& what) {
  throw ConfigError(str(o.path.string(), ": ", what));
}

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMaskStream = 0x5DEECE66Dull;  // keeps mask draws apart from the order's

uint64_t splitmix64(uint64_t& state) {
  state += kGolden;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// [0, 1) from the top 53 bits.
double uniform(uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

// Each sample's class label: [samples].
at::Tensor sample_labels(const std::vector<int64_t>& labels, const std::vector<int64_t>& samples) {
  at::Tensor out = at::empty({static_cast<int64_t>(samples.size())}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (size_t r = 0; r < samples.size(); ++r) p[r] = labels[samples[r]];
  return out;
}

void check_id(const DataOptions& o, int64_t id, int64_t vocab, const std::string& where) {
  if (id < 0 || id >= vocab) {
    fail_data(o, str("token id ", id, " at ", where, " is outside the model's vocabulary [0, ",
                     vocab, ")"));
  }
}

// What a JSON line holds; every line of a file holds the same.
enum class LineKind { kIds, kClassified, kIdPair, kTextPair, kImage };

const char* describe(LineKind kind) {
  switch (kind) {
    case LineKind::kIds: return "{\"input_ids\": [...]}";
    case LineKind::kClassified: return "{\"input_ids\": [...], \"label\": k}";
    case LineKind::kIdPair: return "{\"input_ids\": [...], \"labels\": [...]}";
    case LineKind::kTextPair: return "{\"source\": \"...\", \"target\": \"...\"}";
    case LineKind::kImage: return "{\"image\": \"file\", \"label\": k}";
  }
  return "?";
}

LineKind kind_of(const DataOptions& o, const nlohmann::json& json, int64_t line_no) {
  static const std::set<std::string> kKeys = {"image",  "input_ids", "label",
                                              "labels", "source",    "target"};
  if (json.is_object()) {
    for (const auto& [key, value] : json.items()) {
      if (!kKeys.contains(key)) {
        fail_data(o, str("line ", line_no, ": unknown key \"", key, "\" (a line holds ",
                         join(std::vector<std::string>(kKeys.begin(), kKeys.end()), ", "), ")"));
      }
    }
    if (json.contains("source") && json.contains("target") && json.size() == 2) {
      return LineKind::kTextPair;
    }
    if (json.contains("input_ids") && json.size() == 1) return LineKind::kIds;
    if (json.contains("input_ids") && json.contains("label") && json.size() == 2) {
      return LineKind::kClassified;
    }
    if (json.contains("input_ids") && json.contains("labels") && json.size() == 2) {
      return LineKind::kIdPair;
    }
    if (json.contains("image") && json.contains("label") && json.size() == 2) {
      return LineKind::kImage;
    }
  }
  fail_data(o, str("line ", line_no, ": expected one of ", describe(LineKind::kIds), ", ",
                   describe(LineKind::kClassified), ", ", describe(LineKind::kIdPair), ", ",
                   describe(LineKind::kTextPair), " or ", describe(LineKind::kImage)));
}

// `value` (the line's `key`) as ids: a non-empty list of ids in the vocabulary, or a text
// tokenized by `tokenizer`.
std::vector<int64_t> ids_of(const DataOptions& o, const nlohmann::json& value, const char* key,
                            int64_t line_no, int64_t vocab, const tokenizer::Tokenizer* tokenizer) {
  std::vector<int64_t> ids;
  if (value.is_string()) {
    if (tokenizer == nullptr) {
      fail_data(o, str("line ", line_no, ": \"", key,
                       "\" is text, and the model folder has no tokenizer.json to tokenize it"));
    }
    ids = tokenizer->encode(value.get<std::string>());
  } else if (value.is_array()) {
    for (const auto& id : value) {
      if (!id.is_number_integer()) fail_data(o, str("line ", line_no, ": ids must be integers"));
      ids.push_back(id.get<int64_t>());
    }
  } else {
    const bool text_key = std::string_view(key) == "source" || std::string_view(key) == "target";
    fail_data(o, str("line ", line_no, ": \"", key, "\" must be ",
                     text_key ? "a string" : "a list of ids"));
  }
  if (ids.empty()) fail_data(o, str("line ", line_no, ": \"", key, "\" holds no token"));
  for (int64_t id : ids) check_id(o, id, vocab, str("line ", line_no, " (\"", key, "\")"));
  return ids;
}

}  // namespace

TokenDataset::TokenDataset(const DataOptions& o, int64_t vocab,
                           const tokenizer::Tokenizer* tokenizer, const ImageClasses* images)
    : options_(o), vocab_size_(vocab) {
  storage_ = std::make_unique<Storage>();
  const auto check_seq_len = [&] {
    if (o.seq_len == 0) fail_data(o, "token data needs data.seq_len (the tokens of a sample)");
    if (o.seq_len < 2) fail_data(o, str("seq_len ", o.seq_len, " is too short (at least 2)"));
  };
  const auto check_images = [&](const std::string& where) -> const ImageClasses& {
    if (images == nullptr) {
      fail_data(o, str(where,
                       " images, and the model folder has no image processor "
                       "(preprocessor_config.json) to prepare them: image data serves "
                       "image classifiers"));
    }
    return *images;
  };
  if (o.mlm_probability < 0.0 || o.mlm_probability >= 1.0) {
    throw ConfigError(str("data.mlm_probability = ", o.mlm_probability, " is not in [0, 1)"));
  }
  if (o.mlm_probability > 0.0 && (o.mask_token_id < 0 || o.mask_token_id >= vocab)) {
    throw ConfigError(str("data.mask_token_id = ", o.mask_token_id, " is not an id of the model's ",
                          vocab, "-token vocabulary (masked-LM data needs it)"));
  }
  std::error_code error;
  std::vector<std::filesystem::path> image_files;
  int64_t folder_train = -1;  // a folder per class: its training files come first
  if (std::filesystem::is_directory(o.path, error)) {
    image_data::ImageList list =
        image_data::list_class_folders(o, check_images("holds class folders of"));
    image_files = std::move(list.files);
    folder_train = list.num_train;
    storage_->labels = std::move(list.labels);
    storage_->folders = std::move(list.folders);
    num_samples_ = static_cast<int64_t>(image_files.size());
  } else if (o.path.extension() == ".jsonl") {
    std::ifstream in(o.path);
    if (!in) fail_data(o, "cannot read the file");
    int64_t line_no = 0;
    std::optional<LineKind> file_kind;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json json;
      try {
        json = detail::parse_json_text(line, str(o.path.string(), ":", line_no));
      } catch (const CheckpointError& e) {
        throw ConfigError(e.what());  // a data file is the job's input, like its config
      }
      const LineKind kind = kind_of(o, json, line_no);
      if (file_kind && kind != *file_kind) {
        fail_data(o,
                  str("line ", line_no, " holds ", describe(kind), " where the lines before hold ",
                      describe(*file_kind), " (every line holds the same)"));
      }
      file_kind = kind;
      if (kind == LineKind::kImage) {
        const ImageClasses& classes = check_images(str("line ", line_no, " names"));
        const nlohmann::json& image = json["image"];
        const nlohmann::json& label = json["label"];
        if (!image.is_string() || image.get<std::string>().empty()) {
          fail_data(o, str("line ", line_no, ": \"image\" must be a file name"));
        }
        if (!label.is_number_integer()) {
          fail_data(o, str("line ", line_no, ": \"label\" must be a class index (an integer)"));
        }
        image_data::check_class_label(o, label.get<int64_t>(), classes, str("line ", line_no));
        image_files.push_back(o.path.parent_path() / image.get<std::string>());
        storage_->labels.push_back(label.get<int64_t>());
        continue;
      }
      check_seq_len();
      const bool text = kind == LineKind::kTextPair;
      std::vector<int64_t> row = ids_of(o, json[text ? "source" : "input_ids"],
                                        text ? "source" : "input_ids", line_no, vocab, tokenizer);
      if (static_cast<int64_t>(row.size()) > o.seq_len) {
        fail_data(o, str("line ", line_no, " holds ", row.size(), " ids, more than seq_len = ",
                         o.seq_len, " (split long documents before training)"));
      }
      if (kind == LineKind::kClassified) {
        const nlohmann::json& label = json["label"];
        if (!label.is_number_integer() || label.get<int64_t>() < 0) {
          fail_data(o,
                    str("line ", line_no, ": \"label\" must be a class index (an integer >= 0)"));
        }
        storage_->labels.push_back(label.get<int64_t>());
      }
      if (kind == LineKind::kIdPair || kind == LineKind::kTextPair) {
        const char* key = text ? "target" : "labels";
        storage_->targets.push_back(ids_of(o, json[key], key, line_no, vocab, tokenizer));
        storage_->target_len =
            std::max(storage_->target_len, static_cast<int64_t>(storage_->targets.back().size()));
      }
      storage_->rows.push_back(std::move(row));
    }
    num_samples_ = static_cast<int64_t>(std::max(storage_->rows.size(), image_files.size()));
  } else {
    check_seq_len();
    if (o.dtype != "uint16" && o.dtype != "uint32") {
      fail_data(o, str("dtype '", o.dtype, "' (uint16 or uint32)"));
    }
    storage_->width = o.dtype == "uint16" ? 2 : 4;
    const int fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_data(o, "cannot open the file");
    struct stat st {};
    fstat(fd, &st);
    storage_->map_bytes = static_cast<size_t>(st.st_size);
    if (storage_->map_bytes == 0 || storage_->map_bytes % storage_->width != 0) {
      close(fd);
      fail_data(o, str("size ", storage_->map_bytes, " bytes is not a positive multiple of ",
                       storage_->width, " (", o.dtype, ")"));
    }
    void* map = mmap(nullptr, storage_->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) fail_data(o, "cannot map the file");
    storage_->map = map;
    const int64_t tokens = static_cast<int64_t>(storage_->map_bytes) / storage_->width;
    for (int64_t i = 0; i < tokens; ++i) check_id(o, storage_->id(i), vocab, str("token ", i));
    num_samples_ = tokens / o.seq_len;
  }
  if (num_samples_ < 1) {
    fail_data(o, image_files.empty() && storage_->folders.empty()
                     ? str("holds no sample of ", o.seq_len, " tokens")
                     : std::string("holds no image"));
  }
  const auto held_out = static_cast<int64_t>(static_cast<double>(num_samples_) * o.eval_fraction);
  num_train_ = num_samples_ - held_out;
  if (folder_train >= 0) num_train_ = folder_train;  // each class's last files are held out
  if (num_train_ < 1) fail_data(o, "eval_fraction leaves no training sample");
  if (!image_files.empty()) {
    storage_->pixels = image_data::prepare_images(o, image_files, images->processor);
  }
}

TokenDataset::~TokenDataset() = default;

bool TokenDataset::has_class_labels() const { return !storage_->labels.empty(); }

bool TokenDataset::has_targets() const { return !storage_->targets.empty(); }

bool TokenDataset::has_images() const { return storage_->pixels.defined(); }

const std::vector<std::pair<std::string, int64_t>>& TokenDataset::class_folders() const {
  return storage_->folders;
}

Batch TokenDataset::batch(const std::vector<int64_t>& samples) const {
  const auto rows = static_cast<int64_t>(samples.size()), len = options_.seq_len;
  if (storage_->pixels.defined()) {  // labelled images
    const at::Tensor index = at::tensor(samples, at::kLong);
    return {.labels = sample_labels(storage_->labels, samples),
            .pixel_values = storage_->pixels.index_select(0, index)};
  }
  at::Tensor ids = at::zeros({rows, len}, at::kLong), mask = at::zeros({rows, len}, at::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t s = samples[r];
    if (storage_->map != nullptr) {
      for (int64_t t = 0; t < len; ++t) {
        ids_a[r][t] = storage_->id(s * len + t);
        mask_a[r][t] = 1;
      }
    } else {
      const auto& row = storage_->rows[s];
      for (size_t t = 0; t < row.size(); ++t) {
        ids_a[r][static_cast<int64_t>(t)] = row[t];
        mask_a[r][static_cast<int64_t>(t)] = 1;
      }
    }
  }
  if (!storage_->targets.empty()) {  // source / target pairs: the targets, padding ignored
    at::Tensor labels = at::full({rows, storage_->target_len}, kIgnoreIndex, at::kLong);
    for (int64_t r = 0; r < rows; ++r) {
      const auto& target = storage_->targets[samples[r]];
      std::copy(target.begin(), target.end(), labels[r].data_ptr<int64_t>());
    }
    return {ids, mask, labels};
  }
  if (!storage_->labels.empty()) {  // classification: a label a sample
    return {ids, mask, sample_labels(storage_->labels, samples)};
  }
  if (options_.mlm_probability <= 0.0) return {ids, mask, ids.masked_fill(mask == 0, kIgnoreIndex)};
  at::Tensor labels = at::full({rows, len}, kIgnoreIndex, at::kLong);
  auto labels_a = labels.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    // A stream of its own per sample: seed xor a hash of the index (seeds a golden step apart
    // would give streams that are each other shifted by one draw).
    uint64_t index_state = kMaskStream + static_cast<uint64_t>(samples[r]) * kGolden;
    uint64_t state = options_.seed ^ splitmix64(index_state);
    for (int64_t t = 0; t < len; ++t) {
      if (uniform(state) >= options_.mlm_probability || mask_a[r][t] == 0) continue;
      labels_a[r][t] = ids_a[r][t];
      const double kind = uniform(state);
      if (kind < 0.8) {
        ids_a[r][t] = options_.mask_token_id;
      } else if (kind < 0.9) {
        ids_a[r][t] = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(vocab_size_));
      }
    }
  }
  return {ids, mask, labels};
}

Batch TokenDataset::train_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) {
    if (i < 0 || i >= num_train_) throw Error(str("training sample ", i, " of ", num_train_));
  }
  return batch(indices);
}

Batch TokenDataset::eval_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> samples;
  for (int64_t i : indices) {
    if (i < 0 || i >= num_eval()) throw Error(str("held-out sample ", i, " of ", num_eval()));
    samples.push_back(num_train_ + i);
  }
  return batch(samples);
}

SampleStream::SampleStream(int64_t num_samples, uint64_t seed, bool shuffle)
    : num_samples_(num_samples), seed_(seed), shuffle_(shuffle) {}

std::vector<int64_t> SampleStream::permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  uint64_t state = seed + static_cast<uint64_t>(epoch) * kGolden;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<int64_t> SampleStream::next(int64_t count) {
  std::vector<int64_t> samples;
  for (int64_t k = 0; k < count; ++k, ++position_) {
    const int64_t epoch = position_ / num_samples_, index = position_ % num_samples_;
    if (!shuffle_) {
      samples.push_back(index);
      continue;
    }
    if (epoch != cached_epoch_) {
      order_ = permutation(num_samples_, seed_, epoch);
      cached_epoch_ = epoch;
    }
    samples.push_back(order_[index]);
  }
  return samples;
}

}  // namespace shardformer::training
