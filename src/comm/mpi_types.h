// Internal to comm/ (mpi_communicator.cc): the MPI datatype and reduce op of a DType and a ReduceOp, and
// element addressing in a typed buffer. 16-bit floats and bools travel as raw bits; reductions on them are
// rejected (reducible). Not an interface above comm/.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "comm/communicator.h"
#include "tensor/dtype.h"

namespace sp::comm::mpi_detail {

inline MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI16:
      return MPI_INT16_T;
    case DType::kI8:
      return MPI_INT8_T;
    case DType::kU8:
      return MPI_UINT8_T;
    case DType::kU16:
      return MPI_UINT16_T;
    case DType::kU32:
      return MPI_UINT32_T;
    case DType::kU64:
      return MPI_UINT64_T;
    // Moved as raw bits; reductions on them are rejected in reducible().
    case DType::kBF16:
    case DType::kF16:
      return MPI_UINT16_T;
    case DType::kBool:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

inline bool reducible(DType t) { return t != DType::kBF16 && t != DType::kF16 && t != DType::kBool; }

inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

inline char* at(void* base, int64_t elements, DType t) {
  return static_cast<char*>(base) + elements * static_cast<int64_t>(dtype_size(t));
}
inline const char* at(const void* base, int64_t elements, DType t) {
  return static_cast<const char*>(base) + elements * static_cast<int64_t>(dtype_size(t));
}

}  // namespace sp::comm::mpi_detail
