#include "ps_server/client/sparse_embedding.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/layers/embedding.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

bool HasRowSparseEmbedding(const Model& model) {
  return !model.layers().empty() &&
         dynamic_cast<const EmbeddingLayer*>(model.layers()[0].get()) != nullptr &&
         !model.variables().empty();
}

absl::StatusOr<BatchRows> RenumberBatch(const Tensor& x, int64_t table_rows) {
  BatchRows out;
  absl::Span<const float> ids = x.values();
  std::vector<int64_t> global(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const float id = ids[i];
    if (!(id >= 0.0f && id < static_cast<float>(table_rows)) || id != std::floor(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " at input element ", i, " is not an integer in [0, ", table_rows, ")"));
    }
    global[i] = static_cast<int64_t>(id);
  }
  out.ids = global;
  std::sort(out.ids.begin(), out.ids.end());
  out.ids.erase(std::unique(out.ids.begin(), out.ids.end()), out.ids.end());
  out.local_x = Tensor(x.shape());
  float* local = out.local_x.data();
  for (size_t i = 0; i < global.size(); ++i) {
    local[i] = static_cast<float>(
        std::lower_bound(out.ids.begin(), out.ids.end(), global[i]) - out.ids.begin());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SparseEmbedding>> SparseEmbedding::Create(
    const Model& model, VariableLayout table, std::vector<PsClient*> ps) {
  if (!HasRowSparseEmbedding(model)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name(), " does not start with an Embedding layer"));
  }
  if (table.shape != model.variables()[0].shape || table.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("the layout of \"", table.name,
                                                   "\" does not have the Embedding's shape"));
  }
  return std::unique_ptr<SparseEmbedding>(
      new SparseEmbedding(model, std::move(table), std::move(ps)));
}

absl::StatusOr<std::unique_ptr<SparseEmbedding>> SparseEmbedding::CreateWithRowReader(
    const Model& model, VariableLayout table, RowReader read_rows) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<SparseEmbedding> embedding,
                      Create(model, std::move(table), /*ps=*/{}));
  embedding->read_rows_ = std::move(read_rows);
  return embedding;
}

SparseEmbedding::SparseEmbedding(const Model& model, VariableLayout table,
                                 std::vector<PsClient*> ps)
    : model_(model), table_(std::move(table)), ps_(std::move(ps)), width_(table_.shape[1]) {
  spans_by_ps_.resize(ps_.size());
  versions_by_ps_.resize(ps_.size());
}

absl::Status SparseEmbedding::EnsureCapacity(int64_t rows) {
  if (compact_ != nullptr && rows <= capacity_) return absl::OkStatus();
  // The same model with the first layer's table cut to `rows` rows: the variables keep
  // their names and every other shape.
  nlohmann::json keras = model_.ToKerasJson();
  nlohmann::json& layers = keras["config"]["layers"];
  for (nlohmann::json& layer : layers) {
    if (layer.value("class_name", "") == "InputLayer") continue;
    layer["config"]["input_dim"] = rows;
    break;
  }
  absl::StatusOr<std::unique_ptr<Model>> compact = Model::FromKerasJson(keras, model_.backend());
  if (compact.ok()) {
    absl::Status loss = (*compact)->SetLoss(model_.loss());
    if (!loss.ok()) compact = loss;
  }
  if (!compact.ok()) {
    return absl::InternalError(absl::StrCat("the compact copy of model ", model_.name(),
                                            " for row-sparse training: ",
                                            compact.status().message()));
  }
  compact_ = *std::move(compact);
  capacity_ = rows;
  return absl::OkStatus();
}

absl::StatusOr<Model*> SparseEmbedding::PullBatchRows(const Tensor& x, Tensor* compact_table) {
  PS_ASSIGN_OR_RETURN(rows_, RenumberBatch(x, table_.shape[0]));
  PS_RETURN_IF_ERROR(EnsureCapacity(std::max<int64_t>(x.num_elements(), 1)));
  if (compact_table->shape() != std::vector<int64_t>{capacity_, width_}) {
    *compact_table = Tensor({capacity_, width_});
  }
  if (read_rows_) {
    PS_RETURN_IF_ERROR(read_rows_(rows_.ids, compact_table->data()));
    return compact_.get();
  }
  for (auto& spans : spans_by_ps_) spans.clear();
  for (const VariablePlacementEntry& shard : table_.shards) {
    const int64_t first = shard.row_offset();
    const int64_t last = first + shard.num_rows();
    ShardSpan span{shard};
    span.begin = std::lower_bound(rows_.ids.begin(), rows_.ids.end(), first) - rows_.ids.begin();
    span.end = std::lower_bound(rows_.ids.begin(), rows_.ids.end(), last) - rows_.ids.begin();
    // Sync mode names the shards the batch missed too (the class comment says why).
    if (span.begin < span.end || sync_) {
      spans_by_ps_[shard.ps_index()].push_back(std::move(span));
    }
  }
  std::vector<std::function<absl::Status()>> pulls;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (spans_by_ps_[p].empty()) continue;
    pulls.push_back([this, p, compact_table]() -> absl::Status {
      std::vector<RowsRequest> requests;
      for (const ShardSpan& span : spans_by_ps_[p]) {
        RowsRequest& r = requests.emplace_back();
        r.name = span.shard.name();
        for (size_t i = span.begin; i < span.end; ++i) {
          r.rows.push_back(rows_.ids[i] - span.shard.row_offset());
        }
      }
      PS_ASSIGN_OR_RETURN(std::vector<Tensor> values,
                          ps_[p]->PullRows(requests, &versions_by_ps_[p]));
      if (values.size() != requests.size() || versions_by_ps_[p].size() != requests.size()) {
        return absl::InternalError(absl::StrCat(ps_[p]->name(), ": answered ", values.size(),
                                                " row sets for ", requests.size()));
      }
      for (size_t k = 0; k < values.size(); ++k) {
        const ShardSpan& span = spans_by_ps_[p][k];
        const std::vector<int64_t> want = {static_cast<int64_t>(span.end - span.begin), width_};
        if (values[k].shape() != want) {
          return absl::InternalError(absl::StrCat(ps_[p]->name(), ": rows of \"",
                                                  span.shard.name(), "\" came back as ",
                                                  values[k].ShapeString()));
        }
        std::copy_n(values[k].data(), values[k].num_elements(),
                    compact_table->data() + span.begin * width_);
      }
      return absl::OkStatus();
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(pulls));
  return compact_.get();
}

bool SparseEmbedding::TouchesPs(size_t p) const {
  return p < spans_by_ps_.size() && !spans_by_ps_[p].empty();
}

absl::Status SparseEmbedding::PushShardRows(size_t p, const Tensor& compact_gradient,
                                            const PushContext& context_in) const {
  PushContext context = context_in;
  if (sync_) context.versions = versions_by_ps_[p];
  std::vector<SparseGradient> gradients;
  for (const ShardSpan& span : spans_by_ps_[p]) {
    SparseGradient& g = gradients.emplace_back();
    g.name = span.shard.name();
    const int64_t n = static_cast<int64_t>(span.end - span.begin);
    g.rows.reserve(n);
    for (size_t i = span.begin; i < span.end; ++i) {
      g.rows.push_back(rows_.ids[i] - span.shard.row_offset());
    }
    const float* from = compact_gradient.data() + span.begin * width_;
    g.values = Tensor({n, width_}, std::vector<float>(from, from + n * width_));
  }
  return ps_[p]->PushRows(gradients, context);
}

}  // namespace pstrain
