#include "core/status.h"

namespace sp {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kIo:
      return "I/O error";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kDeadlineExceeded:
      return "deadline exceeded";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  if (hint_.empty()) return message_;
  return message_ + "\n  hint: " + hint_;
}

int Status::exit_code() const {
  if (ok()) return 0;
  return code_ == StatusCode::kInvalidArgument ? 2 : 1;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_, hint_);
}

Status Status::with_hint(std::string hint) const {
  if (ok()) return *this;
  return Status(code_, message_, std::move(hint));
}

}  // namespace sp
