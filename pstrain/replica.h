#ifndef PSTRAIN_PSTRAIN_REPLICA_H_
#define PSTRAIN_PSTRAIN_REPLICA_H_

// The replica-side vocabulary of tf.distribute: which replica a step function runs as
// (tf.distribute.get_replica_context()), the values a step returns per replica
// (tf.distribute's PerReplica), and the distributed data it reads (the slices of a
// global batch, distribute/distributed_dataset.h).

#include <vector>

#include "distribute/distributed_dataset.h"
#include "distribute/strategy.h"

namespace pstrain::distribute {

// tf.distribute.ReduceOp: kSum, kMean.
using ::pstrain::ReduceOp;

// experimental_distribute_dataset's pieces (distribute/distributed_dataset.h).
using ::pstrain::DistributedBatch;
using ::pstrain::DistributedDataset;
using ::pstrain::DistributedDatasetOptions;
using ::pstrain::DistributedIterator;
using ::pstrain::ReplicaBatch;

// Which replica a step function runs as.
struct ReplicaContext {
  int replica_id_in_sync_group = 0;  // 0 .. num_replicas_in_sync - 1, over every process
  int num_replicas_in_sync = 1;
  int local_index = 0;  // among this process's replicas (PerReplica::values' index)
};

// One value per replica of this process, as Strategy::Run returns them (tf.distribute's
// PerReplica; `values` is its .values). values[i] is replica first_replica + i.
template <typename T>
struct PerReplica {
  int first_replica = 0;
  std::vector<T> values;
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_REPLICA_H_
