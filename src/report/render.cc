// report.html (render.h): the page skeleton around the data, the escaping that keeps the data inert
// inside its <script> element, and the check `verify` runs on a bundle's report.html. Not the views'
// drawing (assets/report.js) nor the data (report_data.cc). Invariant: the markup outside the data
// element holds only the title, the kind and the problems, all HTML-escaped. Reference: docs/report.md.
#include "report/render.h"

#include <fmt/format.h>

#include <set>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "report/assets.h"
#include "report/report_data.h"
#include "report/views.h"

namespace sp::report {
namespace {

using json = nlohmann::json;

constexpr std::string_view kDataOpen = R"(<script type="application/json" id="sp-data">)";
constexpr std::string_view kScriptClose = "</script>";

// Text for an HTML element or attribute value.
std::string html_text(std::string_view s) {
  std::string out;
  for (char c : s) switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  return out;
}

// The data as JSON that cannot end its <script> element: '<', '>' and '&' occur only inside JSON
// strings, where their \u escapes mean the same characters.
std::string inert_json(const json& data) {
  const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  return out;
}

std::string shown(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

// The first place where `got` (the page's) differs from `want` (the bundle's), as a JSON pointer and
// both values; empty when they are equal.
std::string first_difference(const json& got, const json& want, const std::string& path) {
  if (got == want) return {};
  if (got.type() == want.type() && got.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : got.items()) keys.insert(k);
    for (const auto& [k, v] : want.items()) keys.insert(k);
    for (const std::string& k : keys) {
      if (!got.contains(k))
        return fmt::format("{}/{}: missing from the page (the bundle gives {})", path, k, shown(want[k]));
      if (!want.contains(k))
        return fmt::format("{}/{}: the page shows {}, which the bundle does not give", path, k, shown(got[k]));
      if (std::string d = first_difference(got[k], want[k], path + "/" + k); !d.empty()) return d;
    }
  }
  if (got.type() == want.type() && got.is_array()) {
    for (size_t i = 0; i < got.size() && i < want.size(); ++i)
      if (std::string d = first_difference(got[i], want[i], fmt::format("{}/{}", path, i)); !d.empty()) return d;
    if (got.size() != want.size())
      return fmt::format("{}: the page shows {} entries, the bundle gives {}", path, got.size(), want.size());
  }
  return fmt::format("{}: the page shows {}, the bundle gives {}", path.empty() ? "/" : path, shown(got), shown(want));
}

}  // namespace

std::string render_report(const json& data) {
  const std::string title = data.value("title", std::string("shardproof report"));
  std::string problems;
  for (const std::string& p : report_problems(data)) problems += "<li>" + html_text(p) + "</li>";
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing may be fetched: every script and style is inline, and the policy refuses the rest.
  page +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
      "style-src 'unsafe-inline'; img-src data:\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<meta name=\"generator\" content=\"shardproof report (docs/report.md)\">\n";
  page += "<title>" + html_text(title) + "</title>\n<style>\n";
  page += assets::page_css();
  page += "</style>\n</head>\n<body>\n<header id=\"sp-header\">\n<h1>" + html_text(title) + "</h1>\n";
  const std::string kind = data.value("kind", std::string("none"));
  page += kind == "none"
              ? std::string("<p class=\"sp-kind\">shardproof report: no bundle to show</p>\n</header>\n")
              : "<p class=\"sp-kind\">shardproof report of a " + html_text(kind) + " bundle</p>\n</header>\n";
  // The problems are written into the page itself, so that even without its script it says what is missing.
  if (!problems.empty())
    page += std::string("<section id=\"sp-problems\" class=\"sp-problems\"><h2>") +
            (kind == "none" ? "Not a bundle" : "Incomplete: the bundle lacks what these views need") + "</h2><ul>" +
            problems + "</ul></section>\n";
  page +=
      "<noscript><p>This page draws its views with its inline script; its data are in the element "
      "<code>sp-data</code> of this file (docs/formats/report_data.md).</p></noscript>\n";
  page += "<nav id=\"sp-nav\"></nav>\n<main id=\"sp-views\"></main>\n";
  page += kDataOpen;
  page += inert_json(data);
  page += kScriptClose;
  page += "\n<script>\n";
  page += assets::chart_js();
  page += "\n</script>\n<script>\n";
  page += assets::page_js();
  page += "\n</script>\n</body>\n</html>\n";
  return page;
}

Result<json> embedded_report_data(std::string_view html, const std::string& label) {
  const size_t open = html.find(kDataOpen);
  if (open == std::string_view::npos)
    return corrupt("{}: no <script type=\"application/json\" id=\"sp-data\"> element: not a shardproof report", label);
  const size_t begin = open + kDataOpen.size();
  const size_t end = html.find(kScriptClose, begin);
  if (end == std::string_view::npos) return corrupt("{}: the sp-data element is not closed", label);
  return parse_json_strict(html.substr(begin, end - begin), label + ": the sp-data element");
}

Result<std::vector<std::string>> write_report(const std::string& dir, const std::string& out) {
  auto data = report_data(dir);
  if (!data.ok()) {
    // Asked for a page explicitly: it says why there is no report rather than being absent or blank.
    if (!out.empty()) {
      const std::string why =
          data.status().message() + (data.status().hint().empty() ? "" : " (" + data.status().hint() + ")");
      (void)write_file_atomic(out, render_report({{"format", "shardproof-report"},
                                                  {"format_version", kReportDataVersion},
                                                  {"kind", "none"},
                                                  {"title", "Not a shardproof bundle"},
                                                  {"problems", json::array({why})},
                                                  {"notes", json::array()},
                                                  {"views", json::array()}}));
    }
    return data.status();
  }
  const std::string path = !out.empty()                         ? out
                           : data->value("kind", "") == "judge" ? evidence::RunPaths(dir).file(judged_report_file(dir))
                                                                : evidence::RunPaths(dir).file(evidence::kReportFile);
  SP_RETURN_IF_ERROR(write_file_atomic(path, render_report(*data)));
  return report_problems(*data);
}

Status check_report(const std::string& dir) {
  const std::string path = evidence::RunPaths(dir).file(evidence::kReportFile);
  const std::string hint = fmt::format("regenerate it from the bundle: shardproof report {}", dir);
  SP_ASSIGN_OR_RETURN(const std::string page, read_file(path, uint64_t{1} << 31));
  SP_ASSIGN_OR_RETURN(const json want, report_data(dir));
  auto got = embedded_report_data(page, path);
  if (!got.ok()) return got.status().with_hint(hint);
  if (std::string d = first_difference(*got, want, ""); !d.empty())
    return corrupt("{}: its data differ from the bundle's: {}", path, d).with_hint(hint);
  if (page != render_report(want))
    return corrupt(
               "{}: its data equal the bundle's, but the page around them is not the one this shardproof "
               "renders (edited, or written by another version)",
               path)
        .with_hint(hint);
  return Status();
}

}  // namespace sp::report
