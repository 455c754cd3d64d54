// Sharding policies as data: module-path patterns mapped to typed shard styles, plus the
// ShardConfig switches users know from ColossalAI. A plugin declares its policy as a table;
// a job config may append overrides, which win over the plugin's rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer {

namespace distributed {
class ProcessGroup;
}
class PipelineStageManager;

enum class ShardKind {
  kReplicate,     // every rank holds the whole module
  kColumn,        // Linear1D_Col: output features split (Megatron column parallel)
  kRow,           // Linear1D_Row: input features split, output all-reduced
  kVocab,         // VocabParallelEmbedding1D: vocabulary rows split (padded), tied LM head too
  kEmbeddingDim,  // Embedding1D: embedding dimension split, output all-gathered
};

struct ShardStyle {
  ShardKind kind = ShardKind::kReplicate;
  // kColumn: the output is this many equal blocks (3 for a fused QKV); each rank takes its
  // slice of every block, so it holds its own heads' Q, K and V.
  int64_t fused_blocks = 1;
  bool gather_output = false;     // kColumn: all-gather the output (needs fused_blocks == 1)
  bool input_is_parallel = true;  // kRow: false splits a replicated input first
};

// The styles policy tables use most, by name.
namespace styles {
inline constexpr ShardStyle replicate{};
inline constexpr ShardStyle vocab{.kind = ShardKind::kVocab};
inline constexpr ShardStyle column{.kind = ShardKind::kColumn};
inline constexpr ShardStyle row{.kind = ShardKind::kRow};
}  // namespace styles

// How a sequence is split across ranks (ColossalAI's sequence_parallelism_mode).
enum class SequenceParallelMode {
  kSplitGather,  // Megatron SP over the tp group: norms, dropout and residuals on seq / tp tokens;
                 // column inputs all-gathered, row outputs reduce-scattered along the sequence
  kAllToAll,     // DeepSpeed-Ulysses over the sp group: heads split by all-to-all in attention
  kRingAttn,     // ring attention over the sp group, zig-zag sequence chunks
};

struct PolicyRule {
  // Dotted module path; "*" matches one component ("h.*.attn.c_attn"). A pattern matches the
  // whole path or a suffix of it that starts at a component ("wte" matches "transformer.wte").
  std::string pattern;
  ShardStyle style;
};

class Policy {
 public:
  Policy() = default;
  // shared: parameters that several pipeline stages hold a copy of (names or patterns as in
  // rules, e.g. "wte.weight" for a head tied to the input embedding). Their gradients are
  // summed over the stages that hold them.
  // sequence_modes: the sequence-parallel modes the family's forward pass supports.
  explicit Policy(std::vector<PolicyRule> rules, std::vector<std::string> shared = {},
                  std::vector<SequenceParallelMode> sequence_modes = {})
      : rules_(std::move(rules)),
        shared_(std::move(shared)),
        sequence_modes_(std::move(sequence_modes)) {}

  // The style of the module at `path`: the last matching rule's, replicate when none matches.
  ShardStyle style_for(std::string_view path) const;
  // Appends a rule; later rules win, so overrides go last.
  void add(PolicyRule rule) { rules_.push_back(std::move(rule)); }
  const std::vector<PolicyRule>& rules() const { return rules_; }
  const std::vector<std::string>& shared_parameters() const { return shared_; }
  const std::vector<SequenceParallelMode>& sequence_modes() const { return sequence_modes_; }

  static bool matches(std::string_view pattern, std::string_view path);

 private:
  std::vector<PolicyRule> rules_;
  std::vector<std::string> shared_;
  std::vector<SequenceParallelMode> sequence_modes_;
};

// The names of ColossalAI's ShardConfig for what this SDK implements.
struct ShardConfig {
  bool enable_tensor_parallelism = true;      // false: tp ranks hold whole replicas
  int64_t make_vocab_size_divisible_by = 64;  // vocab padded to a multiple of this x tp
  bool parallel_output = true;  // the LM loss uses vocab-parallel cross-entropy on local logits
  uint64_t seed = 1234;         // dropout streams derive from it (same on every rank)
  // Sequence parallelism (training and forward passes; generation runs without it).
  bool enable_sequence_parallelism = false;
  SequenceParallelMode sequence_parallelism_mode = SequenceParallelMode::kSplitGather;
  // split_gather: overlap the all-gather with the column GEMM (forward) and the input
  // gradient's reduce-scatter with the weight-gradient GEMM (backward).
  bool enable_sequence_overlap = false;
};

// What a model is built with on one rank of a tensor- and pipeline-parallel mesh.
struct ParallelContext {
  const distributed::ProcessGroup* tp = nullptr;  // null: one rank
  // The data-parallel group (null: no data parallelism): ranks of one tp x pp replica differ
  // by their coordinate on it, and so do their dropout masks.
  const distributed::ProcessGroup* dp = nullptr;
  // The sequence-parallel axis of all_to_all and ring_attn (null: none).
  const distributed::ProcessGroup* sp = nullptr;
  // null: the whole model on every rank. Otherwise the stage this rank builds (only its
  // layers, embeddings on the first stage, final norm and head on the last).
  const PipelineStageManager* pipeline = nullptr;
  Policy policy;
  ShardConfig config;

  int tp_size() const;
  int tp_rank() const;
  int dp_rank() const;
  bool tensor_parallel() const { return config.enable_tensor_parallelism && tp_size() > 1; }
  // The group a sequence is split over (tp for split_gather, sp otherwise); null when the
  // sequence is not split.
  const distributed::ProcessGroup* sequence_group() const;
};

// The context a family builds with: the job's group and ShardConfig, the family's policy
// followed by the job's override rules (which win). One rank without tensor parallelism when
// job is null. Throws ConfigError when the job asks for a sequence-parallel mode the family
// does not support or its layout cannot run (split_gather without tp, the others without sp).
ParallelContext with_family_policy(const ParallelContext* job, const Policy& family_policy);

const char* shard_kind_name(ShardKind kind);
// "replicate", "column", "row", "vocab", "embedding_dim"; throws ConfigError otherwise.
ShardKind parse_shard_kind(std::string_view name);
// "split_gather", "all_to_all", "ring_attn"; parse throws ConfigError otherwise.
const char* sequence_mode_name(SequenceParallelMode mode);
// Throws ConfigError when the context's sequence parallelism cannot run on its layout
// (split_gather without tp, all_to_all / ring_attn without sp, sp without the switch, overlap
// outside split_gather).
void check_sequence_layout(const ParallelContext& context);
SequenceParallelMode parse_sequence_mode(std::string_view name);

}  // namespace shardformer
