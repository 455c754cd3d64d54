// Images and prompts in, masks out: the host's segment job with tiny-sam against HF (load_image,
// SamProcessor with the folder's SamImageProcessorPil, SamModel, post_process_masks;
// tools/gen_segment_reference.py) at tp 1 and tp 2: every mask's pixels (a pixel may differ only
// where HF's logit lies within 1e-4 of the threshold) and IoU score, printed and written as PNG
// files with a JSON lines index; a model without masks is refused.
#include "job_run.h"

#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/vision/image.h"

#include <ATen/ATen.h>

namespace shardformer::testing {
namespace {

class SegmentJob : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// segment.prompts as TOML from the reference's JSON.
std::string prompt_tables(const nlohmann::json& prompts) {
  std::string toml;
  for (const auto& p : prompts) {
    toml += "[[segment.prompts]]\nimage = " + p["image"].dump() + "\n";
    for (const char* key : {"points", "labels", "box"}) {
      if (p.contains(key)) toml += std::string(key) + " = " + p[key].dump() + "\n";
    }
  }
  return toml;
}

TEST_P(SegmentJob, GivesHFsMasksAndScores) {
  const std::filesystem::path data = test_data_dir() / "segment";
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(data / "tiny-sam.json"));
  const SafetensorsFile hf(data / "tiny-sam.safetensors");
  dir_ = fresh_test_dir("shardformer_segment_");
  const std::filesystem::path output = dir_ / "masks";
  std::string images;
  for (const auto& image : reference["images"]) {
    images += (images.empty() ? "" : ", ") + quoted(image.get<std::string>());
  }
  const JobRun run =
      run_job(dir_,
              "[model]\npath = " + quoted((models_dir() / "tiny-sam").string()) +
                  "\n[job]\nmode = \"segment\"\n" + GetParam() +
                  "\n[segment]\noutput = " + quoted(output.string()) + "\nimages = [" + images +
                  "]\n" + prompt_tables(reference["prompts"]),
              output / "masks.jsonl");
  ASSERT_EQ(run.status, 0) << run.console;
  ASSERT_EQ(run.lines.size(), 3 * reference["prompts"].size()) << run.console;
  int partial_masks = 0;
  for (const nlohmann::json& line : run.lines) {
    const int64_t prompt = line["prompt"], mask = line["mask"];
    const std::string key = "prompt" + std::to_string(prompt);
    EXPECT_EQ(line["image"], reference["images"][reference["prompts"][prompt]["image"].get<int>()]);
    EXPECT_NEAR(line["iou_score"].get<double>(), hf.read(key + ".iou_scores")[mask].item<double>(),
                1e-5)
        << key << " mask " << mask;
    const at::Tensor logits = hf.read(key + ".logits")[mask];  // [height, width]
    const vision::Image png = vision::read_image(line["file"].get<std::string>());
    ASSERT_EQ(png.height, logits.size(0)) << line.dump();
    ASSERT_EQ(png.width, logits.size(1)) << line.dump();
    const at::Tensor ours =
        at::from_blob(const_cast<uint8_t*>(png.rgb.data()), {png.height, png.width, 3}, at::kByte)
            .select(2, 0)
            .gt(127);
    const at::Tensor differ = ours.ne(logits.gt(0));
    EXPECT_EQ(line["area"].get<int64_t>(), ours.sum().item<int64_t>());
    if (differ.any().item<bool>()) {
      EXPECT_LT(logits.masked_select(differ).abs().max().item<double>(), 1e-4)
          << key << " mask " << mask << ": " << differ.sum().item<int64_t>()
          << " pixels differ from HF's away from the threshold";
    }
    const int64_t area = ours.sum().item<int64_t>();
    partial_masks += area > 0 && area < ours.numel() ? 1 : 0;
  }
  EXPECT_GE(partial_masks, 5) << "masks neither empty nor full: the test compares shapes";
  EXPECT_NE(run.console.find("segment[4] photo.jpg: mask 0 IoU"), std::string::npos) << run.console;
}

INSTANTIATE_TEST_SUITE_P(Layouts, SegmentJob, ::testing::Values("", "[parallel]\ntp_size = 2"),
                         [](const auto& info) { return info.index == 0 ? "tp1" : "tp2"; });

// A model that makes no masks, and a prompt on an image the job does not list, are refused.
TEST(SegmentJobErrors, WrongModelAndPromptAreRefused) {
  const std::filesystem::path dir = fresh_test_dir("shardformer_segment_errors_");
  const std::string image = quoted((test_data_dir() / "images" / "photo.jpg").string());
  const std::string segment =
      "\n[segment]\noutput = " + quoted((dir / "out").string()) + "\nimages = [" + image + "]\n";
  JobRun run = run_job(dir,
                       "[model]\npath = " + quoted((models_dir() / "tiny-vit").string()) +
                           "\n[job]\nmode = \"segment\"" + segment +
                           "[[segment.prompts]]\npoints = [[1, 2]]\n",
                       dir / "out" / "masks.jsonl");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.console.find("needs a promptable segmentation model"), std::string::npos)
      << run.console;
  run = run_job(dir,
                "[model]\npath = " + quoted((models_dir() / "tiny-sam").string()) +
                    "\n[job]\nmode = \"segment\"" + segment +
                    "[[segment.prompts]]\nimage = 1\npoints = [[1, 2]]\n",
                dir / "out" / "masks.jsonl");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.console.find("segment.prompts[0].image"), std::string::npos) << run.console;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardformer::testing
