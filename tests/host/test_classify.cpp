// Images in, labels out: the host's classify job with tiny-vit and tiny-swin against HF
// (load_image, the folder's ViT image processor, ViTForImageClassification or
// SwinForImageClassification, softmax; tools/gen_classify_reference.py) at tp 1, tp 2 and pp 2:
// every image's top labels and probabilities, printed and written as JSON lines.
#include "job_run.h"

namespace shardformer::testing {
namespace {

struct Case {
  std::string model, layout, name;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ClassifyJob : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_P(ClassifyJob, GivesHFsLabelsAndProbabilities) {
  const Case& c = GetParam();
  const nlohmann::json reference =
      nlohmann::json::parse(std::ifstream(test_data_dir() / "classify" / (c.model + ".json")));
  dir_ = fresh_test_dir("shardformer_classify_");
  const std::filesystem::path output = dir_ / "labels.jsonl";
  std::string images;
  for (const auto& image : reference["images"]) {
    images += (images.empty() ? "" : ", ") + quoted(image.get<std::string>());
  }
  const JobRun run =
      run_job(dir_,
              "[model]\npath = " + quoted((models_dir() / c.model).string()) +
                  "\n[job]\nmode = \"classify\"\n" + c.layout +
                  "\n[classify]\nbatch_size = 2\ntop_k = 3\noutput = " + quoted(output.string()) +
                  "\nimages = [" + images + "]\n",
              output);
  ASSERT_EQ(run.status, 0) << run.console;
  ASSERT_EQ(run.lines.size(), reference["images"].size()) << run.console;
  for (size_t i = 0; i < run.lines.size(); ++i) {
    const nlohmann::json& line = run.lines[i];
    const nlohmann::json& hf = reference["probabilities"][i];
    EXPECT_EQ(line["image"], reference["images"][i]);
    ASSERT_EQ(line["labels"].size(), 3U);
    double previous = 1.0;
    for (const auto& entry : line["labels"]) {
      const int64_t id = entry["id"];
      EXPECT_EQ(entry["label"], reference["labels"][std::to_string(id)]);
      EXPECT_NEAR(entry["probability"].get<double>(), hf[id].get<double>(), 1e-5)
          << "image " << i << ", class " << id;
      EXPECT_LE(entry["probability"].get<double>(), previous);  // most probable first
      previous = entry["probability"];
    }
    const std::string first = line["labels"][0]["label"];
    EXPECT_NE(run.console.find("classify[" + std::to_string(i) + "]"), std::string::npos);
    EXPECT_NE(run.console.find(first), std::string::npos) << run.console;
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const std::string model : {"tiny-vit", "tiny-swin"}) {
    const std::string name = model == "tiny-vit" ? "vit" : "swin";
    all.push_back({model, "", name + "_tp1"});
    all.push_back({model, "[parallel]\ntp_size = 2", name + "_tp2"});
    all.push_back({model, "[parallel]\npp_size = 2", name + "_pp2"});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ClassifyJob, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace shardformer::testing
