#ifndef PSTRAIN_TESTS_ZIPF_CHECKPOINT_H_
#define PSTRAIN_TESTS_ZIPF_CHECKPOINT_H_

// Sharded (format 2) checkpoints of examples/zipf_embedding.json's model with a table of
// any size, written as ps tasks write them (a shard file per ps, blocks with CRCs, a
// committed manifest) without a cluster and without holding the table: for the tests of
// what reads a checkpoint from its files (the evaluator task, tools/evaluate, the exports).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

struct ZipfCheckpointSpec {
  int64_t rows = 1000;        // the table's rows (and the data's vocabulary)
  int64_t width = 64;         // its columns
  int num_files = 2;          // shard files ("ps tasks"), the table's rows split evenly
  int64_t step = 100;
  int epoch = 1;              // epochs done
  int epochs = 1;             // the job's fit.epochs (epoch == epochs: the final one)
  int64_t samples = 2000;     // the data's training and validation samples, each
};

// The job spec the checkpoint stores: examples/zipf_embedding.json (read from the
// working directory) with the table and the data resized. The cluster tests of large
// tables run it too.
absl::StatusOr<nlohmann::json> ZipfJob(const ZipfCheckpointSpec& spec);

// Writes the checkpoint under `root` (created if needed) as <root>/ckpt-<step>, with
// values drawn from (row, column) so that two checkpoints of the same spec are identical,
// and returns its path. The table is written in blocks of 4096 rows.
absl::StatusOr<std::string> WriteZipfCheckpoint(const std::string& root,
                                                const ZipfCheckpointSpec& spec);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_ZIPF_CHECKPOINT_H_
