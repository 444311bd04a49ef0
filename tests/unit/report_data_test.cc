// The report's data and page (report/report_data.h, report/render.h) on small synthetic directories:
// the embedded data survive the page byte for byte whatever their strings hold ("</script>", "<!--",
// '&'), the data are a function of the bundle's bytes and not of where it lies (a moved copy gives the
// same document, with no absolute path in it), a missing file is a problem naming it, what is not a
// bundle is refused naming what was looked for, and check_report (what `verify` runs) names the value
// of an edited report. The end-to-end cases, in a real browser, are tests/report/report_test.py.
#include "report/report_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "report/render.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::report {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;
using json = nlohmann::json;

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(write_file_atomic(path, text).ok()) << path;
}

// A compare directory: compare.json with a reference row and an error row that names the directory by
// its absolute path (as compare writes it), and the reference run's metrics.jsonl.
void make_compare_dir(const std::string& dir) {
  json rows = json::array();
  rows.push_back({{"label", "dp1"},
                  {"dir", dir + "/dp1"},
                  {"world", 1},
                  {"dp", 1},
                  {"tp", 1},
                  {"pp", 1},
                  {"zero", 0},
                  {"ok", true},
                  {"equivalence", {{"class", "reference"}}},
                  {"time", {{"step_s_median", 0.25}}}});
  rows.push_back({{"label", "tp8"},
                  {"dir", dir + "/tp8"},
                  {"world", 8},
                  {"ok", false},
                  {"error", "not run: " + dir + "/tp8: model.n_kv_heads = 4 is not divisible by parallel.tp = 8"}});
  write(dir + "/compare.json",
        json{{"format_version", 1}, {"ok", false}, {"preset", "tiny"}, {"strategies", "tp8"}, {"rows", rows}}.dump(2));
  write(dir + "/dp1/metrics.jsonl",
        "{\"step\":-1,\"eval_loss\":7.5}\n{\"step\":0,\"loss\":7.25,\"grad_norm\":1.5,\"tokens_per_s\":1000}\n"
        "{\"step\":1,\"loss\":7.0,\"grad_norm\":1.25,\"tokens_per_s\":1100,\"eval_loss\":6.75}\n");
}

const json& view(const json& data, const std::string& id) {
  for (const json& v : data["views"])
    if (v["id"] == id) return v;
  static const json none;
  return none;
}

TEST(ReportPage, DataSurviveThePageWhateverTheirStringsHold) {
  const json data = {{"format", "shardproof-report"},
                     {"kind", "run"},
                     {"title", "a <b>title</b> & more"},
                     {"problems", json::array({"x.json: </script><script>alert(1)</script>", "<!-- -->"})},
                     {"views", json::array({{{"id", "curves"}, {"data", {{"v", 0.1 + 0.2}, {"s", "∑ ≠ ×"}}}}})}};
  const std::string page = render_report(data);
  auto back = embedded_report_data(page, "page");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, data);
  // The data element ends at its own </script>: the strings cannot close it early.
  const size_t open = page.find("id=\"sp-data\">");
  EXPECT_EQ(page.find("</script", open), page.find("</script>", open));
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  // The problems are in the markup itself (the page says them without its script), escaped.
  EXPECT_NE(page.find("<li>x.json: &lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("<title>a &lt;b&gt;title&lt;/b&gt; &amp; more</title>"), std::string::npos);
  // Nothing may be fetched.
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(render_report(data), page) << "the page is a pure function of the data";
}

TEST(ReportPage, NotAPage) {
  EXPECT_FALSE(embedded_report_data("<html>nothing</html>", "x.html").ok());
  auto bad = embedded_report_data("<script type=\"application/json\" id=\"sp-data\">{</script>", "x.html");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.html"), std::string::npos);
}

TEST(ReportData, NotABundleNamesWhatWasLookedFor) {
  const sp::test::TempDir t;
  auto r = report_data(t.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exit_code(), 2);
  for (const char* f : {"prove.json", "compare.json", "contract.json"})
    EXPECT_NE(r.status().message().find(f), std::string::npos) << r.status().message();
  auto missing = report_data(t.path() + "/nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("is not a directory"), std::string::npos);
  write(t.path() + "/prove.json", "{}");
  EXPECT_EQ(*bundle_kind_of(t.path()), BundleKind::kProof);
}

TEST(ReportData, CompareDirectoryIsAFunctionOfItsBytesNotOfItsPlace) {
  const sp::test::TempDir a, b;
  make_compare_dir(a.path() + "/c");
  auto da = report_data(a.path() + "/c");
  ASSERT_TRUE(da.ok()) << da.status().message();
  EXPECT_EQ((*da)["kind"], "compare");
  EXPECT_TRUE(report_problems(*da).empty()) << da->dump(1);
  const json& curves = view(*da, "curves");
  ASSERT_FALSE(curves.is_null());
  EXPECT_EQ(curves["data"]["runs"][0]["loss"], json::array({7.25, 7.0}));
  EXPECT_EQ(curves["data"]["runs"][0]["eval"][1]["eval_loss"], 6.75);
  EXPECT_EQ(curves["data"]["runs"][0]["file"], "dp1/metrics.jsonl");
  EXPECT_EQ(view(*da, "compare")["data"]["rows"].size(), 2u);
  EXPECT_EQ(da->dump().find(a.path()), std::string::npos) << "an absolute path leaked into the data";
  // The error row keeps its message, with the path relative to the bundle.
  EXPECT_NE(da->dump().find("not run: tp8: model.n_kv_heads"), std::string::npos) << da->dump(1);

  // The same bytes elsewhere (compare.json's own "dir" fields still name the old place).
  fs::copy(a.path() + "/c", b.path() + "/moved", fs::copy_options::recursive);
  auto db = report_data(b.path() + "/moved/");
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*db, *da);
}

TEST(ReportData, MissingFileIsAProblemNamingIt) {
  const sp::test::TempDir t;
  make_compare_dir(t.path());
  fs::remove(t.path() + "/dp1/metrics.jsonl");
  auto d = report_data(t.path());
  ASSERT_TRUE(d.ok());
  const auto problems = report_problems(*d);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "dp1/metrics.jsonl: missing");
  EXPECT_EQ(view(*d, "curves")["problems"][0], "dp1/metrics.jsonl: missing");
  auto written = write_report(t.path());
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, problems);
}

TEST(ReportData, AFileOfAnUnexpectedShapeIsAProblemNotACrash) {
  const sp::test::TempDir t;
  make_compare_dir(t.path());
  write(t.path() + "/compare.json", R"({"rows": [{"label": "dp1", "memory": 5}], "preset": 7})");
  auto d = report_data(t.path());
  ASSERT_TRUE(d.ok());
  const auto problems = report_problems(*d);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("unexpected structure"), std::string::npos) << problems[0];
  write(t.path() + "/dp1/metrics.jsonl", "{\"step\": \"zero\", \"loss\": 1}\n[1, 2]\n");
  auto again = report_data(t.path());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(render_report(*again).empty());
}

TEST(ReportCheck, AnEditedReportFailsNamingTheFileAndTheValue) {
  const sp::test::TempDir t;
  make_compare_dir(t.path());
  ASSERT_TRUE(write_report(t.path()).ok());
  EXPECT_TRUE(check_report(t.path()).ok());
  const std::string path = t.path() + "/report.html";
  const std::string page = read_file(path).value();

  // The data: a strategy made to look ok.
  std::string forged = page;
  const size_t at = forged.find("\"ok\":false");
  ASSERT_NE(at, std::string::npos);
  forged.replace(at, 10, "\"ok\":true ");
  write(path, forged);
  Status s = check_report(t.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("report.html"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("shows true, the bundle gives false"), std::string::npos) << s.message();
  EXPECT_NE(s.hint().find("shardproof report"), std::string::npos);

  // The page around the data.
  std::string retitled = page;
  retitled.replace(retitled.find("<title>"), 7, "<title>PASS ");
  write(path, retitled);
  s = check_report(t.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the page around them"), std::string::npos) << s.message();

  // The bundle changed after the report was written.
  write(path, page);
  std::string metrics = read_file(t.path() + "/dp1/metrics.jsonl").value();
  metrics.replace(metrics.find("7.25"), 4, "9.5");
  write(t.path() + "/dp1/metrics.jsonl", metrics);
  s = check_report(t.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/loss/0: the page shows 7.25, the bundle gives 9.5"), std::string::npos) << s.message();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::report
