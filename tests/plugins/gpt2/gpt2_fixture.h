// The GPT-2 tests' fixture: the tiny GPT-2 (or a variant) and tools/gen_gpt2_references.py's
// HF outputs for it.
#pragma once

#include "model_fixture.h"

namespace shardformer::testing {

class Gpt2Fixture : public ModelFixture {
 public:
  explicit Gpt2Fixture(const std::string& model = "tiny-gpt2") : ModelFixture(model, "gpt2") {}
};

}  // namespace shardformer::testing
