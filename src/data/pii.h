// PII scrubbing: e-mail addresses, phone numbers, IPv4 and IPv6 addresses are replaced by the
// placeholders <EMAIL>, <PHONE>, <IPV4>, <IPV6> and counted per kind. Not a name or address
// detector. Hand-written scanners (no regex engine: linear time on any input), rules in
// docs/data.md, "PII scrubbing"; each rule errs towards precision on the bundled corpus (ISBNs,
// version numbers, times and Jargon-File ":entry:" keys are not scrubbed).
// Invariant: output = input with each detected span replaced; spans never overlap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sp::data {

struct PiiCounts {
  int64_t email = 0;
  int64_t phone = 0;
  int64_t ipv4 = 0;
  int64_t ipv6 = 0;
  int64_t total() const { return email + phone + ipv4 + ipv6; }
  PiiCounts& operator+=(const PiiCounts& o) {
    email += o.email, phone += o.phone, ipv4 += o.ipv4, ipv6 += o.ipv6;
    return *this;
  }
};

inline constexpr std::string_view kEmailPlaceholder = "<EMAIL>";
inline constexpr std::string_view kPhonePlaceholder = "<PHONE>";
inline constexpr std::string_view kIpv4Placeholder = "<IPV4>";
inline constexpr std::string_view kIpv6Placeholder = "<IPV6>";

std::string scrub_pii(std::string_view text, PiiCounts* counts);

}  // namespace sp::data
