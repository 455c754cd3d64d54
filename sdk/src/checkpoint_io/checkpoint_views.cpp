// Checkpoint views: a checkpoint stored under another layout's tensor names (fused tensors
// included) served under the family's own, and put back into its layout when the model is saved.
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

namespace shardformer {

void Checkpoint::add_views(const std::vector<TensorView>& views) {
  // Resolve and check every view before changing anything.
  std::vector<TensorView> resolved;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> covered;  // source -> rows
  std::set<std::string> names;
  for (const TensorView& view : views) {
    if (!contains(view.source)) {
      throw CheckpointError(str(directory_.string(), ": no tensor named '", view.source,
                                "' (read as '", view.name, "') in the checkpoint"));
    }
    const TensorInfo& source = info(view.source);
    const int64_t all = source.shape.empty() ? 0 : source.shape[0];
    TensorView r = view;
    if (r.rows < 0) {
      r.first_row = 0;
      r.rows = all;
    }
    if (r.first_row < 0 || r.first_row + r.rows > all) {
      throw CheckpointError(str(directory_.string(), ": rows [", r.first_row, ", ",
                                r.first_row + r.rows, ") asked for '", r.name, "' lie outside the ",
                                all, " rows of '", r.source, "'"));
    }
    if (contains(r.name) || !names.insert(r.name).second) {
      throw CheckpointError(str(directory_.string(), ": tensor '", r.source,
                                "' cannot be read as '", r.name, "': the name is taken"));
    }
    covered[r.source].emplace_back(r.first_row, r.rows);
    resolved.push_back(std::move(r));
  }
  for (auto& [source, rows] : covered) {
    std::sort(rows.begin(), rows.end());
    const TensorInfo& info_of_source = info(source);
    const int64_t all = info_of_source.shape.empty() ? 0 : info_of_source.shape[0];
    int64_t next = 0;  // the first row not covered yet
    bool exact = true;
    for (const auto& [first, count] : rows) {
      exact = exact && first == next && count >= 0;
      next = first + count;
    }
    if (!exact || next != all) {
      std::vector<std::string> ranges;
      for (const auto& [first, count] : rows) ranges.push_back(str(first, "..", first + count));
      throw CheckpointError(str(directory_.string(), ": the parts of '", source, "' (rows ",
                                join(ranges, ", "), ") do not cover its ", all,
                                " rows exactly once"));
    }
  }
  for (const TensorView& view : resolved) {
    const SafetensorsFile* owner = owner_.at(view.source);
    auto file =
        std::find_if(files_.begin(), files_.end(), [&](const auto& f) { return f.get() == owner; });
    const std::vector<int64_t>& shape = info(view.source).shape;
    const bool whole = shape.empty() || (view.first_row == 0 && view.rows == shape[0]);
    (*file)->add_view(view.name, view.source, view.first_row, whole ? -1 : view.rows);
    owner_[view.name] = owner;
    views_.push_back(view);
  }
  for (const auto& [source, rows] : covered) owner_.erase(source);
}

std::string Checkpoint::describe(const std::string& name) const {
  for (const TensorView& view : views_) {
    if (view.name == name) {
      return str("'", name, "' (rows ", view.first_row, "..", view.first_row + view.rows, " of '",
                 view.source, "')");
    }
  }
  return str("'", name, "'");
}

std::map<std::string, at::Tensor> join_views(std::map<std::string, at::Tensor> tensors,
                                             const std::vector<TensorView>& views) {
  std::map<std::string, std::vector<const TensorView*>> by_source;
  for (const TensorView& view : views) by_source[view.source].push_back(&view);
  for (auto& [source, parts] : by_source) {
    std::sort(parts.begin(), parts.end(),
              [](const TensorView* a, const TensorView* b) { return a->first_row < b->first_row; });
    const auto held = std::count_if(parts.begin(), parts.end(),
                                    [&](const TensorView* v) { return tensors.count(v->name); });
    if (held == 0) continue;  // another pipeline stage's
    if (held != static_cast<int64_t>(parts.size())) {
      throw ModelError(
          str("saving '", source, "': this rank holds ", held, " of its ", parts.size(), " parts"));
    }
    std::vector<at::Tensor> rows;
    for (const TensorView* part : parts) {
      rows.push_back(tensors.at(part->name));
      tensors.erase(part->name);
    }
    tensors[source] = rows.size() == 1 ? rows[0] : at::cat(rows, 0);
  }
  return tensors;
}

}  // namespace shardformer
