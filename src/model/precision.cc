// Precision names and validation (precision.h).
#include "model/precision.h"

namespace sp::model {

std::string_view precision_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "fp32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    default:
      return dtype_name(t);
  }
}

Result<DType> precision_dtype_from_name(std::string_view name, std::string_view key) {
  if (name == "fp32") return DType::kF32;
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kF16;
  return invalid_argument("{} = \"{}\" is not a precision", key, name).with_hint("use \"fp32\", \"bf16\" or \"fp16\"");
}

Result<Precision> precision_from_names(std::string_view precision, std::string_view grad_dtype) {
  SP_ASSIGN_OR_RETURN(const DType compute, precision_dtype_from_name(precision, "train.precision"));
  SP_ASSIGN_OR_RETURN(const DType grad, precision_dtype_from_name(grad_dtype, "train.grad_dtype"));
  if (grad != DType::kF32 && grad != compute)
    return invalid_argument("train.grad_dtype = \"{}\" does not fit train.precision = \"{}\"", grad_dtype, precision)
        .with_hint(compute == DType::kF32
                       ? std::string("fp32 training keeps fp32 gradients: set train.grad_dtype = \"fp32\"")
                       : fmt::format("gradients are accumulated in \"fp32\" or in the precision's own dtype: set "
                                     "train.grad_dtype = \"fp32\" or \"{}\"",
                                     precision));
  return Precision{compute, grad};
}

}  // namespace sp::model
