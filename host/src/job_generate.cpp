// The generate job: prompts as token ids, text or a chat conversation (rendered by the model's
// chat template), greedy or sampled decoding with a KV cache; rank 0 streams the text as it is
// decoded and writes the ids and texts to a JSON lines file.
#include "job_modes.h"
#include "output_file.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/cpu_products.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/chat_template.h"
#include "shardformer/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;
using tokenizer::Tokenizer;

// The prompts, lengths and special token ids must fit the model: a value from the job config
// fails naming its key, one from the checkpoint's config.json naming that file.
void check_generate_inputs(const JobConfig& config, const Session& session,
                           const std::vector<std::vector<int64_t>>& prompts,
                           const GenerationConfig& generation) {
  const GenerateSection& g = config.generate;
  const ModelShape shape = session.model().shape();
  check_token_ids(config, prompts, "generate.prompts", shape.vocab_size);
  const size_t longest = longest_sequence(prompts);
  const auto length = static_cast<int64_t>(prompts[longest].size());
  if (shape.max_positions > 0 && length + g.max_new_tokens > shape.max_positions) {
    const std::string prompt = !g.messages.empty() ? "generate.messages (rendered)"
                               : g.prompts.empty() && g.texts.size() == 1
                                   ? "generate.prompt"
                                   : str("generate.prompts[", longest, "]");
    throw ConfigError(str(config.source.string(), ": generate.max_new_tokens: ", prompt, " (",
                          length, " tokens) + max_new_tokens (", g.max_new_tokens,
                          ") = ", length + g.max_new_tokens, " exceeds the model's ",
                          shape.max_positions, " positions"));
  }
  const auto check_id = [&](const char* name, int64_t id, bool from_job_config) {
    if (id >= 0 && id < shape.vocab_size) return;
    const std::string outside =
        str(" = ", id, " is outside the model's vocabulary [0, ", shape.vocab_size, ")");
    if (from_job_config) {
      throw ConfigError(str(config.source.string(), ": generate.", name, outside));
    }
    // generation_config.json, where it names the id, takes precedence over config.json.
    const fs::path generation_file = session.checkpoint().directory() / "generation_config.json";
    const bool from_generation_file =
        fs::exists(generation_file) &&
        nlohmann::json::parse(std::ifstream(generation_file), nullptr, false).contains(name);
    const fs::path file =
        from_generation_file ? generation_file : session.checkpoint().config().path();
    throw CheckpointError(str(file.string(), ": ", name, outside, " (set generate.", name,
                              " in the job config to override it)"));
  };
  if (generation.eos_token_id) {
    check_id("eos_token_id", *generation.eos_token_id, g.eos_token_id.has_value());
  }
  for (int64_t id : generation.more_eos_token_ids) check_id("eos_token_id", id, false);
  check_id("pad_token_id", generation.pad_token_id, g.pad_token_id.has_value());
}

// The job's sampling keys over the folder's generation_config.json.
void apply_sampling(const GenerateSection& g, SamplingConfig& s) {
  s.do_sample = g.do_sample.value_or(s.do_sample);
  s.temperature = g.temperature.value_or(s.temperature);
  s.top_k = g.top_k.value_or(s.top_k);
  s.top_p = g.top_p.value_or(s.top_p);
  if (g.min_p) s.min_p = g.min_p;
  s.repetition_penalty = g.repetition_penalty.value_or(s.repetition_penalty);
  s.seed = static_cast<uint64_t>(g.seed);
}

// The conversation rendered as transformers' apply_chat_template(add_generation_prompt=True).
std::string render_chat(const JobConfig& config, const Tokenizer& tok) {
  const tokenizer::TokenizerConfig& tc = tok.config();
  if (!tc.chat_template) {
    throw ConfigError(str(config.source.string(), ": generate.messages: the model folder '",
                          tok.source().parent_path().string(),
                          "' has no chat template (tokenizer_config.json chat_template or "
                          "chat_template.jinja)"));
  }
  const auto chat = tokenizer::ChatTemplate::parse(
      *tc.chat_template, str(tc.chat_template_source.string(), ": chat_template"));
  nlohmann::ordered_json context = {{"messages", nlohmann::ordered_json::array()},
                                    {"add_generation_prompt", true}};
  for (const ChatMessage& m : config.generate.messages) {
    context["messages"].push_back({{"role", m.role}, {"content", m.content}});
  }
  const std::pair<const char*, const std::optional<std::string>*> specials[] = {
      {"bos_token", &tc.bos_token},
      {"eos_token", &tc.eos_token},
      {"pad_token", &tc.pad_token},
      {"unk_token", &tc.unk_token}};
  for (const auto& [name, value] : specials) {
    if (*value) context[name] = **value;
  }
  return chat.render(context);
}

// JSON lines, written to a temporary file and renamed: one object per prompt.
void write_output(const fs::path& path, const std::vector<std::string>& prompt_texts,
                  const std::vector<std::vector<int64_t>>& prompts, const GenerationResult& result,
                  const std::optional<Tokenizer>& tok) {
  OutputFile file(path);
  for (size_t i = 0; i < prompts.size(); ++i) {
    nlohmann::ordered_json line;
    if (i < prompt_texts.size()) line["prompt"] = prompt_texts[i];
    line["prompt_ids"] = prompts[i];
    line["ids"] = result.new_tokens[i];
    if (tok) line["text"] = tok->decode(result.new_tokens[i]);
    file.write_line(line.dump());
  }
  file.commit();
}

}  // namespace

void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const GenerateSection& g = config.generate;
  GenerationConfig generation =
      session.generation_config(g.max_new_tokens, g.eos_token_id, g.pad_token_id);
  apply_sampling(g, generation.sampling);

  // The tokenizer of the model folder, when there is one (tiny test models have none).
  const fs::path folder = session.checkpoint().directory();
  std::optional<Tokenizer> tok;
  if (fs::exists(folder / "tokenizer.json")) tok = Tokenizer::from_file(folder);
  if (!tok && (!g.texts.empty() || !g.messages.empty() || !g.stop.empty())) {
    throw ConfigError(str(config.source.string(),
                          ": generate: ", g.stop.empty() ? "text prompts" : "stop strings",
                          " need a tokenizer, and '", folder.string(), "' has no tokenizer.json"));
  }
  std::vector<std::string> prompt_texts = g.texts;
  std::vector<std::vector<int64_t>> prompts = g.prompts;
  if (!g.messages.empty()) {
    prompt_texts = {render_chat(config, *tok)};
    prompts = {tok->encode(prompt_texts.front(), /*add_special_tokens=*/false)};
  } else if (!g.texts.empty()) {
    for (const std::string& text : g.texts) prompts.push_back(tok->encode(text));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) {
      throw ConfigError(
          str(config.source.string(), ": generate.prompts[", i, "] has no tokens once tokenized"));
    }
  }
  check_generate_inputs(config, session, prompts, generation);
  if (!g.output.empty()) check_output_path(config, g.output, "generate.output");

  // Streaming (one prompt, rank 0) and stop strings, after every step on every rank.
  const bool stream = writer && tok && g.stream && prompts.size() == 1;
  std::optional<tokenizer::DecodeStream> streamer;
  if (stream) streamer.emplace(*tok);
  std::vector<std::vector<int64_t>> so_far(prompts.size());
  std::vector<bool> done(prompts.size(), false);
  const auto start = std::chrono::steady_clock::now();
  double first_token = -1;
  generation.on_step = [&](const std::vector<int64_t>& tokens, std::vector<bool>& stop) {
    if (first_token < 0) first_token = seconds_since(start);
    for (size_t row = 0; row < tokens.size(); ++row) {
      if (done[row]) continue;
      so_far[row].push_back(tokens[row]);
      if (row == 0 && streamer) out << streamer->step(tokens[row]) << std::flush;
      if (!g.stop.empty()) {
        const std::string text = tok->decode(so_far[row]);
        for (const std::string& s : g.stop) {
          if (text.find(s) != std::string::npos) stop[row] = true;
        }
      }
      done[row] = stop[row] || generation.is_eos(tokens[row]);
    }
  };
  const GenerationResult result = session.generate(prompts, generation);
  const double elapsed = seconds_since(start);
  int64_t produced = 0;
  for (size_t i = 0; i < result.new_tokens.size(); ++i) {
    produced += static_cast<int64_t>(result.new_tokens[i].size());
    if (!writer) continue;
    if (stream) {
      out << std::endl;  // the answer's line ends before the log lines that follow
    } else {
      out << "generated[" << i << "]: " << join(result.new_tokens[i], " ") << "\n";
      if (tok) out << "text[" << i << "]: " << tok->decode(result.new_tokens[i]) << "\n";
    }
  }
  if (writer && !g.output.empty()) write_output(g.output, prompt_texts, prompts, result, tok);
  log::info(str("generate: ", produced, " tokens for ", prompts.size(), " prompts in ", elapsed,
                " s (", produced / std::max(elapsed, 1e-9), " tokens/s; first token after ",
                first_token, " s)"));
  log::debug(str("few-row products' weight prefetch: ", runtime::skinny_products_prefetch()));
}

}  // namespace shardformer::host
