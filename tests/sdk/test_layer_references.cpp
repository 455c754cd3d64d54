// SDK layers against HF's own functions on inputs no tiny checkpoint reaches
// (tools/gen_layer_references.py): layers::relative_rows with tables of other lengths than the
// grid's and with queries and keys of different lengths, as SamVisionAttention.get_rel_pos.
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/layers/decomposed_relative_position.h"
#include "test_env.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardformer {
namespace {

const SafetensorsFile& layer_reference() {
  static const SafetensorsFile file(testing::test_data_dir() / "layers" / "reference.safetensors");
  return file;
}

std::vector<std::string> rel_pos_cases() {
  std::vector<std::string> names;
  for (const TensorInfo& t : layer_reference().tensors()) {
    const std::string prefix = "rel_pos.", suffix = ".table";
    if (t.name.starts_with(prefix) && t.name.ends_with(suffix)) {
      names.push_back(t.name.substr(prefix.size(), t.name.size() - prefix.size() - suffix.size()));
    }
  }
  return names;
}

TEST(LayerReference, RelativeRowsEqualHFsGetRelPosForEveryTableAndGrid) {
  const std::vector<std::string> cases = rel_pos_cases();
  ASSERT_GE(cases.size(), 7U);
  int64_t resized = 0, uneven = 0;
  for (const std::string& name : cases) {
    SCOPED_TRACE(name);
    const at::Tensor table = layer_reference().read("rel_pos." + name + ".table");  // [length, dim]
    const at::Tensor sizes = layer_reference().read("rel_pos." + name + ".sizes");
    const int64_t q_size = sizes[0].item<int64_t>(), k_size = sizes[1].item<int64_t>();
    const at::Tensor expected = layer_reference().read("rel_pos." + name + ".rows");
    const at::Tensor rows = layers::relative_rows(table, q_size, k_size);  // [q, k, dim]
    ASSERT_EQ(rows.sizes(), expected.sizes());
    EXPECT_TRUE(at::allclose(rows, expected, 1e-6, 1e-6))
        << "max |diff| " << (rows - expected).abs().max().item<double>();
    resized += table.size(0) != 2 * std::max(q_size, k_size) - 1;
    uneven += q_size != k_size;
  }
  EXPECT_GE(resized, 3);  // the reference reaches both branches
  EXPECT_GE(uneven, 4);
}

}  // namespace
}  // namespace shardformer
