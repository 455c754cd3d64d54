// generation_config.json: the end-of-text ids and sampling defaults HF generate() takes from
// the model folder; keys that would change decoding in ways not supported are refused by name.
#include "shardformer/generation.h"

#include "json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <nlohmann/json.hpp>

#include <set>

namespace shardformer {

void apply_generation_config_file(const std::filesystem::path& folder, GenerationConfig& config,
                                  const std::set<std::string>& read_by_caller) {
  const std::filesystem::path path = folder / "generation_config.json";
  if (!std::filesystem::exists(path)) return;
  const nlohmann::json json = detail::read_json_file(path);
  const auto fail = [&](const std::string& key, const std::string& what) {
    throw CheckpointError(str(path.string(), ": ", key, ": ", what));
  };
  // Keys that change no token: bookkeeping, outputs the host does not return, cache use.
  static const std::set<std::string> kNoEffect = {"_from_model_config",
                                                  "transformers_version",
                                                  "output_attentions",
                                                  "output_hidden_states",
                                                  "output_scores",
                                                  "output_logits",
                                                  "return_dict_in_generate",
                                                  "use_cache",
                                                  "bos_token_id",
                                                  "cache_implementation",
                                                  "max_length",
                                                  "max_new_tokens"};
  const auto number = [&](const std::string& key) {
    if (!json[key].is_number()) fail(key, "expected a number");
    return json[key].get<double>();
  };
  const auto ids = [&](const std::string& key) {
    std::vector<int64_t> out;
    if (!json[key].is_array()) fail(key, "expected a list of integers");
    for (const auto& id : json[key]) {
      if (!id.is_number_integer()) fail(key, "expected a list of integers");
      out.push_back(id.get<int64_t>());
    }
    return out;
  };
  for (const auto& [key, value] : json.items()) {
    if (value.is_null() || kNoEffect.contains(key) || read_by_caller.contains(key)) continue;
    if (key == "eos_token_id") {
      std::vector<int64_t> ids;
      if (value.is_number_integer()) {
        ids.push_back(value.get<int64_t>());
      } else if (value.is_array()) {
        for (const auto& id : value) {
          if (!id.is_number_integer()) fail(key, "expected an integer or a list of integers");
          ids.push_back(id.get<int64_t>());
        }
      } else {
        fail(key, "expected an integer or a list of integers");
      }
      if (!ids.empty()) {
        config.eos_token_id = ids.front();
        config.more_eos_token_ids.assign(ids.begin() + 1, ids.end());
      }
    } else if (key == "decoder_start_token_id") {
      config.decoder_start_token_id = detail::json_integer(json, path, key);
    } else if (key == "pad_token_id") {
      config.pad_token_id = detail::json_integer(json, path, key);
    } else if (key == "do_sample") {
      if (!value.is_boolean()) fail(key, "expected a boolean");
      config.sampling.do_sample = value.get<bool>();
    } else if (key == "temperature") {
      config.sampling.temperature = number(key);
    } else if (key == "top_k") {
      config.sampling.top_k = detail::json_integer(json, path, key);
    } else if (key == "top_p") {
      config.sampling.top_p = number(key);
    } else if (key == "min_p") {
      config.sampling.min_p = number(key);
    } else if (key == "repetition_penalty") {
      config.sampling.repetition_penalty = number(key);
    } else if (key == "suppress_tokens") {
      config.sampling.suppress_tokens = ids(key);
    } else if (key == "begin_suppress_tokens") {
      config.sampling.begin_suppress_tokens = ids(key);
    } else if ((key == "num_beams" || key == "num_return_sequences") && value == 1) {
      continue;  // HF's defaults
    } else {
      fail(key,
           "is not supported by the host's generation (supported: eos_token_id, "
           "pad_token_id, decoder_start_token_id, do_sample, temperature, top_k, top_p, min_p, "
           "repetition_penalty, suppress_tokens, begin_suppress_tokens); remove it or generate "
           "with HF");
    }
  }
}

}  // namespace shardformer
