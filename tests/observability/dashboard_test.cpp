// Checks the Grafana dashboard (ops/grafana/cairn.json) against the metrics
// cairn exports: every metric its PromQL queries name is a family of
// Metrics (a histogram's _bucket, _sum and _count included), and every label
// a query matches on is one of that family's labels. No database.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "metrics.hpp"
#include "test_paths.hpp"

namespace cairn {
namespace {

using Json = nlohmann::json;

Json LoadDashboard() {
  std::ifstream in(cairn::test::SourceDir() + "/ops/grafana/cairn.json");
  if (!in) throw std::runtime_error("cannot read ops/grafana/cairn.json");
  return Json::parse(in);
}

// Every PromQL expression of the dashboard: panel targets (rows included)
// and query variables.
void CollectQueries(const Json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    if (node.contains("expr") && node["expr"].is_string()) out.push_back(node["expr"]);
    if (node.contains("definition") && node["definition"].is_string()) {
      out.push_back(node["definition"]);
    }
    for (const auto& [key, value] : node.items()) CollectQueries(value, out);
  } else if (node.is_array()) {
    for (const auto& value : node) CollectQueries(value, out);
  }
}

struct Known {
  std::string family;  // the family a series name belongs to
  std::set<std::string> labels;
};

// Series name -> family and the labels a query may match on.
std::map<std::string, Known> ExportedSeries() {
  std::map<std::string, Known> series;
  const std::set<std::string> target_labels = {"job", "instance"};  // added by Prometheus
  for (const auto& family : Metrics().registry().Families()) {
    std::set<std::string> labels(family.label_names.begin(), family.label_names.end());
    labels.insert(target_labels.begin(), target_labels.end());
    if (family.type == "histogram") {
      series[family.name + "_sum"] = {family.name, labels};
      series[family.name + "_count"] = {family.name, labels};
      labels.insert("le");
      series[family.name + "_bucket"] = {family.name, labels};
    } else {
      series[family.name] = {family.name, labels};
    }
  }
  return series;
}

TEST(Dashboard, NamesOnlyMetricsAndLabelsThatCairnExports) {
  const Json dashboard = LoadDashboard();
  std::vector<std::string> queries;
  CollectQueries(dashboard, queries);
  ASSERT_GE(queries.size(), 10u);
  const auto exported = ExportedSeries();
  const std::regex metric(R"(\b(cairn_[A-Za-z0-9_:]+)(\{([^}]*)\})?)");
  const std::regex matcher(R"(([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=))");
  std::set<std::string> named;
  for (const auto& query : queries) {
    for (auto it = std::sregex_iterator(query.begin(), query.end(), metric);
         it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      auto known = exported.find(name);
      if (known == exported.end()) {
        ADD_FAILURE() << "the dashboard names " << name
                      << ", which cairn does not export, in: " << query;
        continue;
      }
      named.insert(known->second.family);
      const std::string matchers = (*it)[3];
      for (auto m = std::sregex_iterator(matchers.begin(), matchers.end(), matcher);
           m != std::sregex_iterator(); ++m) {
        EXPECT_EQ(known->second.labels.count((*m)[1]), 1u)
            << name << " has no label " << (*m)[1] << ", in: " << query;
      }
    }
  }
  // The panels the dashboard is for.
  for (const char* family :
       {"cairn_steps_total", "cairn_step_duration_seconds", "cairn_queue_runs",
        "cairn_queue_oldest_due_age_seconds", "cairn_leases_lost_total", "cairn_worker_healthy",
        "cairn_runs_finished_total", "cairn_executor_slots"}) {
    EXPECT_EQ(named.count(family), 1u) << "no panel shows " << family;
  }
}

TEST(Dashboard, IsAGrafanaDashboardWithATitleAUidAndPanelsOnThePrometheusDatasource) {
  const Json dashboard = LoadDashboard();
  EXPECT_EQ(dashboard.value("title", ""), "cairn");
  EXPECT_FALSE(dashboard.value("uid", "").empty());
  ASSERT_TRUE(dashboard["panels"].is_array());
  std::set<int> ids;
  for (const auto& panel : dashboard["panels"]) {
    EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "duplicate panel id " << panel["id"];
    EXPECT_FALSE(panel.value("title", "").empty());
    if (panel["type"] == "row") continue;
    EXPECT_EQ(panel["datasource"]["uid"], "${datasource}") << panel["title"];
    ASSERT_TRUE(panel["targets"].is_array()) << panel["title"];
    EXPECT_FALSE(panel["targets"].empty()) << panel["title"];
  }
}

}  // namespace
}  // namespace cairn
