// The unused-checkpoint check: tensors no rank loaded or skipped, config.json keys no rank
// read, unioned over the ranks with one all-reduce.
#include "shardformer/checkpoint_io/checkpoint_usage.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <string_view>

namespace shardformer {
namespace {

// Keys of HF's PretrainedConfig (and of the tools that write checkpoints) that never change
// what a model computes, by the reason they cannot:
constexpr std::string_view kHarmlessKeys[] = {
    // bookkeeping: where the checkpoint came from and what wrote it
    "_name_or_path", "_model_name_or_path", "_commit_hash", "transformers_version", "architectures",
    "model_type", "auto_map", "transformers.js_config", "is_llama_config", "finetuning_task",
    "task_specific_params", "tokenizer_class", "prefix", "id2label", "label2id",
    // the dtype of the stored weights (the job config's model.dtype decides the compute dtype)
    "dtype", "torch_dtype", "use_bfloat16",
    // what HF's forward() returns, not what it computes
    "output_attentions", "output_hidden_states", "return_dict", "use_return_dict", "torchscript",
    "output_past", "use_cache", "xla_device",
    // initialisation and training-only switches of HF's Python code
    "initializer_range", "initializer_factor", "gradient_checkpointing", "tf_legacy_loss",
    "chunk_size_feed_forward", "_attn_implementation", "_attn_implementation_autoset",
    "_attn_implementation_internal", "attn_implementation",
    // special token ids: tokenizer facts; the jobs read eos and pad themselves
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "unk_token_id", "mask_token_id",
    "cls_token_id", "decoder_start_token_id",
    // generation defaults of HF's generate(): a generate job's own keys decide instead
    "max_length", "min_length", "max_new_tokens", "min_new_tokens", "do_sample", "early_stopping",
    "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "epsilon_cutoff", "eta_cutoff", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "forced_decoder_ids", "renormalize_logits"};

// Switches of PretrainedConfig that change the model when set; at HF's default (false, null,
// empty) they change nothing, so a model that never reads them still computes the same.
// rope_interleaved: nanotron's exports carry it; HF's Llama never reads it, and only false means
// the rotation HF (and this model) applies.
constexpr std::string_view kSwitchKeys[] = {
    "is_decoder",   "add_cross_attention",         "is_encoder_decoder", "tie_encoder_decoder",
    "pruned_heads", "cross_attention_hidden_size", "problem_type",       "rope_interleaved"};

// Marks, for each name, whether it was used on any rank of `world`.
std::vector<bool> used_anywhere(const std::vector<bool>& here,
                                const distributed::ProcessGroup* world) {
  if (world == nullptr || world->size() == 1 || here.empty()) return here;
  at::Tensor flags = at::empty({static_cast<int64_t>(here.size())}, at::kInt);
  auto a = flags.accessor<int32_t, 1>();
  for (size_t i = 0; i < here.size(); ++i) a[i] = here[i] ? 1 : 0;
  world->all_reduce_(flags, distributed::ReduceOp::kMax);
  std::vector<bool> result(here.size());
  for (size_t i = 0; i < here.size(); ++i) result[i] = a[i] != 0;
  return result;
}

std::string listing(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) shown.push_back("'" + names[i] + "'");
  return str(join(shown, ", "),
             names.size() > kShown ? str(" and ", names.size() - kShown, " more") : "");
}

}  // namespace

bool harmless_config_key(const HFConfig& config, const std::string& key) {
  for (std::string_view known : kHarmlessKeys) {
    if (known == key) return true;
  }
  for (std::string_view known : kSwitchKeys) {
    if (known == key) return config.holds_default(key);
  }
  return false;
}

UnusedItems find_unused(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                        const distributed::ProcessGroup* world) {
  const std::vector<std::string> tensors = checkpoint.tensor_names();  // sorted: same order
  const std::vector<std::string> keys = checkpoint.config().keys();    // file order everywhere
  std::vector<bool> here;
  for (const std::string& name : tensors) {
    here.push_back(usage.loaded.count(name) > 0 || usage.skipped.count(name) > 0);
  }
  for (const std::string& key : keys) {
    here.push_back(harmless_config_key(checkpoint.config(), key) ||
                   checkpoint.config().was_read(key));
  }
  const std::vector<bool> used = used_anywhere(here, world);
  UnusedItems unused;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!used[i]) unused.tensors.push_back(tensors[i]);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!used[tensors.size() + i]) unused.config_keys.push_back(keys[i]);
  }
  return unused;
}

void check_checkpoint_usage(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                            const distributed::ProcessGroup* world, UsagePolicy policy) {
  for (const auto& [name, why] : usage.skipped) {
    log::debug(str("checkpoint tensor '", name, "' left unused: ", why));
  }
  const UnusedItems unused = find_unused(checkpoint, usage, world);
  std::vector<std::string> errors, warnings;
  if (!unused.tensors.empty()) {
    (policy.tensors == UnusedAction::kError ? errors : warnings)
        .push_back(str(unused.tensors.size(),
                       " tensor(s) that no module of the model reads: ", listing(unused.tensors)));
  }
  if (!unused.config_keys.empty()) {
    (policy.config_keys == UnusedAction::kError ? errors : warnings)
        .push_back(str(checkpoint.config().path().filename().string(), " has ",
                       unused.config_keys.size(),
                       " key(s) that the model does not implement: ", listing(unused.config_keys)));
  }
  for (const std::string& w : warnings) {
    log::warn(str(checkpoint.directory().string(), ": ", w, " (ignored as the job config allows)"));
  }
  if (!errors.empty()) {
    throw CheckpointError(str(checkpoint.directory().string(), ": ", join(errors, "; "),
                              ". The model would silently differ from the checkpoint; set "
                              "[model] unused_tensors / unused_config_keys = \"warn\" in the "
                              "job config to run anyway"));
  }
}

}  // namespace shardformer
