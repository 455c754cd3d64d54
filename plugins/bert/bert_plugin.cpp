// The BERT plugin: its policy table and factory.
#include "bert_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::bert {

// Megatron's split: query / key / value and intermediate column-parallel, the attention output
// and output dense row-parallel (two all-reduces per layer); the word embeddings and the MLM
// decoder (tied to them or not) with its bias vocab-parallel. Position and type embeddings,
// norms, the pooler, the MLM transform and the classifier stay replicated.
Policy bert_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"embeddings.word_embeddings", vocab},
          {"cls.predictions.decoder", vocab},  // the untied decoder
          {"lm_head.decoder", vocab},          // RoBERTa's
          {"encoder.layer.*.attention.self.query", column},
          {"encoder.layer.*.attention.self.key", column},
          {"encoder.layer.*.attention.self.value", column},
          {"encoder.layer.*.attention.output.dense", row},
          {"encoder.layer.*.intermediate.dense", column},
          {"encoder.layer.*.output.dense", row},
          // ALBERT's shared layers, split once
          {"predictions.decoder", vocab},
          {"encoder.albert_layer_groups.*.albert_layers.*.attention.query", column},
          {"encoder.albert_layer_groups.*.albert_layers.*.attention.key", column},
          {"encoder.albert_layer_groups.*.albert_layers.*.attention.value", column},
          {"encoder.albert_layer_groups.*.albert_layers.*.attention.dense", row},
          {"encoder.albert_layer_groups.*.albert_layers.*.ffn", column},
          {"encoder.albert_layer_groups.*.albert_layers.*.ffn_output", row},
      },
      // when tied, held by the first pipeline stage (embedding) and the last (MLM decoder)
      tied ? std::vector<std::string>{"embeddings.word_embeddings.weight"}
           : std::vector<std::string>{});
}

class BertFamily : public ModelFamily {
 public:
  std::string name() const override { return "bert"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Google BERT and ALBERT, Facebook RoBERTa, Baidu ERNIE (HF modeling_bert, "
           "modeling_albert, modeling_roberta, modeling_ernie)";
  }
  std::vector<std::string> architectures() const override {
    return {"BertModel",    "BertForMaskedLM",    "BertForSequenceClassification",
            "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
            "ErnieModel",   "ErnieForMaskedLM",   "ErnieForSequenceClassification",
            "AlbertModel",  "AlbertForMaskedLM",  "AlbertForSequenceClassification"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const BertConfig config = BertConfig::from(args.checkpoint->config());
    const ModelBuilder builder(args, bert_policy(config.tie_word_embeddings), config.base_name());
    const BuildContext& ctx = builder.context();
    if (!args.architecture.starts_with(config.class_prefix())) {
      throw CheckpointError(args.checkpoint->config().path().string() + ": architecture " +
                            args.architecture + " does not match model_type " +
                            args.checkpoint->config().model_type());
    }
    if (args.architecture.ends_with("ForMaskedLM")) {
      return builder.finish(std::make_shared<BertForMaskedLM>(ctx, config));
    }
    if (args.architecture.ends_with("ForSequenceClassification")) {
      return builder.finish(std::make_shared<BertForSequenceClassification>(ctx, config));
    }
    ctx.skip_module(config.roberta  ? "lm_head"
                    : config.albert ? "predictions"
                                    : "cls",
                    "the base model has no pre-training heads");
    ctx.skip_module("sop_classifier", "ALBERT's sentence-order head of pre-training");
    ctx.skip_module("classifier", "the base model has no classifier");
    return builder.finish(std::make_shared<BertModel>(ctx, config, true, false));
  }
};

}  // namespace shardformer::bert

SHARDFORMER_PLUGIN(shardformer::bert::BertFamily)
