// report.html: one self-contained page for a report's data (report_data.h). The page holds the data as
// one JSON element (<script type="application/json" id="sp-data">) that its script draws every view
// from, Chart.js and its own script and style inlined (embedded in the binary at build time), and a
// Content-Security-Policy that forbids every network request. Not the data (report_data.h).
// Invariant: render_report is a pure function of the data (so `verify` can re-render and compare), and
// embedded_report_data(render_report(d)) == d for every document report_data produces.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace sp::report {

std::string render_report(const nlohmann::json& data);

// The JSON element of a report.html page; errors name `label` (the file) and what is wrong.
Result<nlohmann::json> embedded_report_data(std::string_view html, const std::string& label);

// report_data(dir) rendered into `out` (default DIR/report.html), atomically. Returns the problems the
// data list (empty: complete). Errors: DIR is not a bundle (exit 2), the file cannot be written.
Result<std::vector<std::string>> write_report(const std::string& dir, const std::string& out = {});

// For `verify`: DIR/report.html must be exactly the page this shardproof renders for DIR. The message
// names the file and the first value that differs ("views/0/data/verdict: report.html shows "PASS",
// the bundle gives "FAIL"").
Status check_report(const std::string& dir);

}  // namespace sp::report
