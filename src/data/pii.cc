#include "data/pii.h"

#include <algorithm>
#include <vector>

namespace sp::data {
namespace {

enum class Kind { kEmail, kPhone, kIpv4, kIpv6 };
struct Span {
  size_t begin, end;
  Kind kind;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool local_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; }
bool domain_char(char c) { return is_alnum(c) || c == '.' || c == '-'; }

// local@domain.tld: local part [A-Za-z0-9._%+-]+ not starting or ending with '.', domain of
// dot-separated labels [A-Za-z0-9-]+ with at least two labels and an alphabetic TLD of ≥ 2 letters.
bool email_at(std::string_view s, size_t at, Span* out) {
  size_t b = at;
  while (b > 0 && local_char(s[b - 1])) --b;
  while (b < at && (s[b] == '.' || s[b] == '-')) ++b;
  if (b == at || s[at - 1] == '.') return false;
  size_t e = at + 1;
  while (e < s.size() && domain_char(s[e])) ++e;
  while (e > at + 1 && (s[e - 1] == '.' || s[e - 1] == '-')) --e;  // sentence end
  const std::string_view domain = s.substr(at + 1, e - at - 1);
  if (domain.empty() || domain.find("..") != std::string_view::npos || domain.front() == '.') return false;
  const size_t dot = domain.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view tld = domain.substr(dot + 1);
  if (tld.size() < 2 || !std::all_of(tld.begin(), tld.end(), is_alpha)) return false;
  *out = {b, e, Kind::kEmail};
  return true;
}

bool boundary_before(std::string_view s, size_t i) { return i == 0 || !(is_alnum(s[i - 1]) || s[i - 1] == '.'); }
bool boundary_after(std::string_view s, size_t e) {
  if (e >= s.size()) return true;
  if (is_alnum(s[e])) return false;
  return !(s[e] == '.' && e + 1 < s.size() && is_alnum(s[e + 1]));  // "1.2.3.4.5" or "1.2.3.4a"
}

// Four dot-separated decimal octets, each 0..255 and at most 3 digits.
bool ipv4_at(std::string_view s, size_t i, Span* out) {
  if (!boundary_before(s, i)) return false;
  size_t p = i;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (p >= s.size() || s[p] != '.') return false;
      ++p;
    }
    size_t q = p;
    int v = 0;
    while (q < s.size() && is_digit(s[q]) && q - p < 4) v = v * 10 + (s[q++] - '0');
    if (q == p || q - p > 3 || v > 255) return false;
    p = q;
  }
  if (!boundary_after(s, p)) return false;
  *out = {i, p, Kind::kIpv4};
  return true;
}

// RFC 4291 text form without an embedded IPv4 tail: 1–4 hex digits per group, at most one "::",
// eight groups without "::" or fewer with it; at least one digit so that words like "face::" stay.
bool ipv6_at(std::string_view s, size_t i, Span* out) {
  if (i > 0 && (is_alnum(s[i - 1]) || s[i - 1] == ':' || s[i - 1] == '.')) return false;
  size_t e = i;
  while (e < s.size() && (is_hex(s[e]) || s[e] == ':')) ++e;
  if (!boundary_after(s, e)) return false;
  const std::string_view t = s.substr(i, e - i);
  if (std::count(t.begin(), t.end(), ':') < 2) return false;
  const size_t dbl = t.find("::");
  if (dbl != std::string_view::npos && t.find("::", dbl + 1) != std::string_view::npos) return false;
  if (t.find(":::") != std::string_view::npos) return false;
  int groups = 0;
  bool digit = false;
  size_t p = 0;
  while (p < t.size()) {
    if (t[p] == ':') {
      if (p + 1 < t.size() && t[p + 1] == ':') {
        p += 2;
        continue;
      }
      if (p == 0 || p + 1 == t.size()) return false;  // a single leading or trailing ':'
      ++p;
      continue;
    }
    size_t q = p;
    while (q < t.size() && is_hex(t[q])) digit |= is_digit(t[q++]);
    if (q - p > 4) return false;
    ++groups;
    p = q;
  }
  if (!digit || groups > 8 || (dbl == std::string_view::npos && groups != 8) || groups == 0) return false;
  *out = {i, e, Kind::kIpv6};
  return true;
}

// Digit groups joined by single separators (' ', '-', '.'), an optional leading '+' and an optional
// "(ddd)" group. A phone number has either a leading '+' and 8–15 digits in ≥ 2 groups, or 10–11
// digits in ≥ 3 groups of 2–4 digits (NANP 3-3-4, 1-3-3-4, Chinese mobile 3-4-4). Not after "ISBN".
bool phone_at(std::string_view s, size_t i, Span* out) {
  if (!(s[i] == '+' || s[i] == '(' || is_digit(s[i]))) return false;
  if (i > 0 && (is_alnum(s[i - 1]) || s[i - 1] == '+' || s[i - 1] == '-' || s[i - 1] == '.' || s[i - 1] == '/'))
    return false;
  size_t p = i;
  const bool plus = s[p] == '+';
  if (plus) ++p;
  int digits = 0, groups = 0, max_group = 0;
  size_t end = p;
  while (p < s.size()) {
    const bool paren = s[p] == '(';
    size_t q = paren ? p + 1 : p;
    const size_t start = q;
    while (q < s.size() && is_digit(s[q])) ++q;
    const int len = static_cast<int>(q - start);
    if (len == 0) break;
    if (paren) {
      if (q >= s.size() || s[q] != ')') break;
      ++q;
    }
    digits += len, ++groups;
    max_group = std::max(max_group, len);
    end = q;
    // A separator continues the number only when a digit or '(' follows it.
    size_t r = q;
    if (r < s.size() && (s[r] == ' ' || s[r] == '-' || s[r] == '.'))
      ++r;
    else if (!(paren && r < s.size() && is_digit(s[r])))
      break;
    if (r >= s.size() || !(is_digit(s[r]) || s[r] == '(')) break;
    p = r;
  }
  if (groups == 0 || !boundary_after(s, end)) return false;
  const bool intl = plus && digits >= 8 && digits <= 15 && groups >= 2;
  const bool local = !plus && digits >= 10 && digits <= 11 && groups >= 3 && max_group <= 4;
  if (!intl && !local) return false;
  const size_t ctx = i >= 8 ? i - 8 : 0;
  std::string before(s.substr(ctx, i - ctx));
  for (char& c : before) c = static_cast<char>((c >= 'a' && c <= 'z') ? c - 32 : c);
  if (before.find("ISBN") != std::string::npos) return false;
  *out = {i, end, Kind::kPhone};
  return true;
}

}  // namespace

std::string scrub_pii(std::string_view s, PiiCounts* counts) {
  std::vector<Span> spans;
  // E-mails first (anchored on '@'), then the other kinds left to right outside e-mail spans.
  for (size_t at = s.find('@'); at != std::string_view::npos; at = s.find('@', at + 1)) {
    Span sp;
    if (at > 0 && (spans.empty() || at >= spans.back().end) && email_at(s, at, &sp)) spans.push_back(sp);
  }
  std::vector<Span> others;
  size_t next_email = 0;
  for (size_t i = 0; i < s.size();) {
    while (next_email < spans.size() && spans[next_email].end <= i) ++next_email;
    if (next_email < spans.size() && i >= spans[next_email].begin) {
      i = spans[next_email].end;
      continue;
    }
    const char c = s[i];
    Span sp;
    const bool hit =
        (is_digit(c) && ipv4_at(s, i, &sp)) || ((is_hex(c) || c == ':') && ipv6_at(s, i, &sp)) || phone_at(s, i, &sp);
    if (hit && (next_email >= spans.size() || sp.end <= spans[next_email].begin)) {
      others.push_back(sp);
      i = sp.end;
    } else {
      ++i;
    }
  }
  spans.insert(spans.end(), others.begin(), others.end());
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  PiiCounts local;
  for (const Span& sp : spans) {
    out.append(s.substr(pos, sp.begin - pos));
    switch (sp.kind) {
      case Kind::kEmail:
        out += kEmailPlaceholder, ++local.email;
        break;
      case Kind::kPhone:
        out += kPhonePlaceholder, ++local.phone;
        break;
      case Kind::kIpv4:
        out += kIpv4Placeholder, ++local.ipv4;
        break;
      case Kind::kIpv6:
        out += kIpv6Placeholder, ++local.ipv6;
        break;
    }
    pos = sp.end;
  }
  out.append(s.substr(pos));
  if (counts) *counts = local;
  return out;
}

}  // namespace sp::data
