// Labelled images: class folders listed in ImageFolder order (or by id2label's names), and the
// images decoded and prepared once into the tensor batches are cut from.
#include "image_data.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace shardformer::training::image_data {
namespace {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".jpg" || extension == ".jpeg" || extension == ".png";
}

bool is_hidden(const fs::path& path) { return path.filename().string().starts_with("."); }

// The entries of `folder` sorted by name, hidden ones passed over.
std::vector<fs::directory_entry> sorted_entries(const DataOptions& o, const fs::path& folder) {
  std::vector<fs::directory_entry> entries;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (!is_hidden(it->path())) entries.push_back(*it);
  }
  if (error) fail_data(o, str("cannot list ", folder.string(), ": ", error.message()));
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  return entries;
}

}  // namespace

void check_class_label(const DataOptions& o, int64_t label, const ImageClasses& classes,
                       const std::string& where) {
  const auto count = static_cast<int64_t>(classes.names.size());
  if (label < 0 || label >= count) {
    fail_data(o, str(where, ": label ", label, " is not a class of the model (config.json's ",
                     "id2label has ", count, ": 0 to ", count - 1, ")"));
  }
}

ImageList list_class_folders(const DataOptions& o, const ImageClasses& classes) {
  std::vector<std::string> folders;
  for (const auto& entry : sorted_entries(o, o.path)) {
    if (!entry.is_directory()) {
      fail_data(o, str(entry.path().filename().string(),
                       " is not a folder: a data folder holds one folder of images per class"));
    }
    folders.push_back(entry.path().filename().string());
  }
  if (folders.empty()) fail_data(o, "holds no class folder (a folder of images per class)");
  if (folders.size() > classes.names.size()) {
    fail_data(o, str("holds ", folders.size(), " class folders, and the model has ",
                     classes.names.size(), " classes (config.json's id2label)"));
  }
  // By name when every folder is named after one of the model's classes.
  const auto id_of = [&](const std::string& name) -> int64_t {
    const auto it = std::find(classes.names.begin(), classes.names.end(), name);
    return it == classes.names.end() ? -1 : it - classes.names.begin();
  };
  const bool by_name = std::all_of(folders.begin(), folders.end(),
                                   [&](const std::string& f) { return id_of(f) >= 0; });
  ImageList list;
  std::vector<fs::path> held_files;
  std::vector<int64_t> held_labels;
  for (size_t i = 0; i < folders.size(); ++i) {
    const int64_t label = by_name ? id_of(folders[i]) : static_cast<int64_t>(i);
    list.folders.emplace_back(folders[i], label);
    std::vector<fs::path> files;
    for (const auto& entry : sorted_entries(o, o.path / folders[i])) {
      if (!entry.is_regular_file() || !is_image_file(entry.path())) {
        fail_data(o, str(folders[i], "/", entry.path().filename().string(),
                         " is not a JPEG or PNG file (.jpg, .jpeg or .png)"));
      }
      files.push_back(entry.path());
    }
    if (files.empty()) fail_data(o, str("class folder ", folders[i], " holds no image"));
    const auto held = static_cast<size_t>(static_cast<double>(files.size()) * o.eval_fraction);
    for (size_t f = 0; f < files.size(); ++f) {
      const bool train = f < files.size() - held;
      (train ? list.files : held_files).push_back(files[f]);
      (train ? list.labels : held_labels).push_back(label);
    }
  }
  list.num_train = static_cast<int64_t>(list.files.size());
  list.files.insert(list.files.end(), held_files.begin(), held_files.end());
  list.labels.insert(list.labels.end(), held_labels.begin(), held_labels.end());
  return list;
}

at::Tensor prepare_images(const DataOptions& o, const std::vector<fs::path>& files,
                          const vision::ImageProcessorOptions& processor) {
  const auto memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  at::Tensor all;  // [files, 3, height, width]
  for (size_t i = 0; i < files.size(); ++i) {
    at::Tensor pixels;  // [3, height, width]
    try {
      pixels = vision::pixel_values(vision::read_image(files[i]), processor);
    } catch (const ConfigError& e) {
      fail_data(o, e.what());
    }
    if (!all.defined()) {
      const double bytes = static_cast<double>(files.size() * pixels.numel() * sizeof(float));
      if (bytes > memory / 2) {
        fail_data(o, str(files.size(), " images of ", pixels.size(1), " x ", pixels.size(2),
                         " pixel values fill ", bytes / (1 << 30),
                         " GiB, more than half of this machine's memory (", memory / (1 << 30),
                         " GiB): they are kept in memory for the whole run"));
      }
      std::vector<int64_t> sizes = {static_cast<int64_t>(files.size())};
      sizes.insert(sizes.end(), pixels.sizes().begin(), pixels.sizes().end());
      all = at::empty(sizes, pixels.options());
    } else if (pixels.sizes() != all[0].sizes()) {
      fail_data(o, str(files[i].string(), ": its pixel values are ", pixels.size(1), " x ",
                       pixels.size(2), " and the first image's ", all.size(2), " x ", all.size(3),
                       ": a batch needs one size (the processor's size and "
                       "crop_size settings)"));
    }
    all[static_cast<int64_t>(i)].copy_(pixels);
  }
  return all;
}

}  // namespace shardformer::training::image_data
