#ifndef PSTRAIN_PS_SERVER_SPARSE_ROWS_H_
#define PSTRAIN_PS_SERVER_SPARSE_ROWS_H_

// Row-sparse traffic of a table variable (an embedding, or a shard of one: a shard's rows
// count from 0), as the ps store, its clients and the wire (proto/ps.proto's PullRows and
// PushRows) share it.

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"

namespace pstrain {

// The rows of variable `name` a pull asks for, in the order the answer gives them (a row
// may repeat).
struct RowsRequest {
  std::string name;
  std::vector<int64_t> rows;
};

// A row-sparse gradient: `values` holds rows.size() rows of the variable's row shape
// ([rows.size(), shape[1], ...]); values' row i is the gradient of row rows[i]. A row may
// repeat: the ps sums its rows before the update.
struct SparseGradient {
  std::string name;
  std::vector<int64_t> rows;
  Tensor values;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_SPARSE_ROWS_H_
