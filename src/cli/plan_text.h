// The text form of `shardproof plan`'s documents (docs/plan.md §8): one configuration's evaluation and a
// search's ranking, printed from the same JSON that --json prints and plan.json holds, so the table is a
// view of the document and never a second computation. Not the planner (plan/) and not the HTML report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cluster.h"

namespace sp::cli {

// "cluster dgx-a100: 4 nodes × 8 …": the one line every plan output starts with.
std::string cluster_line(const planner::ClusterSpec& c);
// plan_evaluation_to_json's document as tables: placement, memory per rank, traffic, pipeline, step.
void print_evaluation(const nlohmann::json& j);
// search_result_to_json's document: the best 20, the exclusions per kind and rule.
void print_search(const nlohmann::json& j);

}  // namespace sp::cli
