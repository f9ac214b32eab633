#ifndef PSTRAIN_PS_SERVER_LOCAL_PS_CLIENT_H_
#define PSTRAIN_PS_SERVER_LOCAL_PS_CLIENT_H_

#include <memory>
#include <string>

#include "ps_server/checkpoint_shards.h"
#include "ps_server/ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// A PsClient that calls a VariableStore in this process: the real store without a
// network, for tests of training loops and coordination. `store` is not owned.
// `shards` (not owned; may be null: UNIMPLEMENTED) serves the sharded-checkpoint calls.
std::unique_ptr<PsClient> CreateLocalPsClient(int ps_index, VariableStore* store,
                                              const CheckpointShards* shards = nullptr);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_LOCAL_PS_CLIENT_H_
