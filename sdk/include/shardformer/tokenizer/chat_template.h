// ChatTemplate: renders a HF chat template (Jinja) as transformers' apply_chat_template does,
// with jinja2's sandboxed environment, trim_blocks, lstrip_blocks and loop controls.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace shardformer::tokenizer {

namespace detail {
struct TemplateBody;
}  // namespace detail

class ChatTemplate {
 public:
  // Parses `source`; `origin` names where it came from, for errors (for example
  // ".../tokenizer_config.json: chat_template"). Throws ConfigError on a syntax error or on a
  // statement, filter or test the renderer does not support, naming the line and column.
  static ChatTemplate parse(std::string source, std::string origin);

  // Renders with the variables of `context`, for example {"messages": [...],
  // "add_generation_prompt": true, "bos_token": "<s>", "tools": [...]}. As in transformers,
  // `tools` and `documents` default to none, `add_generation_prompt` to false, and a message's
  // reasoning given as `thinking` or `reasoning` is also passed as `reasoning_content` (and the
  // other way round for `thinking`). Object keys keep their order (tojson prints them so).
  // Throws ConfigError for a runtime error, including the template's own raise_exception().
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& origin() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const detail::TemplateBody> body);
  std::shared_ptr<const detail::TemplateBody> body_;
};

}  // namespace shardformer::tokenizer
