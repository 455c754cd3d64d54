// The image front end against PIL and HF (tools/gen_image_references.py): every test image's RGB
// pixels equal PIL's (load_image: EXIF orientation, convert("RGB")) byte for byte, in each colour
// mode, odd size and orientation; pixel_values equal HF's ViT image processor (PIL backend) for
// each resampling filter, crop, rescale and normalization; broken files and settings the host does
// not apply are refused naming the file and the key.
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/vision/image.h"
#include "shardformer/vision/image_processor.h"
#include "test_env.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <fstream>
#include <set>

namespace shardformer::vision {
namespace {

namespace fs = std::filesystem;

fs::path image_dir() { return testing::test_data_dir() / "images"; }

const SafetensorsFile& image_reference() {
  static const SafetensorsFile file(image_dir() / "reference.safetensors");
  return file;
}

// The names of the test images (reference keys "rgb.<name>").
std::vector<std::string> image_names() {
  std::vector<std::string> names;
  for (const TensorInfo& t : image_reference().tensors()) {
    if (t.name.starts_with("rgb.")) names.push_back(t.name.substr(4));
  }
  return names;
}

fs::path image_file(const std::string& name) {
  const fs::path jpeg = image_dir() / (name + ".jpg");
  return fs::exists(jpeg) ? jpeg : image_dir() / (name + ".png");
}

at::Tensor as_tensor(const Image& image) {  // [height, width, 3] uint8
  return at::from_blob(const_cast<uint8_t*>(image.rgb.data()), {image.height, image.width, 3},
                       at::kByte)
      .clone();
}

TEST(ImageReference, HoldsEveryKindOfImage) {
  const std::vector<std::string> names = image_names();
  EXPECT_GE(names.size(), 28U);
  for (const char* kind : {"photo", "edges_cmyk_jpeg", "edges_palette", "edges_grey16", "wide",
                           "one_pixel", "exif_8", "exif_png_6"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), kind), names.end()) << kind;
  }
}

class ImageFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(ImageFiles, DecodeToPILsPixelsAndHFsPixelValues) {
  const std::string& name = GetParam();
  const Image image = read_image(image_file(name));
  const at::Tensor expected = image_reference().read("rgb." + name);
  ASSERT_EQ(std::vector<int64_t>({image.height, image.width, 3}), expected.sizes().vec()) << name;
  const at::Tensor ours = as_tensor(image);
  const int64_t differing = ours.ne(expected).sum().item<int64_t>();
  EXPECT_EQ(differing, 0) << name << ": " << differing << " of " << ours.numel()
                          << " values differ from PIL's; max |diff| "
                          << (ours.to(at::kInt) - expected.to(at::kInt)).abs().max().item<int>();
  int checked = 0;
  for (const TensorInfo& t : image_reference().tensors()) {
    const std::string suffix = "." + name;
    if (!t.name.starts_with("pixels.") || !t.name.ends_with(suffix)) continue;
    const std::string processor = t.name.substr(7, t.name.size() - 7 - suffix.size());
    if (processor.find('.') != std::string::npos) continue;  // another image's name ends so
    const ImageProcessorOptions options =
        ImageProcessorOptions::from_file(image_dir() / (processor + ".json"));
    const at::Tensor pixels = pixel_values(image, options);
    const at::Tensor hf = image_reference().read(t.name);
    ASSERT_EQ(pixels.sizes(), hf.sizes()) << t.name;
    EXPECT_LE((pixels - hf).abs().max().item<double>(), 1e-5) << t.name;
    ++checked;
  }
  EXPECT_EQ(checked, 8) << name << ": every processor setting of the reference";
}

INSTANTIATE_TEST_SUITE_P(Reference, ImageFiles, ::testing::ValuesIn(image_names()),
                         [](const auto& info) { return info.param; });

// PIL's Image.resize on random images and sizes, every convolution filter: equal byte for byte.
TEST(Resize, EqualsPILForEveryFilterSizeAndPassOrder) {
  int cases = 0;
  for (int i = 0; image_reference().contains("sweep." + std::to_string(i) + ".input"); ++i) {
    const std::string key = "sweep." + std::to_string(i);
    const at::Tensor input = image_reference().read(key + ".input").contiguous();  // [h, w, 3]
    const at::Tensor size = image_reference().read(key + ".size");
    Image image{.width = input.size(1), .height = input.size(0), .rgb = {}};
    image.rgb.assign(input.data_ptr<uint8_t>(), input.data_ptr<uint8_t>() + input.numel());
    for (const int filter : {1, 2, 3, 4, 5}) {
      const Image out = resize(image, size[1].item<int64_t>(), size[0].item<int64_t>(),
                               static_cast<Resample>(filter));
      const at::Tensor pil = image_reference().read(key + "." + std::to_string(filter));
      EXPECT_TRUE(at::equal(as_tensor(out), pil))
          << key << " " << image.width << " x " << image.height << " -> " << size[1].item<int64_t>()
          << " x " << size[0].item<int64_t>() << ", filter " << filter;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 48 * 5);
  EXPECT_THROW(resize(Image{.width = 1, .height = 1, .rgb = {0, 0, 0}}, 2, 2, Resample::kNearest),
               Error);
}

// Each broken file fails with one ConfigError naming the file and what is wrong with it.
TEST(BrokenImages, AreRefusedNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"broken_truncated.jpg", "not a whole JPEG image"},
      {"broken_truncated.png", "not a whole PNG image"},
      {"broken_magic.png", "neither a JPEG nor a PNG"},
      {"broken_empty.jpg", "the file is empty"},
      {"broken_huge.png", "60000 x 60000"},
      {"broken_text.png", "neither a JPEG nor a PNG"},
      {"no_such_image.png", "cannot open"}};
  for (const auto& [file, why] : cases) {
    const fs::path path = image_dir() / file;
    try {
      read_image(path);
      ADD_FAILURE() << file << " was read";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path.string()), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  }
}

// A settings file with `json` as its text.
fs::path settings_file(const std::string& json) {
  const fs::path path = fs::path(::testing::TempDir()) / "preprocessor_config.json";
  std::ofstream(path) << json;
  return path;
}

TEST(ImageProcessorSettings, ThoseTheHostDoesNotApplyAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"do_pad": true})", "do_pad"},
      {R"({"resample": 0})", "resample"},
      {R"({"size": {"longest_edge": 1024}})", "size.longest_edge"},
      {R"({"size": {"height": 10}})", "size"},
      {R"({"image_processor_type": "BeitImageProcessor"})", "image_processor_type"},
      {R"({"image_processor_type": "SamImageProcessor", "size": {"shortest_edge": 8}})", "size"},
      {R"({"image_processor_type": "SamImageProcessor", "pad_size": {"height": 8}})", "pad_size"},
      {R"({"image_processor_type": "SamImageProcessor", "do_reduce_labels": true})",
       "do_reduce_labels"},
      {R"({"image_std": [1, 0, 1]})", "image_std"},
      {R"({"do_resize": "yes"})", "do_resize"},
      {R"({"crop_size": {"shortest_edge": 8}})", "crop_size"}};
  for (const auto& [json, key] : cases) {
    try {
      ImageProcessorOptions::from_file(settings_file(json));
      ADD_FAILURE() << json << " was accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  const ImageProcessorOptions o = ImageProcessorOptions::from_file(settings_file(
      R"({"feature_extractor_type": "ViTFeatureExtractor", "size": 384, "do_convert_rgb": true})"));
  EXPECT_EQ(o.size.height, 384);
  EXPECT_EQ(o.size.width, 384);
  EXPECT_THROW(ImageProcessorOptions::from_folder(image_dir() / "no_model_here"), CheckpointError);
  // A shortest edge that would blow a thin image up past the pixel limit is refused.
  const ImageProcessorOptions thin =
      ImageProcessorOptions::from_file(settings_file(R"({"size": {"shortest_edge": 224}})"));
  const Image line{.width = 1, .height = 1000000, .rgb = std::vector<uint8_t>(3000000)};
  EXPECT_THROW(pixel_values(line, thin), ConfigError);
}

// SamProcessor on the photograph: its resized size, its points and boxes scaled with it, and
// masks brought back to the photograph's size, against HF's; an image larger than the padding is
// refused.
TEST(SamProcessor, PromptsAndMasksAsHFs) {
  const Image photo = read_image(image_file("photo"));
  const ImageProcessorOptions sam = ImageProcessorOptions::from_file(image_dir() / "sam.json");
  ASSERT_EQ(sam.kind, ProcessorKind::kSam);
  const std::array<int64_t, 2> resized = resized_size(photo, sam);
  const at::Tensor hf_size = image_reference().read("sam_prompts.reshaped_size");
  EXPECT_EQ(resized[0], hf_size[0].item<int64_t>());
  EXPECT_EQ(resized[1], hf_size[1].item<int64_t>());
  const std::array<int64_t, 2> original{photo.height, photo.width};
  const at::Tensor points =
      scale_coordinates(image_reference().read("sam_prompts.points"), original, resized);
  EXPECT_LE(
      (points - image_reference().read("sam_prompts.scaled_points")).abs().max().item<double>(),
      1e-5);
  const at::Tensor boxes =
      scale_coordinates(image_reference().read("sam_prompts.boxes").view({-1, 2, 2}), original,
                        resized)
          .view({-1, 4});
  EXPECT_LE((boxes - image_reference().read("sam_prompts.scaled_boxes")).abs().max().item<double>(),
            1e-5);
  const at::Tensor masks =
      post_process_masks(image_reference().read("sam_masks.low"),
                         {sam.pad_size.height, sam.pad_size.width}, resized, original);
  const at::Tensor hf = image_reference().read("sam_masks.image");
  ASSERT_EQ(masks.sizes(), hf.sizes());
  EXPECT_EQ(masks.ne(hf).sum().item<int64_t>(), 0);
  ImageProcessorOptions small = sam;
  small.pad_size = {.height = 50, .width = 120};
  EXPECT_THROW(pixel_values(photo, small), ConfigError);
}

// A grey PNG written (SAM's masks) reads back as the same values in each channel.
TEST(PngWriter, GreyPixelsReadBack) {
  std::vector<uint8_t> grey(7 * 5);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint8_t>(i * 7);
  const fs::path path =
      fs::temp_directory_path() / ("shardformer-grey-" + std::to_string(::getpid()) + ".png");
  write_grey_png(path, grey, 7, 5);
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));
  const Image back = read_image(path);
  ASSERT_EQ(back.width, 7);
  ASSERT_EQ(back.height, 5);
  for (size_t i = 0; i < grey.size(); ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(back.rgb[i * 3 + c], grey[i]) << i;
  }
  fs::remove(path);
  EXPECT_THROW(write_grey_png(path, grey, 6, 5), Error);
  EXPECT_THROW(write_grey_png(fs::path("/nonexistent-dir") / "x.png", grey, 7, 5), Error);
}

TEST(ExifOrientation, MalformedBlocksReadAsUpright) {
  const std::vector<uint8_t> short_block = {'I', 'I', 42, 0};
  EXPECT_EQ(exif_orientation(short_block), 1);
  // A first IFD past the end, then one entry cut short.
  const std::vector<uint8_t> past_end = {'M', 'M', 0, 42, 0, 0, 0, 200};
  EXPECT_EQ(exif_orientation(past_end), 1);
  const std::vector<uint8_t> cut = {'I', 'I', 42, 0, 8, 0, 0, 0, 5, 0, 0x12, 0x01, 3, 0};
  EXPECT_EQ(exif_orientation(cut), 1);
  const std::vector<uint8_t> six = {'I',  'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12,
                                    0x01, 3,   0,  1, 0, 0, 0, 6, 0, 0, 0};
  EXPECT_EQ(exif_orientation(six), 6);
}

}  // namespace
}  // namespace shardformer::vision
