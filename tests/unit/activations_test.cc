// The activation trace (evidence/activations.h): records, the recorder's tp filter, reading, and
// the comparer's first difference in forward order, on synthetic run directories.
#include "evidence/activations.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "core/file_io.h"
#include "core/hash.h"
#include "evidence/bundle_paths.h"
#include "temp_dir.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

class ActivationsTest : public ::testing::Test {
 protected:
  std::string dir(const std::string& name) { return root_.file(name); }
  const sp::test::TempDir root_;
};

std::vector<std::string> points(int layers, bool logits = true) {
  std::vector<std::string> p = {"embed"};
  for (int i = 0; i < layers; ++i) p.push_back(fmt::format("block.{}", i));
  p.push_back("final_norm");
  if (logits) p.push_back("logits");
  return p;
}

// A record whose data is a small pure function of its key.
ActivationRecord synth(int64_t step, int64_t mb, const std::string& point, int rank) {
  std::vector<float> data(16);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(step * 1000 + mb * 100 + static_cast<int64_t>(i)) + static_cast<float>(point.size());
  return make_activation_record(step, mb, point, rank, data.data(), static_cast<int64_t>(data.size()));
}

std::vector<ActivationRecord> synth_run(int steps, int mbs, int layers, bool logits = true) {
  std::vector<ActivationRecord> out;
  for (int s = 0; s < steps; ++s)
    for (int mb = 0; mb < mbs; ++mb)
      for (const std::string& p : points(layers, logits)) out.push_back(synth(s, mb, p, 0));
  return out;
}

// Writes records into activations/rank-NNNNN.jsonl; `rank_of` picks the file (and the rank field).
void write_run(
    const std::string& run, std::vector<ActivationRecord> records,
    const std::function<int(const ActivationRecord&)>& rank_of = [](const ActivationRecord&) { return 0; },
    bool reverse = false) {
  fs::create_directories(run + "/activations");
  std::map<int, std::string> files;
  if (reverse) std::reverse(records.begin(), records.end());
  for (ActivationRecord& r : records) {
    r.rank = rank_of(r);
    files[r.rank] += r.to_json().dump() + "\n";
  }
  for (const auto& [rank, text] : files) ASSERT_TRUE(write_file(RunPaths(run).activations(rank), text).ok());
}

template <class Records>  // std::vector<ActivationRecord>, const or not
auto* find_record(Records& rs, int64_t step, int64_t mb, const std::string& point) {
  decltype(&rs.front()) found = nullptr;
  for (auto& r : rs)
    if (r.step == step && r.micro_batch == mb && r.point == point) found = &r;
  return found;
}

void flip(ActivationRecord* r) {
  ASSERT_NE(r, nullptr);
  r->digest[0] = r->digest[0] == '0' ? '1' : '0';
}

TEST(ActivationRecord, DigestAndNormOfTheBytes) {
  const std::vector<float> x = {3.0f, -4.0f, 12.0f, 0.0f};  // ‖x‖ = 13
  const ActivationRecord r = make_activation_record(2, 5, "block.1", 3, x.data(), 4);
  EXPECT_EQ(r.digest, xxh3_128(x.data(), sizeof(float) * x.size()).hex());
  EXPECT_EQ(r.l2, 13.0);
  EXPECT_EQ(r.numel, 4);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["micro_batch"], 5);
  EXPECT_EQ(j["point"], "block.1");
  EXPECT_EQ(j["rank"], 3);
  const std::string line = r.to_line();  // fields in the documented order
  EXPECT_LT(line.find("\"step\""), line.find("\"micro_batch\""));
  EXPECT_LT(line.find("\"micro_batch\""), line.find("\"point\""));
  EXPECT_LT(line.find("\"digest\""), line.find("\"l2\""));
  EXPECT_LT(line.find("\"l2\""), line.find("\"numel\""));
  const std::vector<float> bad = {1.0f, std::nanf("")};
  const ActivationRecord n = make_activation_record(0, 0, "embed", 0, bad.data(), 2);
  EXPECT_TRUE(std::isnan(n.l2));
  EXPECT_TRUE(n.to_json()["l2"].is_null());
}

// A 16-bit activation (mixed precision's final_norm and logits) records as its exact fp32 widening: the same
// digest and L2, across several widening blocks (kWidenBlock) and a partial last one.
TEST(ActivationRecord, SixteenBitIsItsWidening) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    const int64_t n = 2 * kWidenBlock + 123;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.01 * static_cast<double>(i)) * 3.0;
    std::vector<uint16_t> h(x.size());
    float16_from_f32(h.data(), x.data(), n, t);
    f32_from_float16(x.data(), h.data(), n, t);  // x := the widened 16-bit values
    const ActivationRecord r16 = make_activation_record(1, 0, "logits", 0, ConstBufView(h.data(), n, t));
    const ActivationRecord r32 = make_activation_record(1, 0, "logits", 0, x.data(), n);
    EXPECT_EQ(r16.digest, r32.digest) << dtype_name(t);
    EXPECT_EQ(r16.digest, xxh3_128(x.data(), sizeof(float) * x.size()).hex());
    EXPECT_EQ(r16.l2, r32.l2);
    EXPECT_EQ(r16.numel, n);
  }
}

TEST(ActivationPoint, ForwardOrder) {
  const std::vector<std::string> order = {"embed", "block.0", "block.1", "block.2", "block.10", "final_norm", "logits"};
  for (size_t i = 0; i + 1 < order.size(); ++i)
    EXPECT_LT(*activation_point_order(order[i]), *activation_point_order(order[i + 1])) << order[i];
  for (const char* bad : {"block.", "block.01", "block.-1", "block.x", "layers.3", "norm", "", "Embed"})
    EXPECT_FALSE(activation_point_order(bad).has_value()) << bad;
}

TEST_F(ActivationsTest, EqualRunsAcrossDifferentRankSplits) {
  const auto records = synth_run(4, 4, 4);
  write_run(dir("ref"), records);
  write_run(
      dir("run"), records, [](const ActivationRecord& r) { return static_cast<int>(r.micro_batch); }, true);
  auto c = compare_activations(dir("run"), dir("ref"), true);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->equal());
  EXPECT_EQ(c->compared, 4 * 4 * 7);
  EXPECT_EQ(c->bitwise_equal, c->compared);
  EXPECT_EQ(c->first_step, 0);
  EXPECT_EQ(c->last_step, 3);
  EXPECT_FALSE(c->first.has_value());
}

TEST_F(ActivationsTest, FlippedDigestAtBlock2Step3IsFirst) {
  const auto ref = synth_run(5, 4, 4);
  auto run = ref;
  flip(find_record(run, 3, 1, "block.2"));
  // Later in forward order, but earlier in the file (reversed) or at a smaller micro-batch index.
  flip(find_record(run, 3, 0, "final_norm"));
  flip(find_record(run, 3, 0, "logits"));
  flip(find_record(run, 4, 0, "embed"));
  write_run(dir("ref"), ref);
  write_run(
      dir("run"), run, [](const ActivationRecord& r) { return static_cast<int>(r.micro_batch / 2); }, true);
  auto c = compare_activations(dir("run"), dir("ref"), true);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->equal());
  ASSERT_TRUE(c->first.has_value());
  EXPECT_EQ(c->first->step, 3);
  EXPECT_EQ(c->first->point, "block.2");
  EXPECT_EQ(c->first->micro_batch, 1);
  EXPECT_EQ(c->first->rank, 0);  // micro-batch 1 lives in rank-00000
  EXPECT_EQ(c->first->got_digest, find_record(run, 3, 1, "block.2")->digest);
  EXPECT_EQ(c->first->want_digest, find_record(ref, 3, 1, "block.2")->digest);
  EXPECT_NE(c->first->message.find("block.2"), std::string::npos);
  EXPECT_EQ(c->differing, 4);
  ASSERT_EQ(c->differing_per_step.size(), 2u);
  EXPECT_EQ(c->differing_per_step[0], (std::pair<int64_t, int64_t>{3, 3}));
  EXPECT_EQ(c->differing_per_step[1], (std::pair<int64_t, int64_t>{4, 1}));
  EXPECT_EQ(c->to_json()["first_difference"]["point"], "block.2");
}

TEST_F(ActivationsTest, OrderIsStepThenPointThenMicroBatchWithNumericLayers) {
  const auto ref = synth_run(3, 4, 12);
  auto run = ref;
  flip(find_record(run, 2, 0, "block.10"));
  flip(find_record(run, 2, 3, "block.2"));
  flip(find_record(run, 2, 2, "block.2"));
  write_run(dir("ref"), ref);
  write_run(dir("run"), run, [](const ActivationRecord& r) { return static_cast<int>(r.micro_batch); });
  auto c = compare_activations(dir("run"), dir("ref"), true);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->first.has_value());
  EXPECT_EQ(c->first->point, "block.2");  // not block.10, although "block.10" < "block.2" as text
  EXPECT_EQ(c->first->micro_batch, 2);
  EXPECT_EQ(c->first->rank, 2);
}

TEST_F(ActivationsTest, MissingAndExtraRecords) {
  const auto ref = synth_run(4, 4, 2);
  {
    auto run = ref;
    std::erase_if(run,
                  [](const ActivationRecord& r) { return r.step == 2 && r.micro_batch == 3 && r.point == "embed"; });
    write_run(dir("missing"), run);
  }
  {
    auto run = ref;
    run.push_back(synth(1, 7, "block.0", 0));  // a micro-batch the reference does not have
    write_run(dir("extra"), run);
  }
  {
    auto run = ref;  // the run stopped after step 1 (crash): the steps it reached are compared
    std::erase_if(run, [](const ActivationRecord& r) { return r.step > 1; });
    write_run(dir("short"), run);
  }
  {
    auto run = synth_run(6, 4, 2);  // the reference stopped earlier: later run records are not compared
    write_run(dir("long"), run);
  }
  {
    auto run = ref;  // a step cut short: the rest of its records are missing
    std::erase_if(run, [](const ActivationRecord& r) { return r.step == 3 && r.micro_batch >= 2; });
    write_run(dir("cut"), run);
  }
  write_run(dir("ref"), ref);

  auto m = compare_activations(dir("missing"), dir("ref"), true);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(m->first.has_value());
  EXPECT_EQ(m->first->step, 2);
  EXPECT_EQ(m->first->point, "embed");
  EXPECT_EQ(m->first->micro_batch, 3);
  EXPECT_EQ(m->first->rank, -1);
  EXPECT_EQ(m->first->ref_rank, 0);
  EXPECT_NE(m->first->message.find("missing in the run"), std::string::npos);

  auto e = compare_activations(dir("extra"), dir("ref"), true);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->first.has_value());
  EXPECT_EQ(e->first->step, 1);
  EXPECT_EQ(e->first->micro_batch, 7);
  EXPECT_EQ(e->first->ref_rank, -1);
  EXPECT_NE(e->first->message.find("not in the reference"), std::string::npos);

  auto s = compare_activations(dir("short"), dir("ref"), true);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->equal());
  EXPECT_EQ(s->last_step, 1);
  EXPECT_EQ(s->compared, 2 * 4 * 5);

  auto l = compare_activations(dir("long"), dir("ref"), true);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->equal());
  EXPECT_EQ(l->unmatched, 2 * 4 * 5);

  auto c = compare_activations(dir("cut"), dir("ref"), true);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->first.has_value());
  EXPECT_EQ(c->first->step, 3);
  EXPECT_EQ(c->first->point, "embed");
  EXPECT_EQ(c->first->micro_batch, 2);
  EXPECT_EQ(c->differing, 2 * 5);
}

TEST_F(ActivationsTest, ToleranceModeComparesRelativeL2) {
  const auto ref = synth_run(2, 2, 2);
  auto run = ref;
  ActivationRecord* r = find_record(run, 1, 1, "block.1");
  flip(r);
  r->l2 *= 1 + 1e-7;
  write_run(dir("ref"), ref);
  write_run(dir("run"), run);
  auto bitwise = compare_activations(dir("run"), dir("ref"), true);
  ASSERT_TRUE(bitwise.ok());
  EXPECT_FALSE(bitwise->equal());
  auto loose = compare_activations(dir("run"), dir("ref"), false, 1e-6);
  ASSERT_TRUE(loose.ok());
  EXPECT_TRUE(loose->equal());
  EXPECT_EQ(loose->bitwise_equal, loose->compared - 1);
  EXPECT_NEAR(loose->max_rel_l2, 1e-7, 1e-9);
  auto tight = compare_activations(dir("run"), dir("ref"), false, 1e-8);
  ASSERT_TRUE(tight.ok());
  ASSERT_TRUE(tight->first.has_value());
  EXPECT_EQ(tight->first->point, "block.1");
  EXPECT_NEAR(tight->first->rel_l2, 1e-7, 1e-9);
  EXPECT_NE(tight->first->message.find("tolerance"), std::string::npos);
}

TEST_F(ActivationsTest, NonFiniteNeverWithinTolerance) {
  const auto ref = synth_run(1, 1, 1);
  auto run = ref;
  ActivationRecord* r = find_record(run, 0, 0, "block.0");
  flip(r);
  r->l2 = std::nan("");
  write_run(dir("ref"), ref);
  write_run(dir("run"), run);
  auto c = compare_activations(dir("run"), dir("ref"), false, 1.0);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->first.has_value());
  EXPECT_EQ(c->first->point, "block.0");
}

TEST_F(ActivationsTest, LogitsComparedOnlyWhenBothSidesHaveThem) {
  write_run(dir("ref"), synth_run(2, 2, 2, /*logits=*/true));
  write_run(dir("tp"), synth_run(2, 2, 2, /*logits=*/false));  // a tp > 1 run
  auto c = compare_activations(dir("tp"), dir("ref"), true);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->equal());
  EXPECT_EQ(c->compared, 2 * 2 * 4);
  auto back = compare_activations(dir("ref"), dir("tp"), true);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->equal());
}

TEST_F(ActivationsTest, NotRecorded) {
  fs::create_directories(dir("plain"));
  write_run(dir("ref"), synth_run(1, 1, 1));
  auto c = compare_activations(dir("plain"), dir("ref"), true);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->recorded);
  EXPECT_FALSE(c->equal());
  auto r = compare_activations(dir("ref"), dir("plain"), true);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->recorded);
  EXPECT_FALSE(r->reference_recorded);
  EXPECT_FALSE(r->equal());
}

TEST_F(ActivationsTest, BadFilesNameFileAndLine) {
  const auto ref = synth_run(1, 1, 1);
  write_run(dir("ref"), ref);
  const std::string good = ref[0].to_json().dump() + "\n" + ref[1].to_json().dump() + "\n";
  fs::create_directories(dir("bad") + "/activations");
  ASSERT_TRUE(write_file(RunPaths(dir("bad")).activations(4), good + "{\"step\": 0}\n").ok());
  auto bad = compare_activations(dir("bad"), dir("ref"), true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank-00004.jsonl:3"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("micro_batch"), std::string::npos) << bad.status().message();

  fs::create_directories(dir("point") + "/activations");
  nlohmann::json j = ref[0].to_json();
  j["point"] = "layers.0";
  ASSERT_TRUE(write_file(RunPaths(dir("point")).activations(0), j.dump() + "\n").ok());
  auto point = read_activations(dir("point"));
  ASSERT_FALSE(point.ok());
  EXPECT_NE(point.status().message().find("layers.0"), std::string::npos);

  fs::create_directories(dir("dup") + "/activations");
  ASSERT_TRUE(write_file(RunPaths(dir("dup")).activations(0), good).ok());
  ASSERT_TRUE(write_file(RunPaths(dir("dup")).activations(1), ref[1].to_json().dump() + "\n").ok());
  auto dup = read_activations(dir("dup"));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("already recorded"), std::string::npos);

  fs::create_directories(dir("cut") + "/activations");  // a rank killed mid-line: the partial line is ignored
  ASSERT_TRUE(write_file(RunPaths(dir("cut")).activations(0), good + "{\"step\": 0, \"micro_").ok());
  auto cut = read_activations(dir("cut"));
  ASSERT_TRUE(cut.ok()) << cut.status().to_string();
  EXPECT_EQ(cut->records.size(), 2u);
}

TEST_F(ActivationsTest, RecorderWritesOnlyTpRankZeroAndLogitsOnlyAtTp1) {
  const std::vector<float> x = {1.0f, 2.0f};
  auto write_all = [&](int rank, int tp_rank, int tp) {
    auto r = ActivationRecorder::open(dir("run"), rank, tp_rank, tp);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    (*r)->observe("embed", 0, f32_view(x.data(), 2));  // before begin_step: not a training step, nothing written
    (*r)->begin_step(4);
    for (const char* p : {"embed", "block.0", "final_norm", "logits"})
      (*r)->observe(p, 1 + rank, f32_view(x.data(), 2));
    EXPECT_TRUE((*r)->status().ok());
  };
  write_all(0, 0, 1);  // tp = 1: all four points
  write_all(1, 0, 2);  // tp rank 0 of a tp pair: no logits
  write_all(2, 1, 2);  // tp rank 1: nothing
  auto t = read_activations(dir("run"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->records.size(), 4u + 3u);
  for (const ActivationRecord& r : t->records) {
    EXPECT_EQ(r.step, 4);
    EXPECT_EQ(r.micro_batch, 1 + r.rank);
    EXPECT_EQ(r.digest, xxh3_128(x.data(), sizeof(float) * 2).hex());
    EXPECT_NE(r.rank, 2);
    if (r.rank == 1) {
      EXPECT_NE(r.point, "logits");
    }
  }
  EXPECT_TRUE(fs::exists(RunPaths(dir("run")).activations(2)));
  EXPECT_EQ(fs::file_size(RunPaths(dir("run")).activations(2)), 0u);
}

TEST_F(ActivationsTest, PrepareKeepsStepsBeforeResume) {
  write_run(dir("run"), synth_run(4, 2, 1), [](const ActivationRecord& r) { return static_cast<int>(r.micro_batch); });
  ASSERT_TRUE(prepare_activation_dir(dir("run"), 2).ok());
  auto t = read_activations(dir("run"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->records.size(), 2u * 2u * 4u);
  for (const ActivationRecord& r : t->records) EXPECT_LT(r.step, 2);
  ASSERT_TRUE(prepare_activation_dir(dir("run"), 0).ok());  // a fresh run: old files go
  auto empty = read_activations(dir("run"));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->records.empty());
  EXPECT_TRUE(prepare_activation_dir(dir("nothing"), 0).ok());
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
