#include "tensor/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <utility>

namespace sp {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SP_CHECK(d >= 0, "negative dimension in shape {}", shape_string(shape));
    SP_CHECK(d == 0 || n <= INT64_MAX / d, "shape {} overflows int64", shape_string(shape));
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

Tensor::Tensor(MemoryLedger& ledger, std::string name, Category category, Shape shape, DType dtype)
    : ledger_(&ledger), name_(std::move(name)), shape_(std::move(shape)), dtype_(dtype), category_(category) {
  numel_ = shape_numel(shape_);
  data_ = ledger_->allocate(name_, category_, nbytes());
}

Tensor::~Tensor() { reset(); }

Tensor::Tensor(Tensor&& o) noexcept { *this = std::move(o); }

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    reset();
    ledger_ = std::exchange(o.ledger_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    name_ = std::move(o.name_);
    shape_ = std::move(o.shape_);
    numel_ = std::exchange(o.numel_, 0);
    dtype_ = o.dtype_;
    category_ = o.category_;
  }
  return *this;
}

void Tensor::zero() {
  if (data_ != nullptr) std::memset(data_, 0, nbytes());
}

void Tensor::reset() {
  if (ledger_ != nullptr && data_ != nullptr) ledger_->release(data_, name_, category_, nbytes());
  data_ = nullptr;
  ledger_ = nullptr;
  numel_ = 0;
}

}  // namespace sp
