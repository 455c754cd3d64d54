// Labelled images for training image classifiers: a folder per class listed as torchvision's
// ImageFolder lists it (or by the model's class names), and every image prepared once.
#pragma once

#include "shardformer/training/data.h"

#include <ATen/Tensor.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace shardformer::training {

// Throws ConfigError naming the data file and what is wrong with it: every data reader's refusal
// (data.cpp).
[[noreturn]] void fail_data(const DataOptions& options, const std::string& what);

}  // namespace shardformer::training

namespace shardformer::training::image_data {

struct ImageList {
  std::vector<std::filesystem::path> files;
  std::vector<int64_t> labels;
  int64_t num_train = 0;  // files [0, num_train) train; the rest are held out
  std::vector<std::pair<std::string, int64_t>> folders;  // each class folder and its label
};

// The JPEG and PNG files of every class folder under options.path, each class's last
// eval_fraction of its files held out (after every training file). Hidden files are passed
// over; any other file or folder is refused by name (ConfigError), as are more class folders than
// the model has classes.
ImageList list_class_folders(const DataOptions& options, const ImageClasses& classes);

// Throws ConfigError naming the data file and `where` when `label` is not a class of the model.
void check_class_label(const DataOptions& options, int64_t label, const ImageClasses& classes,
                       const std::string& where);

// Every file decoded and prepared by the processor: [files, 3, height, width] fp32. Throws
// ConfigError naming the data file and the image for a broken image, one whose pixel values
// differ in size from the first's, or images that would fill more than half the machine's memory.
at::Tensor prepare_images(const DataOptions& options,
                          const std::vector<std::filesystem::path>& files,
                          const vision::ImageProcessorOptions& processor);

}  // namespace shardformer::training::image_data
