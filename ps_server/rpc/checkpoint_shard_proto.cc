#include "ps_server/rpc/checkpoint_shard_proto.h"

namespace pstrain {

void SliceToProto(const ShardSlice& slice, CheckpointShardSlice* proto) {
  proto->set_shard(slice.shard);
  proto->set_variable(slice.variable);
  for (int64_t d : slice.variable_shape) proto->add_variable_shape(d);
  proto->set_row_begin(slice.row_begin);
  proto->set_row_end(slice.row_end);
}

ShardSlice SliceFromProto(const CheckpointShardSlice& proto) {
  ShardSlice slice;
  slice.shard = proto.shard();
  slice.variable = proto.variable();
  slice.variable_shape.assign(proto.variable_shape().begin(), proto.variable_shape().end());
  slice.row_begin = proto.row_begin();
  slice.row_end = proto.row_end();
  return slice;
}

std::vector<ShardSlice> SlicesFromProto(
    const google::protobuf::RepeatedPtrField<CheckpointShardSlice>& protos) {
  std::vector<ShardSlice> slices;
  slices.reserve(protos.size());
  for (const CheckpointShardSlice& p : protos) slices.push_back(SliceFromProto(p));
  return slices;
}

void ShardFileToProto(const ShardFile& file, WriteCheckpointShardResponse* proto) {
  proto->set_file(file.name);
  proto->set_length(file.length);
  proto->set_crc32c(file.crc32c);
  for (const ShardPiece& piece : file.pieces) {
    CheckpointShardPiece* p = proto->add_pieces();
    p->set_tensor(piece.tensor);
    for (int64_t d : piece.shape) p->add_shape(d);
    p->set_row_begin(piece.row_begin);
    p->set_row_end(piece.row_end);
    for (const ShardBlock& block : piece.blocks) {
      CheckpointShardBlock* b = p->add_blocks();
      b->set_offset(block.offset);
      b->set_length(block.length);
      b->set_row_begin(block.row_begin);
      b->set_row_end(block.row_end);
      b->set_crc32c(block.crc32c);
    }
  }
  for (const ShardCounts& counts : file.counts) {
    CheckpointShardCounts* c = proto->add_counts();
    c->set_variable(counts.variable);
    c->set_iterations(counts.iterations);
    c->set_version(counts.version);
    for (const std::string& slot : counts.slots) c->add_slots(slot);
  }
}

ShardFile ShardFileFromProto(const WriteCheckpointShardResponse& proto) {
  ShardFile file;
  file.name = proto.file();
  file.length = proto.length();
  file.crc32c = proto.crc32c();
  for (const CheckpointShardPiece& p : proto.pieces()) {
    ShardPiece piece;
    piece.tensor = p.tensor();
    piece.shape.assign(p.shape().begin(), p.shape().end());
    piece.row_begin = p.row_begin();
    piece.row_end = p.row_end();
    for (const CheckpointShardBlock& b : p.blocks()) {
      piece.blocks.push_back({b.offset(), b.length(), b.row_begin(), b.row_end(), b.crc32c()});
    }
    file.pieces.push_back(std::move(piece));
  }
  for (const CheckpointShardCounts& c : proto.counts()) {
    file.counts.push_back({c.variable(), c.iterations(), c.version(),
                           std::vector<std::string>(c.slots().begin(), c.slots().end())});
  }
  return file;
}

}  // namespace pstrain
