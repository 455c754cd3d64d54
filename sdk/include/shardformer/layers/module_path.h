// Modules and build contexts at dotted paths ("attention.self.query") under HF's nesting, so a
// block can take its module names from a table (BERT's layer serves BERT's, RoBERTa's, ERNIE's
// and ALBERT's names) and a model can register a layer two levels down in one call.
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <memory>
#include <string>

namespace shardformer::layers {

// The module at `path` under `root`, made (empty) where missing.
inline std::shared_ptr<torch::nn::Module> module_at(torch::nn::Module& root,
                                                    const std::string& path) {
  torch::nn::Module* parent = &root;
  std::shared_ptr<torch::nn::Module> at;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t dot = std::min(path.find('.', begin), path.size());
    const std::string name = path.substr(begin, dot - begin);
    const auto children = parent->named_children();
    at = children.contains(name) ? children[name] : nullptr;
    if (!at) at = parent->register_module(name, std::make_shared<torch::nn::Module>());
    parent = at.get();
    begin = dot + 1;
  }
  return at;
}

// Registers `module` at `path` under `root`, its parents made as module_at() makes them.
template <typename M>
std::shared_ptr<M> register_at(torch::nn::Module& root, const std::string& path,
                               std::shared_ptr<M> module) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return root.register_module(path, std::move(module));
  return module_at(root, path.substr(0, dot))
      ->register_module(path.substr(dot + 1), std::move(module));
}

inline BuildContext context_at(const BuildContext& ctx, const std::string& path) {
  BuildContext at = ctx;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t dot = std::min(path.find('.', begin), path.size());
    at = at.child(path.substr(begin, dot - begin));
    begin = dot + 1;
  }
  return at;
}

}  // namespace shardformer::layers
