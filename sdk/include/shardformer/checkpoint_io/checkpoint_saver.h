// Saving a model as an HF checkpoint from any parallel layout: every parameter gathered over tp
// with the vocabulary padding removed, each pipeline stage writing its own files into one
// merged index, a tensor several stages hold written once. What HF's save_pretrained writes:
// config.json, model.safetensors or model-0000i-of-0000n.safetensors with
// model.safetensors.index.json, so a saved checkpoint loads at any layout, and in HF.
#pragma once

#include "shardformer/distributed/process_mesh.h"
#include "shardformer/model.h"

#include <ATen/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace shardformer {

// Writes `tensors` (the full HF tensors this rank writes; empty on ranks that write nothing)
// into `dir` as <stem>.safetensors when the job writes one file, else as
// <stem>-0000i-of-0000n.safetensors (each writer's files past max_file_bytes split, numbered
// in rank order) with <stem>.safetensors.index.json (weight_map and total_size), which world
// rank 0 writes. Collective over `world` (null: one rank); every file is synced to disk.
void write_sharded_tensors(const std::filesystem::path& dir, const std::string& stem,
                           const std::map<std::string, at::Tensor>& tensors,
                           const distributed::ProcessGroup* world, int64_t max_file_bytes);

// What this rank writes of `values` (one tensor per parameter of `model`, shaped and split like
// it: the parameters themselves, their gradients or optimizer moments): every tensor gathered
// over tp (collective), kept on tp rank 0 of dp rank 0 of each stage, a shared parameter
// (the policy's, e.g. a tied embedding) on the first stage holding it only.
std::map<std::string, at::Tensor> tensors_to_write(const Model& model,
                                                   const std::map<std::string, at::Tensor>& values,
                                                   const distributed::ProcessMesh* mesh);

// The model's parameters and config.json (copied from `config_json`) as an HF checkpoint in
// `dir`, which must not exist yet. Collective over the mesh.
void save_model(const Model& model, const std::filesystem::path& config_json,
                const std::filesystem::path& dir, const distributed::ProcessMesh* mesh,
                int64_t max_file_bytes = int64_t{5} << 30);
// The same with `weights` (one tensor per parameter, shaped like it: fp32 master weights of a
// mixed-precision model) in place of the parameters.
void save_model(const Model& model, const std::map<std::string, at::Tensor>& weights,
                const std::filesystem::path& config_json, const std::filesystem::path& dir,
                const distributed::ProcessMesh* mesh, int64_t max_file_bytes = int64_t{5} << 30);

}  // namespace shardformer
