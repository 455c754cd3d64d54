// Labelled images as training data: a folder per class and JSON lines give the same samples,
// folders are labelled by the model's class names or else in sorted order, each class holds out
// its last files, and bad data is refused naming the file.
#include "shardformer/error.h"
#include "training_fixture.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace shardformer::testing {
namespace {

namespace fs = std::filesystem;
using training::DataOptions;
using training::ImageClasses;
using training::TokenDataset;

// tools/train_reference.py --images' data: 48 images of tiny-vit's 3 classes.
fs::path image_reference_dir() { return test_data_dir() / "training-families" / "tiny-vit-img"; }

ImageClasses vit_classes() {
  return {.processor = vision::ImageProcessorOptions::from_folder(image_reference_dir() / "model"),
          .names = {"tabby cat", "golden retriever", "goldfinch"}};
}

DataOptions image_options(const fs::path& path) { return {.path = path, .seq_len = 0}; }

// A fresh folder under the temp directory.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The first `count` reference images of class folder `from`, copied into dir/`to`.
void copy_images(const std::string& from, const fs::path& dir, const std::string& to, int count) {
  fs::create_directories(dir / to);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(image_reference_dir() / "images" / from)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (int i = 0; i < count; ++i) fs::copy_file(files[i], dir / to / files[i].filename());
}

// The ConfigError message of reading `options`, or "" when it reads.
std::string image_read_error(const DataOptions& options, const ImageClasses* classes) {
  try {
    TokenDataset data(options, 1013, nullptr, classes);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ImageData, FolderAndJsonLinesGiveTheSameSamples) {
  // In a forked child, as every test here: the parent never starts ATen's thread pool, which
  // a later test's forked ranks would inherit half-made (GNU OpenMP is not fork-safe).
  expect_all_ranks_passed(run_ranks(1, [&](int, int) {
    const ImageClasses classes = vit_classes();
    const TokenDataset folder(image_options(image_reference_dir() / "images"), 1013, nullptr,
                              &classes);
    const TokenDataset lines(image_options(image_reference_dir() / "train_images.jsonl"), 1013,
                             nullptr, &classes);
    ASSERT_TRUE(folder.has_images() && lines.has_images() && folder.has_class_labels());
    EXPECT_EQ(folder.num_train(), 48);
    EXPECT_EQ(lines.num_train(), 48);
    // Folders named after the classes take their ids, though they sort in another order.
    using Folders = std::vector<std::pair<std::string, int64_t>>;
    EXPECT_EQ(folder.class_folders(),
              (Folders{{"golden retriever", 1}, {"goldfinch", 2}, {"tabby cat", 0}}));
    EXPECT_TRUE(lines.class_folders().empty());
    std::vector<int64_t> all(48);
    std::iota(all.begin(), all.end(), 0);
    const training::Batch a = folder.train_batch(all), b = lines.train_batch(all);
    EXPECT_FALSE(a.input_ids.defined());
    EXPECT_EQ(a.pixel_values.sizes(), (std::vector<int64_t>{48, 3, 32, 32}));
    EXPECT_TRUE(at::equal(a.pixel_values, b.pixel_values));
    EXPECT_TRUE(at::equal(a.labels, b.labels));
    EXPECT_EQ(a.labels[0].item<int64_t>(), 1);   // golden retriever
    EXPECT_EQ(a.labels[47].item<int64_t>(), 0);  // tabby cat
    const training::Batch picked = folder.train_batch({47, 0});
    EXPECT_TRUE(at::equal(picked.pixel_values[1], a.pixel_values[0]));
  }));
}

TEST(ImageData, SortsFoldersNotNamedAfterClassesAndHoldsOutEachClassesLastFiles) {
  // In a forked child, as every test here: the parent never starts ATen's thread pool, which
  // a later test's forked ranks would inherit half-made (GNU OpenMP is not fork-safe).
  expect_all_ranks_passed(run_ranks(1, [&](int, int) {
    const fs::path dir = scratch("class-folders");
    copy_images("goldfinch", dir, "b birds", 2);
    copy_images("tabby cat", dir, "a cats", 2);
    std::ofstream(dir / "a cats" / ".DS_Store") << "hidden files are passed over";
    const ImageClasses classes = vit_classes();
    DataOptions options = image_options(dir);
    options.eval_fraction = 0.5;
    const TokenDataset data(options, 1013, nullptr, &classes);
    using Folders = std::vector<std::pair<std::string, int64_t>>;
    EXPECT_EQ(data.class_folders(), (Folders{{"a cats", 0}, {"b birds", 1}}));
    EXPECT_EQ(data.num_train(), 2);
    EXPECT_EQ(data.num_eval(), 2);
    EXPECT_TRUE(at::equal(data.train_batch({0, 1}).labels, at::tensor({0, 1}, at::kLong)));
    EXPECT_TRUE(at::equal(data.eval_batch({0, 1}).labels, at::tensor({0, 1}, at::kLong)));
    fs::remove_all(dir);
  }));
}

TEST(ImageData, RefusesBadDataNamingTheFile) {
  // In a forked child, as every test here: the parent never starts ATen's thread pool, which
  // a later test's forked ranks would inherit half-made (GNU OpenMP is not fork-safe).
  expect_all_ranks_passed(run_ranks(1, [&](int, int) {
    const ImageClasses classes = vit_classes();
    const auto expect_error = [&](const DataOptions& options, const ImageClasses* with,
                                  const std::string& part) {
      const std::string message = image_read_error(options, with);
      EXPECT_NE(message.find(part), std::string::npos) << message << "\nwanted: " << part;
    };
    const fs::path reference = image_reference_dir() / "images";
    expect_error(image_options(reference), nullptr, "no image processor");

    const fs::path dir = scratch("bad-images");
    copy_images("goldfinch", dir, "goldfinch", 1);
    std::ofstream(dir / "notes.txt") << "not a class";
    expect_error(image_options(dir), &classes, "notes.txt is not a folder");
    fs::remove(dir / "notes.txt");
    std::ofstream(dir / "goldfinch" / "x.gif") << "GIF89a";
    expect_error(image_options(dir), &classes, "goldfinch/x.gif is not a JPEG or PNG file");
    fs::remove(dir / "goldfinch" / "x.gif");
    fs::create_directories(dir / "empty");
    expect_error(image_options(dir), &classes, "class folder empty holds no image");
    for (const char* name : {"a", "b", "c"}) copy_images("goldfinch", dir, name, 1);
    expect_error(image_options(dir), &classes,
                 "holds 5 class folders, and the model has 3 classes");
    fs::remove_all(dir);

    const fs::path lines = scratch("bad-lines");
    copy_images("goldfinch", lines, "g", 1);
    const std::string image = (*fs::directory_iterator(lines / "g")).path().filename().string();
    std::ofstream(lines / "truncated.png") << "\x89PNG\r\n\x1a\n";
    const auto write = [&](const std::string& text) {
      std::ofstream(lines / "data.jsonl") << text;
      return image_options(lines / "data.jsonl");
    };
    expect_error(write("{\"image\": \"g/" + image + "\", \"label\": 3}\n"), &classes,
                 "line 1: label 3 is not a class of the model");
    expect_error(
        write("{\"image\": \"g/" + image + "\", \"label\": 0}\n{\"image\": 5, \"label\": 0}\n"),
        &classes, "line 2: \"image\" must be a file name");
    expect_error(write("{\"image\": \"truncated.png\", \"label\": 0}\n"), &classes,
                 "truncated.png");
    expect_error(write("{\"image\": \"absent.png\", \"label\": 0}\n"), &classes, "absent.png");
    expect_error(write("{\"image\": \"g/" + image +
                       "\", \"label\": 0}\n{\"input_ids\": [1, 2], \"label\": 0}\n"),
                 &classes, "where the lines before hold {\"image\": \"file\", \"label\": k}");
    expect_error(write("{\"input_ids\": [1, 2]}\n"), &classes, "token data needs data.seq_len");
    // Without resizing, images of other sizes cannot share a batch.
    copy_images("tabby cat", lines, "t", 1);
    const std::string other = (*fs::directory_iterator(lines / "t")).path().filename().string();
    ImageClasses unresized = classes;
    unresized.processor.do_resize = false;
    expect_error(write("{\"image\": \"g/" + image + "\", \"label\": 0}\n{\"image\": \"t/" + other +
                       "\", \"label\": 0}\n"),
                 &unresized, "a batch needs one size");
    fs::remove_all(lines);
  }));
}

}  // namespace
}  // namespace shardformer::testing
