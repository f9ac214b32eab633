#include "tests/zipf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/shard_files.h"
#include "common/status_macros.h"
#include "common/tensor.h"

namespace pstrain {

namespace {

constexpr int64_t kRowsPerBlock = 4096;

// A value for (tensor, row, column) in [-0.5, 0.5): deterministic, and different enough
// per id that the model's figures depend on every row.
float ValueAt(int tensor, int64_t row, int64_t column) {
  const double x = std::sin(static_cast<double>(row) * 12.9898 + column * 78.233 + tensor * 3.7) *
                   43758.5453;
  return static_cast<float>(x - std::floor(x) - 0.5);
}

Tensor RowsOfTensor(int tensor, const std::vector<int64_t>& shape, int64_t begin, int64_t end) {
  std::vector<int64_t> block_shape = shape;
  if (!block_shape.empty()) block_shape[0] = end - begin;
  Tensor t(block_shape);
  const int64_t row = RowElements(shape);
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t c = 0; c < row; ++c) t.data()[(r - begin) * row + c] = ValueAt(tensor, r, c);
  }
  return t;
}

}  // namespace

absl::StatusOr<nlohmann::json> ZipfJob(const ZipfCheckpointSpec& spec) {
  std::ifstream in("examples/zipf_embedding.json");
  nlohmann::json job = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (job.is_discarded()) return absl::NotFoundError("cannot read examples/zipf_embedding.json");
  job["model"]["config"]["layers"][1]["config"]["input_dim"] = spec.rows;
  job["model"]["config"]["layers"][1]["config"]["output_dim"] = spec.width;
  job["fit"]["epochs"] = spec.epochs;
  for (const char* part : {"train", "validation"}) {
    job["data"][part]["samples"] = spec.samples;
    job["data"][part]["vocabulary"] = spec.rows;
  }
  return job;
}

absl::StatusOr<std::string> WriteZipfCheckpoint(const std::string& root,
                                                const ZipfCheckpointSpec& spec) {
  PS_ASSIGN_OR_RETURN(nlohmann::json job, ZipfJob(spec));
  CheckpointWriter::Options options;
  options.keep = 1000;
  CheckpointWriter writer(root, options);
  PS_RETURN_IF_ERROR(writer.CheckWritable());
  PS_ASSIGN_OR_RETURN(std::string temp, writer.BeginSharded(spec.step));
  const std::string dir = absl::StrCat(root, "/", temp);
  const std::vector<int64_t> table = {spec.rows, spec.width};
  const std::vector<int64_t> kernel = {spec.width, 10};
  const std::vector<int64_t> bias = {10};
  std::vector<ShardFile> files;
  for (int f = 0; f < spec.num_files; ++f) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<ShardFileWriter> file,
                        ShardFileWriter::Create(dir, ShardFileName(f)));
    const int64_t begin = spec.rows * f / spec.num_files;
    const int64_t end = spec.rows * (f + 1) / spec.num_files;
    for (int64_t b = begin; b < end; b += kRowsPerBlock) {
      const int64_t e = std::min(end, b + kRowsPerBlock);
      PS_RETURN_IF_ERROR(file->Add("embedding/embeddings", table, b, e, RowsOfTensor(0, table, b, e)));
    }
    // The dense layer on the first file, whole (as a ps holds an unsplit variable).
    if (f == 0) {
      PS_RETURN_IF_ERROR(file->Add("classes/kernel", kernel, 0, spec.width,
                                   RowsOfTensor(1, kernel, 0, spec.width)));
      PS_RETURN_IF_ERROR(file->Add("classes/bias", bias, 0, 10, RowsOfTensor(2, bias, 0, 10)));
    }
    PS_ASSIGN_OR_RETURN(ShardFile done, file->Finish({}));
    files.push_back(std::move(done));
  }
  CheckpointContents header;
  header.step = spec.step;
  header.epoch = spec.epoch;
  *header.job_spec = job;
  *header.metadata = {{"job_dir", "."}, {"global_step", spec.step}, {"epochs_done", spec.epoch}};
  return writer.CommitSharded(temp, header, files);
}

}  // namespace pstrain
