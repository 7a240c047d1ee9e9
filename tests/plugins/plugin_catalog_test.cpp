// The plugin catalog decides, for each (workflow, step), whether the step runs
// in a step process or on a thread of the daemon: the workflow's setting
// wins over the plugin's, which wins over the default. Real step processes of
// the built cairn binary, the real built plugins; no database.
#include "plugin_catalog.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test_paths.hpp"

namespace cairn {
namespace {

PluginCatalogOptions Options(Isolation isolation) {
  PluginCatalogOptions o;
  o.paths = {cairn::test::BuiltPluginDir()};
  o.isolation = isolation;
  o.processes.executable = cairn::test::CairnBinary();
  return o;
}

// In a step process, the step enforces its own timeout (its process is
// killed); on a thread it does not.
bool InProcess(const std::shared_ptr<Step>& step) { return step->EnforcesTimeout(); }

TEST(PluginCatalog, TheMostSpecificIsolationWins) {
  PluginCatalogOptions o = Options(Isolation::kProcess);
  o.by_plugin = {{"noop", Isolation::kThread}};
  o.by_workflow = {{"fast", Isolation::kThread}, {"careful", Isolation::kProcess}};
  o.workflow_steps = {{"fast", {"process_id"}}, {"careful", {"noop"}}, {"other", {"noop"}}};
  const PluginCatalog catalog(o);

  EXPECT_EQ(catalog.IsolationOf("test_steps", "fast"), Isolation::kThread);
  EXPECT_EQ(catalog.IsolationOf("test_steps", "other"), Isolation::kProcess);
  EXPECT_EQ(catalog.IsolationOf("test_steps"), Isolation::kProcess);
  EXPECT_EQ(catalog.IsolationOf("noop", "other"), Isolation::kThread);
  EXPECT_EQ(catalog.IsolationOf("noop", "careful"), Isolation::kProcess);

  // The same plugin step, per workflow.
  ASSERT_NE(catalog.Find("process_id", "fast"), nullptr);
  ASSERT_NE(catalog.Find("process_id", "other"), nullptr);
  EXPECT_FALSE(InProcess(catalog.Find("process_id", "fast")));
  EXPECT_TRUE(InProcess(catalog.Find("process_id", "other")));
  EXPECT_FALSE(InProcess(catalog.Find("noop", "other")));
  EXPECT_TRUE(InProcess(catalog.Find("noop", "careful")));
  EXPECT_EQ(catalog.Unrunnable("process_id", "fast"), "");
  ASSERT_NE(catalog.processes(), nullptr);
}

TEST(PluginCatalog, AWorkflowOnThreadsGetsOnlyThePluginsItsStepsNeed) {
  PluginCatalogOptions o = Options(Isolation::kProcess);
  o.by_workflow = {{"fast", Isolation::kThread}};
  o.workflow_steps = {{"fast", {"process_id"}}};
  const PluginCatalog catalog(o);
  // Another step of test_steps: its plugin is loaded in the daemon.
  ASSERT_NE(catalog.Find("echo", "fast"), nullptr);
  EXPECT_FALSE(InProcess(catalog.Find("echo", "fast")));
  // A step of the example plugin, which no workflow runs on threads: the
  // daemon never loaded it, so "fast" cannot run it until a restart.
  EXPECT_EQ(catalog.Find("reserve_stock", "fast"), nullptr);
  EXPECT_NE(catalog.Unrunnable("reserve_stock", "fast")
                .find("plugin step \"reserve_stock\" runs on a thread in workflow fast "
                      "(plugins.isolation_by_workflow), but its plugin 'example' was not loaded "
                      "in the daemon when it started"),
            std::string::npos)
      << catalog.Unrunnable("reserve_stock", "fast");
  ASSERT_NE(catalog.Find("reserve_stock", "other"), nullptr);
  EXPECT_TRUE(InProcess(catalog.Find("reserve_stock", "other")));
  EXPECT_NE(catalog.Unrunnable("no_such_step", "fast").find("unknown plugin step"),
            std::string::npos);
}

TEST(PluginCatalog, AWorkflowInStepProcessesStartsThemUnderThreadIsolation) {
  PluginCatalogOptions o = Options(Isolation::kThread);
  EXPECT_EQ(PluginCatalog(o).processes(), nullptr);
  o.by_workflow = {{"careful", Isolation::kProcess}};
  const PluginCatalog catalog(o);
  ASSERT_NE(catalog.processes(), nullptr);
  EXPECT_TRUE(InProcess(catalog.Find("noop", "careful")));
  EXPECT_FALSE(InProcess(catalog.Find("noop", "other")));
}

}  // namespace
}  // namespace cairn
