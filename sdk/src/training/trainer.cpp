// The training step over a Session, ZeRO-1 sharding, and atomic checkpoints with their state.
#include "shardformer/training/trainer.h"

#include "../json_file.h"
#include "shardformer/checkpoint_io/checkpoint_saver.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/losses.h"
#include "shardformer/parallel/tensor_shard.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>

namespace shardformer::training {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStateFolder = "training_state";
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kStateFormat = "shardformer-training-state";
constexpr int kStateVersion = 1;

const distributed::ProcessGroup* group_or_null(
    const distributed::ProcessMesh* mesh,
    const distributed::ProcessGroup& (distributed::ProcessMesh::*axis)() const) {
  return mesh != nullptr ? &(mesh->*axis)() : nullptr;
}

// Rows [first, first + count) of every tensor the batch has.
Batch rows_of(const Batch& batch, int64_t first, int64_t count) {
  const auto rows = [&](const at::Tensor& t) {
    return t.defined() ? t.narrow(0, first, count) : at::Tensor();
  };
  return {rows(batch.input_ids), rows(batch.attention_mask), rows(batch.labels),
          rows(batch.pixel_values)};
}

// The model's inputs of a batch: token ids with their mask, or images.
ForwardInputs inputs_of(const Batch& b) {
  return ForwardInputs{
      .input_ids = b.input_ids, .attention_mask = b.attention_mask, .pixel_values = b.pixel_values};
}

// This rank's index among the data-parallel replicas and its share of a global batch.
struct DpShare {
  int64_t rank = 0, samples = 0;
};

DpShare dp_share(const distributed::ProcessMesh* mesh, int64_t global_batch) {
  if (mesh == nullptr) return {0, global_batch};
  return {mesh->coordinate().dp, global_batch / mesh->shape().dp};
}

}  // namespace

Trainer::Trainer(Session& session, const TokenDataset& data, TrainOptions options)
    : session_(&session),
      data_(&data),
      options_(options),
      stream_(data.num_train(), data.options().seed, data.options().shuffle),
      scaler_(options.loss_scale, options.precision == Precision::kFloat16) {
  const distributed::ProcessMesh* mesh = session.mesh();
  const int64_t dp = mesh != nullptr ? mesh->shape().dp : 1;
  if (options_.global_batch_size % dp != 0) {
    throw ConfigError(str("train.global_batch_size = ", options_.global_batch_size,
                          " does not divide over dp_size = ", dp));
  }
  const int64_t share = options_.global_batch_size / dp;
  if (options_.micro_batch_size > 0 && share % options_.micro_batch_size != 0) {
    throw ConfigError(str("train.micro_batch_size = ", options_.micro_batch_size,
                          " does not divide a data-parallel rank's share of ", share, " samples"));
  }
  if (options_.zero_stage != 0 && options_.zero_stage != 1) {
    throw ConfigError(str("train.zero_stage = ", options_.zero_stage, " (0 or 1)"));
  }
  if (session.model().task() == ModelTask::kBase) {
    throw ConfigError(str(session.architecture(), " is a base model: it has no loss to train"));
  }
  const bool mlm_data = data.options().mlm_probability > 0.0;
  const ModelTask task = session.model().task();
  if ((task == ModelTask::kSeq2SeqLM) != data.has_targets()) {
    throw ConfigError(str(session.architecture(),
                          data.has_targets()
                              ? ": the data's lines are source / target pairs, which serve "
                                "encoder-decoder models"
                              : " is an encoder-decoder model: its data needs source / target "
                                "pairs ({\"source\", \"target\"} text or {\"input_ids\", "
                                "\"labels\"} on every line of a .jsonl file)"));
  }
  if (task == ModelTask::kMaskedLM && !mlm_data) {
    throw ConfigError(str(session.architecture(),
                          " is a masked-LM model: its data needs data.mlm_probability and "
                          "data.mask_token_id"));
  }
  if (task == ModelTask::kCausalLM && mlm_data) {
    throw ConfigError(str(session.architecture(),
                          " predicts the next token: data.mlm_probability "
                          "serves masked-LM models"));
  }
  if ((task == ModelTask::kSequenceClassification) != data.has_class_labels()) {
    throw ConfigError(str(session.architecture(),
                          data.has_class_labels()
                              ? ": the data's lines carry \"label\"s, which serve classification "
                                "models"
                              : " is a classification model: its data needs a \"label\" on "
                                "every line of a .jsonl file (or images in a folder per class)"));
  }
  options_.schedule.total_steps = options_.steps;
  session.model().set_recompute(options_.recompute);
  norm_ = std::make_unique<GradientNorm>(session.model(),
                                         group_or_null(mesh, &distributed::ProcessMesh::tp),
                                         group_or_null(mesh, &distributed::ProcessMesh::pp));
  // ZeRO-1: parameters dealt to dp ranks by size, largest first, to the least loaded rank.
  const auto named = session.model().named_parameters();
  std::vector<std::pair<int64_t, std::string>> sizes;
  for (const auto& item : named) sizes.emplace_back(item.value().numel(), item.key());
  std::stable_sort(sizes.begin(), sizes.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int64_t> load(static_cast<size_t>(dp), 0);
  for (const auto& [numel, name] : sizes) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner_[name] = options_.zero_stage == 1 ? static_cast<int>(least) : -1;
    load[static_cast<size_t>(least)] += numel;
  }
  const std::set<std::string> owned = owned_names();
  if (options_.precision != Precision::kFloat32) {
    masters_ =
        std::make_unique<MasterWeights>(session.model(), owned, compute_dtype(options_.precision));
    optimizer_ = std::make_unique<AdamW>(masters_->params(), options_.adam);
  } else {
    std::vector<AdamW::Param> params;
    for (const auto& item : session.model().named_parameters()) {
      if (owned.contains(item.key())) params.push_back({item.key(), item.value()});
    }
    optimizer_ = std::make_unique<AdamW>(std::move(params), options_.adam);
  }
  if (dp > 1 && session.stages() == nullptr) {  // after the cast: buckets go by dtype
    reducer_ =
        std::make_unique<OverlappedReducer>(session.model(), mesh->dp(), options_.bucket_bytes);
  }
}

std::set<std::string> Trainer::owned_names() const {
  const distributed::ProcessMesh* mesh = session_->mesh();
  const int dp_rank = mesh != nullptr ? static_cast<int>(mesh->coordinate().dp) : 0;
  std::set<std::string> names;
  for (const auto& [name, owner] : owner_) {
    if (owner < 0 || owner == dp_rank) names.insert(name);
  }
  return names;
}

std::pair<double, int64_t> Trainer::forward_backward(const Batch& share, int64_t global_tokens,
                                                     double loss_scale) {
  Model& model = session_->model();
  const int64_t local_tokens = counted_labels(model.task(), share.labels);
  if (session_->stages() != nullptr) {  // the pipeline micro-batches the share itself
    const double weight = static_cast<double>(local_tokens) / static_cast<double>(global_tokens);
    const at::Tensor loss =
        session_->train_step(inputs_of(share), share.labels, weight * loss_scale);
    return {loss.defined() ? loss.item<double>() * weight : 0.0, local_tokens};
  }
  const int64_t rows = share.labels.size(0);
  const int64_t micro = options_.micro_batch_size > 0 ? options_.micro_batch_size : rows;
  double loss_sum = 0;
  for (int64_t first = 0; first < rows; first += micro) {
    if (reducer_ != nullptr && first + micro >= rows) reducer_->arm();  // the last micro-batch
    const Batch mb = rows_of(share, first, micro);
    const int64_t tokens = counted_labels(model.task(), mb.labels);
    if (tokens == 0) continue;
    const double weight = static_cast<double>(tokens) / static_cast<double>(global_tokens);
    loss_sum +=
        session_->train_step(inputs_of(mb), mb.labels, weight * loss_scale).item<double>() * weight;
  }
  return {loss_sum, local_tokens};
}

void Trainer::broadcast_updated_parameters() {
  const distributed::ProcessMesh* mesh = session_->mesh();
  if (options_.zero_stage != 1 || mesh == nullptr || mesh->shape().dp == 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& item : session_->model().named_parameters()) {
    at::Tensor data = item.value().detach();
    mesh->dp().broadcast_(data, owner_.at(item.key()));
  }
}

StepMetrics Trainer::step() {
  const auto start = std::chrono::steady_clock::now();
  const distributed::ProcessMesh* mesh = session_->mesh();
  Model& model = session_->model();
  model.train();
  const auto [dp_rank, share] = dp_share(mesh, options_.global_batch_size);
  const std::vector<int64_t> samples = stream_.next(options_.global_batch_size);
  const Batch batch = data_->train_batch(
      {samples.begin() + dp_rank * share, samples.begin() + (dp_rank + 1) * share});

  // Labelled tokens of the whole global batch: each rank's loss is weighted by its share.
  at::Tensor tokens = at::full({1}, counted_labels(model.task(), batch.labels), at::kLong);
  if (mesh != nullptr) mesh->dp().all_reduce_(tokens);
  const int64_t global_tokens = tokens.item<int64_t>();
  if (global_tokens == 0) throw Error("training: every label of the global batch is ignored");
  const double loss_scale = scaler_.scale();
  const double loss_part = forward_backward(batch, global_tokens, loss_scale).first;

  // The step's loss on every rank: summed over dp, from the last pipeline stage.
  at::Tensor loss = at::full({1}, loss_part, at::kDouble);
  if (mesh != nullptr) {
    mesh->dp().all_reduce_(loss);
    mesh->pp().broadcast_(loss, static_cast<int>(mesh->shape().pp - 1));
    // The dp sums first: finish() writes its buckets over the gradients, the tp sums after.
    if (reducer_ != nullptr) {
      reducer_->finish();
    } else {
      all_reduce_gradients(model, mesh->dp(), options_.bucket_bytes);
    }
    sync_sequence_gradients(model);
    sync_partial_gradients(model, mesh->tp());
  }
  // The norm of the unscaled gradients; inf or nan (fp16 overflow) skips the update.
  const double grad_norm = norm_->compute(model) / loss_scale;
  const bool applied = scaler_.update(std::isfinite(grad_norm));
  if (!applied && !scaler_.enabled()) {
    throw Error(str("training: the gradient norm of step ", steps_ + 1, " is ", grad_norm));
  }
  const double lr = options_.adam.lr * options_.schedule.factor(steps_);
  if (applied) {
    const double max = options_.max_grad_norm;
    update(max > 0 ? std::min(1.0, max / (grad_norm + 1e-6)) : 1.0, lr, loss_scale);
  }
  for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
  ++steps_;
  return StepMetrics{
      .step = steps_,
      .loss = loss.item<double>(),
      .lr = lr,
      .grad_norm = grad_norm,
      .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      .tokens = global_tokens,
      .skipped = !applied,
      .loss_scale = loss_scale};
}

void Trainer::update(double coef, double lr, double loss_scale) {
  Model& model = session_->model();
  if (masters_ != nullptr) {
    masters_->take_gradients(model, coef / loss_scale);
    optimizer_->step(lr);
    masters_->copy_to_model(model);
  } else {
    if (options_.max_grad_norm > 0) {  // as clip_grad_norm_: an fp32 factor, applied even if 1
      torch::NoGradGuard no_grad;
      const at::Tensor factor = at::full({}, coef, at::kFloat);
      for (const auto& p : model.parameters()) {
        if (p.grad().defined()) p.grad().mul_(factor);
      }
    }
    optimizer_->step(lr);
  }
  broadcast_updated_parameters();
}

std::map<std::string, at::Tensor> Trainer::full_precision_weights() const {
  const distributed::ProcessMesh* mesh = session_->mesh();
  std::map<std::string, at::Tensor> weights;
  for (const auto& item : session_->model().named_parameters()) {
    if (masters_ == nullptr) {
      weights.emplace(item.key(), item.value().detach());
      continue;
    }
    at::Tensor master = masters_->find(item.key());
    const int owner = owner_.at(item.key());
    if (mesh != nullptr && owner >= 0) {
      if (!master.defined()) master = at::empty(item.value().sizes(), at::kFloat);
      mesh->dp().broadcast_(master, owner);
    }
    weights.emplace(item.key(), master);
  }
  return weights;
}

double Trainer::evaluate() {
  const distributed::ProcessMesh* mesh = session_->mesh();
  Model& model = session_->model();
  model.eval();
  const auto [dp_rank, share] = dp_share(mesh, options_.global_batch_size);
  const int64_t available = data_->num_eval();
  if (available < options_.global_batch_size) {
    throw ConfigError(str("evaluation needs ", options_.global_batch_size,
                          " held-out samples (a global batch); data.eval_fraction leaves ",
                          available));
  }
  double loss_sum = 0, token_sum = 0;
  const int64_t batches = std::min(options_.eval_batches, available / options_.global_batch_size);
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> indices(static_cast<size_t>(share));
    std::iota(indices.begin(), indices.end(), b * options_.global_batch_size + dp_rank * share);
    const Batch batch = data_->eval_batch(indices);
    const int64_t tokens = counted_labels(model.task(), batch.labels);
    const at::Tensor loss = session_->loss(inputs_of(batch), batch.labels);
    loss_sum += loss.defined() ? loss.item<double>() * static_cast<double>(tokens) : 0.0;
    token_sum += static_cast<double>(tokens);
  }
  at::Tensor sums = at::tensor({loss_sum, token_sum}, at::kDouble);
  if (mesh != nullptr) {
    mesh->dp().all_reduce_(sums);
    mesh->pp().broadcast_(sums, static_cast<int>(mesh->shape().pp - 1));
  }
  model.train();
  return sums[0].item<double>() / std::max(1.0, sums[1].item<double>());
}

void Trainer::save(const fs::path& dir) const {
  const distributed::ProcessMesh* mesh = session_->mesh();
  const distributed::ProcessGroup* world = mesh != nullptr ? &mesh->world() : nullptr;
  const int rank = mesh != nullptr ? mesh->rank() : 0;
  if (fs::exists(dir)) throw Error(str(dir.string(), ": a checkpoint of that name exists"));
  fs::path temporary = dir;
  temporary += ".incomplete";
  if (rank == 0) fs::remove_all(temporary);
  if (world != nullptr) world->barrier();
  const Model& model = session_->model();
  save_model(model, full_precision_weights(), session_->checkpoint().config().path(), temporary,
             mesh);

  // Optimizer moments in HF layout: from the dp rank updating each parameter, gathered over tp.
  std::map<std::string, at::Tensor> moments;
  for (const auto& item : model.named_parameters()) {
    // fp32 whatever the model computes in (mixed precision keeps fp32 moments)
    const auto fp32 = item.value().options().dtype(at::kFloat);
    at::Tensor exp_avg = at::zeros(item.value().sizes(), fp32),
               exp_avg_sq = at::zeros(item.value().sizes(), fp32);
    const auto [avg, avg_sq] = optimizer_->moments(item.key());
    if (avg.defined()) {
      exp_avg.copy_(avg);
      exp_avg_sq.copy_(avg_sq);
    }
    const int owner = owner_.at(item.key());
    if (mesh != nullptr && owner >= 0) {
      mesh->dp().broadcast_(exp_avg, owner);
      mesh->dp().broadcast_(exp_avg_sq, owner);
    }
    moments.emplace("exp_avg." + item.key(), exp_avg);
    moments.emplace("exp_avg_sq." + item.key(), exp_avg_sq);
  }
  const fs::path state = temporary / kStateFolder;
  std::map<std::string, at::Tensor> written;
  for (const char* kind : {"exp_avg.", "exp_avg_sq."}) {
    std::map<std::string, at::Tensor> values;
    for (const auto& item : model.named_parameters()) {
      values.emplace(item.key(), moments.at(kind + item.key()));
    }
    for (auto& [name, tensor] : tensors_to_write(model, values, mesh)) {
      written.emplace(kind + name, std::move(tensor));
    }
  }
  write_sharded_tensors(state, "optimizer", written, world, int64_t{5} << 30);
  fs::create_directories(state / "rng");
  std::map<std::string, at::Tensor> rng;
  for (auto& [name, value] : layers::dropout_rng_states(model)) rng.emplace(name, value);
  if (!rng.empty()) save_safetensors(state / "rng" / str("rank-", rank, ".safetensors"), rng);
  if (world != nullptr) world->barrier();
  if (rank == 0) {
    const distributed::MeshShape shape = mesh != nullptr ? mesh->shape() : distributed::MeshShape{};
    const nlohmann::ordered_json json = {
        {"format", kStateFormat},
        {"version", kStateVersion},
        {"step", steps_},
        {"data_position", stream_.position()},
        {"optimizer_steps", optimizer_->steps()},
        {"precision", precision_name(options_.precision)},
        {"loss_scale",
         {{"scale", scaler_.scale()},
          {"good_steps", scaler_.good_steps()},
          {"skipped_steps", scaler_.skipped_steps()}}},
        {"layout", {{"dp", shape.dp}, {"pp", shape.pp}, {"sp", shape.sp}, {"tp", shape.tp}}}};
    std::ofstream(state / kStateFile) << json.dump(2) << "\n";
    sync_to_disk(state / kStateFile);
    fs::copy_file(session_->checkpoint().config().path(), state / "config.json");
    for (const fs::path& file : options_.save_with) {
      fs::copy_file(file, temporary / file.filename(), fs::copy_options::overwrite_existing);
      sync_to_disk(temporary / file.filename());
    }
    sync_to_disk(state);
    sync_to_disk(temporary);
    fs::rename(temporary, dir);  // the checkpoint appears whole
    sync_to_disk(dir.parent_path().empty() ? fs::path(".") : dir.parent_path());
  }
  if (world != nullptr) world->barrier();
}

void Trainer::load(const fs::path& dir) {
  const fs::path state = dir / kStateFolder;
  const nlohmann::json json = detail::read_json_file(state / kStateFile);
  if (!json.is_object() || json.value("format", "") != kStateFormat ||
      json.value("version", 0) != kStateVersion) {
    throw CheckpointError(
        str((state / kStateFile).string(), ": not a ", kStateFormat, " version ", kStateVersion));
  }
  steps_ = json.at("step").get<int64_t>();
  stream_.seek(json.at("data_position").get<int64_t>());
  optimizer_->set_steps(json.at("optimizer_steps").get<int64_t>());
  if (scaler_.enabled() && json.value("precision", "") == precision_name(options_.precision)) {
    const auto& scale = json.at("loss_scale");
    scaler_.set_state(scale.at("scale").get<double>(), scale.at("good_steps").get<int64_t>(),
                      scale.at("skipped_steps").get<int64_t>());
  }
  const Checkpoint moments(state, "optimizer");
  const Model& model = session_->model();
  for (const AdamW::Param& p : optimizer_->params()) {
    const auto shard = model.sharding().find(p.name);
    const auto read = [&](const std::string& kind) {
      const std::string name = kind + p.name;
      return shard == model.sharding().end() ? moments.read(name)
                                             : load_shard(moments, name, shard->second);
    };
    optimizer_->set_moments(p.name, read("exp_avg."), read("exp_avg_sq."));
  }
  const distributed::ProcessMesh* mesh = session_->mesh();
  const distributed::MeshShape shape = mesh != nullptr ? mesh->shape() : distributed::MeshShape{};
  const auto& layout = json.at("layout");
  const fs::path rng =
      state / "rng" / str("rank-", mesh != nullptr ? mesh->rank() : 0, ".safetensors");
  if (layout.at("dp") == shape.dp && layout.at("pp") == shape.pp &&
      layout.value("sp", int64_t{1}) == shape.sp && layout.at("tp") == shape.tp &&
      fs::exists(rng)) {
    const SafetensorsFile file(rng);
    std::map<std::string, at::Tensor> states;
    for (const TensorInfo& info : file.tensors()) states.emplace(info.name, file.read(info.name));
    layers::set_dropout_rng_states(session_->model(), states);
  }
}

}  // namespace shardformer::training
