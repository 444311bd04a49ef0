// Element conversion between typed views (buf_view.h): the dtype pair picks the loop of float16.h.
#include "tensor/buf_view.h"

#include <cstring>

#include "core/time_split.h"
#include "tensor/float16.h"

namespace sp {

void convert(BufView dst, ConstBufView src) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK_EQ(dst.count, src.count, "convert {} into {}: element counts differ", dtype_name(src.dtype),
              dtype_name(dst.dtype));
  if (dst.dtype == src.dtype) {
    if (dst.count > 0 && dst.data != src.data) std::memmove(dst.data, src.data, dst.bytes());
  } else if (src.dtype == DType::kF32 && is_float16(dst.dtype)) {
    float16_from_f32(dst.float16(), src.f32(), src.count, dst.dtype);
  } else if (is_float16(src.dtype) && dst.dtype == DType::kF32) {
    f32_from_float16(dst.f32(), src.float16(), src.count, src.dtype);
  } else {
    SP_CHECK(false, "convert {} into {}: not a conversion between fp32 and a 16-bit float", dtype_name(src.dtype),
             dtype_name(dst.dtype));
  }
}

}  // namespace sp
