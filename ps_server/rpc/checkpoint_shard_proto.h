#ifndef PSTRAIN_PS_SERVER_RPC_CHECKPOINT_SHARD_PROTO_H_
#define PSTRAIN_PS_SERVER_RPC_CHECKPOINT_SHARD_PROTO_H_

// The sharded-checkpoint RPCs' messages (proto/ps.proto) and the structs the ps core and
// the chief use (common/checkpoint/shard_files.h), both ways: the ps service and the gRPC
// client share these.

#include <vector>

#include "common/checkpoint/shard_files.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "proto/ps.pb.h"

namespace pstrain {

void SliceToProto(const ShardSlice& slice, CheckpointShardSlice* proto);
ShardSlice SliceFromProto(const CheckpointShardSlice& proto);
std::vector<ShardSlice> SlicesFromProto(
    const google::protobuf::RepeatedPtrField<CheckpointShardSlice>& protos);

void ShardFileToProto(const ShardFile& file, WriteCheckpointShardResponse* proto);
ShardFile ShardFileFromProto(const WriteCheckpointShardResponse& proto);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_CHECKPOINT_SHARD_PROTO_H_
