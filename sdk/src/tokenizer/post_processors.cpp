// tokenizer.json's post-processors for one sequence: TemplateProcessing, RobertaProcessing,
// BertProcessing, ByteLevel (offsets only) and Sequence.
#include "pipeline.h"

namespace shardformer::tokenizer::detail {
namespace {

// The ids before and after the sequence.
class Surround final : public PostProcessor {
 public:
  Surround(std::vector<int64_t> before, std::vector<int64_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int64_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int64_t> before_;
  std::vector<int64_t> after_;
};

class PostProcessorSequence final : public PostProcessor {
 public:
  explicit PostProcessorSequence(std::vector<std::unique_ptr<PostProcessor>> stages)
      : stages_(std::move(stages)) {}
  void process(std::vector<int64_t>& ids) const override {
    for (const auto& stage : stages_) stage->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> stages_;
};

// A ["token", id] pair of RobertaProcessing / BertProcessing, checked against the vocabulary.
int64_t read_token_pair(const Node& node, const TokenLookup& lookup) {
  if (!node.value.is_array() || node.value.size() != 2) node.fail_type("a [token, id] pair");
  const std::string token = node.at(0).string();
  const auto id = static_cast<int64_t>(node.at(1).size());
  const auto known = lookup(token);
  if (known && *known != id) {
    node.fail(str("\"", token, "\" has id ", *known, " in the vocabulary, not ", id));
  }
  return id;
}

// TemplateProcessing's single-sequence template: special tokens before and after "$A".
std::unique_ptr<PostProcessor> make_template(const Node& node) {
  node.only_keys({"type", "single", "pair", "special_tokens"});
  const Node specials = node["special_tokens"];
  specials.object();
  const auto ids_of = [&](const std::string& name, const Node& where) {
    if (!specials.value.contains(name)) {
      where.fail(str("special token \"", name, "\" is not in special_tokens"));
    }
    const Node entry = specials[name];
    entry.only_keys({"id", "ids", "tokens"});
    std::vector<int64_t> ids;
    const Node list = entry["ids"];
    if (!list.value.is_array()) list.fail_type("an array");
    for (size_t i = 0; i < list.value.size(); ++i) {
      ids.push_back(static_cast<int64_t>(list.at(i).size()));
    }
    return ids;
  };
  const Node single = node["single"];
  if (!single.value.is_array()) single.fail_type("an array");
  std::vector<int64_t> before;
  std::vector<int64_t> after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.value.size(); ++i) {
    const Node item = single.at(i);
    item.object();
    if (item.has("SpecialToken")) {
      const Node special = item["SpecialToken"];
      special.only_keys({"id", "type_id"});
      const std::vector<int64_t> ids = ids_of(special["id"].string(), special["id"]);
      auto& side = seen_sequence ? after : before;
      side.insert(side.end(), ids.begin(), ids.end());
    } else if (item.has("Sequence")) {
      const Node sequence = item["Sequence"];
      sequence.only_keys({"id", "type_id"});
      if (sequence["id"].string() != "A" || seen_sequence) {
        sequence["id"].fail("a single-sequence template holds sequence \"A\" once");
      }
      seen_sequence = true;
    } else {
      item.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  if (!seen_sequence) single.fail("the template has no sequence \"A\"");
  // The pair template is for two-sequence inputs, which encode() does not take; it is checked
  // for well-formed entries only.
  const Node pair = node["pair"];
  if (!pair.value.is_null() && !pair.value.is_array()) pair.fail_type("an array");
  return std::make_unique<Surround>(std::move(before), std::move(after));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Node& node, const TokenLookup& lookup) {
  if (node.value.is_null()) return nullptr;
  node.object();
  const std::string type = node["type"].string();
  if (type == "TemplateProcessing") return make_template(node);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    if (type == "RobertaProcessing") {
      node.only_keys({"type", "sep", "cls", "trim_offsets", "add_prefix_space"});
    } else {
      node.only_keys({"type", "sep", "cls"});
    }
    return std::make_unique<Surround>(std::vector<int64_t>{read_token_pair(node["cls"], lookup)},
                                      std::vector<int64_t>{read_token_pair(node["sep"], lookup)});
  }
  if (type == "ByteLevel") {
    node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_unique<PostProcessorSequence>(std::vector<std::unique_ptr<PostProcessor>>{});
  }
  if (type == "Sequence") {
    node.only_keys({"type", "processors"});
    const Node list = node["processors"];
    if (!list.value.is_array()) list.fail_type("an array");
    std::vector<std::unique_ptr<PostProcessor>> stages;
    for (size_t i = 0; i < list.value.size(); ++i) {
      if (auto stage = make_post_processor(list.at(i), lookup)) stages.push_back(std::move(stage));
    }
    return std::make_unique<PostProcessorSequence>(std::move(stages));
  }
  node["type"].fail(str("post-processor \"", type,
                        "\" is not supported (supported: TemplateProcessing, RobertaProcessing, "
                        "BertProcessing, ByteLevel, Sequence)"));
}

}  // namespace shardformer::tokenizer::detail
