// The page's assets, embedded into the binary at build time by cmake/embed_files.cmake
// (src/report/CMakeLists.txt): Chart.js 3.9.1 from Debian's libjs-chart.js, and the page's own script
// and style (src/report/assets/). Not a copy in the tree: Chart.js is read from the Debian package.
// Invariant: each returns the file's exact bytes.
#pragma once

#include <string_view>

namespace sp::report::assets {

std::string_view chart_js();  // /usr/share/javascript/chart.js/chart.min.js
std::string_view page_js();   // src/report/assets/report.js: draws every view from the sp-data element
std::string_view page_css();  // src/report/assets/report.css

}  // namespace sp::report::assets
