// Child runs against the harness's real PostgreSQL server, with real
// `cairn run` daemons and the `cairn` CLI: a step starts children in its
// commit and waits for all of them or the first to finish; cancelling a
// parent cancels its unfinished children. Assertions are on the database.
// Workflows: tests/workflows/children.yaml.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"
#include "history_sql.hpp"
#include "pg_session.hpp"

namespace cairn::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

class Children : public DaemonTest {
 protected:
  Children() : DaemonTest("tests/workflows/children.yaml") {}

  // A ch_work child description.
  static Json Work(int n, int sleep_ms = 0, bool fail = false) {
    Json input = {{"n", n}, {"sleep_ms", sleep_ms}};
    if (fail) input["fail"] = true;
    return Json{{"workflow", "ch_work"}, {"input", input}};
  }

  // The input of a ch_parent starting `children` and waiting in `mode`
  // ("" = not waiting).
  static Json ParentInput(const Json& children, const std::string& mode) {
    Json input = {{"children", children}};
    if (!mode.empty()) input["child_wait"] = mode;
    return input;
  }

  Json JsonOf(const std::string& sql) const {
    const std::string text = Sql(sql);
    if (text.empty()) return Json();
    return Json::parse(text);
  }

  // The ids of the child_started events of a run, in history order.
  std::vector<std::string> StartedChildIds(const std::string& parent) const {
    const Json ids = JsonOf(
        "SELECT coalesce(jsonb_agg(value->>'id' ORDER BY position), '[]'::jsonb) "
        "FROM {s}.run_events WHERE run_id = '" +
        parent + "' AND kind = 'child_started'");
    return ids.get<std::vector<std::string>>();
  }

  std::set<std::string> ChildRows(const std::string& parent) const {
    const Json ids = JsonOf(
        "SELECT coalesce(jsonb_agg(id::text), '[]'::jsonb) FROM {s}.runs WHERE parent_run_id = '" +
        parent + "'");
    const auto list = ids.get<std::vector<std::string>>();
    return {list.begin(), list.end()};
  }

  std::string StatusSummary() const {
    return Sql("SELECT coalesce(string_agg(workflow || ':' || status || '=' || n, ', ' "
               "ORDER BY workflow, status), 'no runs') FROM (SELECT workflow, status, count(*) AS "
               "n "
               "FROM {s}.runs GROUP BY workflow, status) s") +
           "; waits: " +
           Sql("SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'none') "
               "FROM (SELECT status, count(*) AS n FROM {s}.wait_records GROUP BY status) s");
  }
};

// Five children finishing in another order than they were started (the
// sleeps make n=2 finish first and n=1 last): the parent resumes once, when
// the last finishes, with the five summaries in start order.
TEST_F(Children, WaitForAllResumesOnceWithEverySummaryInStartOrder) {
  constexpr size_t kChildren = 5;
  auto daemon = StartDaemon(6);
  const std::string parent = StartRun(
      "ch_parent",
      ParentInput({Work(1, 800), Work(2, 0), Work(3, 400), Work(4, 200), Work(5, 600)}, "all"));
  ASSERT_TRUE(WaitForStatus(parent, "completed")) << StatusSummary() << daemon->Log();

  // The history names the children, and they are the child rows.
  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), kChildren);
  EXPECT_EQ(ChildRows(parent), std::set<std::string>(started.begin(), started.end()));
  EXPECT_EQ(Sql("SELECT string_agg(value->>'workflow', ',' ORDER BY position) FROM {s}.run_events "
                "WHERE run_id = '" +
                parent + "' AND kind = 'child_started'"),
            "ch_work,ch_work,ch_work,ch_work,ch_work");
  // Each child got its own element of the parent's list.
  for (size_t i = 0; i < started.size(); ++i) {
    EXPECT_EQ(RunColumn(started[i], "input->>'n'"), std::to_string(i + 1));
    EXPECT_EQ(RunColumn(started[i], "status"), "completed");
    EXPECT_EQ(RunColumn(started[i], "parent_run_id"), parent);
  }
  // They did not finish in the order they started: the first started is
  // the last to finish.
  EXPECT_TRUE(
      SqlBool("SELECT a.finished_at > b.finished_at FROM {s}.runs a, {s}.runs b "
              "WHERE a.id = '" +
              started[0] + "' AND b.id = '" + started[1] + "'"));
  // The parent resumed after the last child finished.
  EXPECT_TRUE(
      SqlBool("SELECT max(c.finished_at) <= p.finished_at FROM {s}.runs c, {s}.runs p "
              "WHERE c.parent_run_id = p.id AND p.id = '" +
              parent +
              "' GROUP BY p.id, "
              "p.finished_at"));

  // The wait: one record for children 'all', keyed by the parent and the
  // version it waited at, resumed; the children report to it.
  const std::string key =
      Sql("SELECT correlation_key FROM {s}.wait_records WHERE run_id = '" + parent + "'");
  EXPECT_EQ(key.rfind("children:" + parent + ":", 0), 0u) << key;
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE run_id = '" + parent + "'"), 1);
  EXPECT_EQ(Sql("SELECT status || '/' || children || '/' || event || '/' || continuation_step "
                "FROM {s}.wait_records WHERE run_id = '" +
                parent + "'"),
            "RESUMED/all/children/after");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE parent_run_id = '" + parent +
                   "' AND parent_wait_key = '" + key + "'"),
            static_cast<int64_t>(kChildren));
  const Json waiting = JsonOf("SELECT value FROM {s}.run_events WHERE run_id = '" + parent +
                              "' AND kind = 'waiting'");
  EXPECT_EQ(waiting, (Json{{"event", "children"}, {"key", key}, {"children", "all"}}));

  EXPECT_EQ(RunEventCount(parent, "waiting"), 1);
  EXPECT_EQ(RunEventCount(parent, "resumed"), 1);
  EXPECT_EQ(RunEventCount(parent, "completed"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + parent + "' AND " +
                   kStepCommits + " AND step = 'after'"),
            1);

  // The summaries, in start order, in the context and the output.
  const Json summaries =
      JsonOf("SELECT output->'context'->'children' FROM {s}.runs WHERE id = '" + parent + "'");
  ASSERT_TRUE(summaries.is_array()) << summaries;
  ASSERT_EQ(summaries.size(), kChildren) << summaries;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const Json& s = summaries[i];
    EXPECT_EQ(s.value("id", ""), started[i]) << "summary " << i << " of " << summaries;
    EXPECT_EQ(s.value("workflow", ""), "ch_work") << s;
    EXPECT_EQ(s.value("status", ""), "completed") << s;
    EXPECT_EQ(s["output"], (Json{{"n", static_cast<int>(i + 1)}, {"run_id", started[i]}})) << s;
    EXPECT_TRUE(s.contains("error") && s["error"].is_null()) << s;
  }
  EXPECT_EQ(JsonOf("SELECT context->'children' FROM {s}.runs WHERE id = '" + parent + "'"),
            summaries);
  Stop(*daemon);
}

// Wait for the first: a fast child and a slow one. The parent resumes with
// the fast child's summary alone and completes before the slow child
// finishes; the slow child's end changes nothing for the parent.
TEST_F(Children, WaitForFirstResumesOnceWithTheFirstChildToFinish) {
  auto daemon = StartDaemon(4);
  Json input = ParentInput({Work(1, 1500), Work(2, 0)}, "first");
  input["children_event"] = "winner";
  const std::string parent = StartRun("ch_parent", input);
  ASSERT_TRUE(WaitForStatus(parent, "completed")) << StatusSummary() << daemon->Log();

  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), 2u);
  const std::string slow = started[0];
  const std::string fast = started[1];
  EXPECT_EQ(ChildRows(parent), (std::set<std::string>{slow, fast}));

  const Json summaries =
      JsonOf("SELECT output->'context'->'winner' FROM {s}.runs WHERE id = '" + parent + "'");
  ASSERT_TRUE(summaries.is_array()) << summaries;
  ASSERT_EQ(summaries.size(), 1u) << summaries;
  EXPECT_EQ(summaries[0].value("id", ""), fast) << summaries;
  EXPECT_EQ(summaries[0].value("status", ""), "completed") << summaries;
  EXPECT_EQ(summaries[0]["output"], (Json{{"n", 2}, {"run_id", fast}})) << summaries;
  EXPECT_EQ(Sql("SELECT status || '/' || children || '/' || event FROM {s}.wait_records "
                "WHERE run_id = '" +
                parent + "'"),
            "RESUMED/first/winner");
  EXPECT_EQ(Sql("SELECT value->>'children' FROM {s}.run_events WHERE run_id = '" + parent +
                "' AND kind = 'waiting'"),
            "first");

  // The slow child still runs to its end, after the parent finished.
  ASSERT_TRUE(WaitForStatus(slow, "completed")) << StatusSummary() << daemon->Log();
  EXPECT_TRUE(
      SqlBool("SELECT p.finished_at < c.finished_at FROM {s}.runs p, {s}.runs c "
              "WHERE p.id = '" +
              parent + "' AND c.id = '" + slow + "'"));
  EXPECT_EQ(RunColumn(slow, "output->>'n'"), "1");
  std::this_thread::sleep_for(400ms);  // a second resume would need a poll or two

  EXPECT_EQ(RunColumn(parent, "status"), "completed");
  EXPECT_EQ(RunEventCount(parent, "resumed"), 1);
  EXPECT_EQ(RunEventCount(parent, "completed"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events WHERE run_id = '" + parent + "' AND " +
                   kStepCommits + " AND step = 'after'"),
            1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  EXPECT_EQ(JsonOf("SELECT output->'context'->'winner' FROM {s}.runs WHERE id = '" + parent + "'"),
            summaries);
  Stop(*daemon);
}

// A failing child does not fail its parent: the parent resumes with the
// child's status and error in the summaries, and its next step decides.
TEST_F(Children, FailedChildrenAreReportedToTheParentWhichResumes) {
  auto daemon = StartDaemon(4);
  const std::string parent = StartRun(
      "ch_parent", ParentInput({Work(1, 0, true), Work(2, 100), Work(3, 200, true)}, "all"));
  ASSERT_TRUE(WaitForStatus(parent, "completed")) << StatusSummary() << daemon->Log();

  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(RunColumn(started[0], "status"), "failed");
  EXPECT_EQ(RunColumn(started[1], "status"), "completed");
  EXPECT_EQ(RunColumn(started[2], "status"), "failed");

  const Json summaries =
      JsonOf("SELECT output->'context'->'children' FROM {s}.runs WHERE id = '" + parent + "'");
  ASSERT_TRUE(summaries.is_array()) << summaries;
  ASSERT_EQ(summaries.size(), 3u) << summaries;
  // Matched by id, so that this test does not depend on the order.
  for (const Json& s : summaries) {
    const std::string id = s.value("id", "");
    if (id == started[1]) {
      EXPECT_EQ(s.value("status", ""), "completed") << s;
      EXPECT_EQ(s["output"], (Json{{"n", 2}, {"run_id", id}})) << s;
      EXPECT_TRUE(s["error"].is_null()) << s;
    } else {
      EXPECT_TRUE(id == started[0] || id == started[2]) << s;
      EXPECT_EQ(s.value("status", ""), "failed") << s;
      ASSERT_TRUE(s["error"].is_string()) << s;
      EXPECT_NE(s["error"].get<std::string>().find("told to fail"), std::string::npos) << s;
      EXPECT_EQ(s["error"].get<std::string>(), RunColumn(id, "error")) << s;
      EXPECT_TRUE(s["output"].is_null()) << s;
    }
  }
  std::set<std::string> ids;
  for (const Json& s : summaries) ids.insert(s.value("id", ""));
  EXPECT_EQ(ids, std::set<std::string>(started.begin(), started.end()));

  EXPECT_EQ(RunEventCount(parent, "resumed"), 1);
  EXPECT_EQ(RunEventCount(parent, "failed"), 0);
  EXPECT_EQ(RunColumn(parent, "error"), "");
  EXPECT_EQ(Sql("SELECT status FROM {s}.wait_records WHERE run_id = '" + parent + "'"), "RESUMED");
  Stop(*daemon);
}

// 40 parents of 6 quick children each, two daemons with 8 slots: siblings
// finish at the same moment on different slots and daemons, and still
// exactly one of them resumes each parent, with all six summaries. (With 3
// children and 4 slots a report_to_parent without its key lock lost a
// parent only about every other run; this shape loses one every time.)
TEST_F(Children, ManyParentsOnTwoDaemonsEachResumeExactlyOnce) {
  constexpr int kParents = 40;
  constexpr int kChildren = 6;
  auto a = StartDaemon(8);
  auto b = StartDaemon(8);
  ASSERT_TRUE(a->Running() && b->Running());

  Json children = Json::array();
  for (int n = 1; n <= kChildren; ++n) children.push_back(Work(n));
  const Json input = ParentInput(children, "all");
  Sql("SELECT count({s}.start_run('ch_parent', '" + input.dump() +
      "'::jsonb)) FROM generate_series(1, " + std::to_string(kParents) + ")");

  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_parent' "
              "AND status = 'completed'",
              kParents, 30s))
      << StatusSummary();
  Stop(*a);
  Stop(*b);

  EXPECT_EQ(CountRuns("completed", "ch_work"), kChildren * kParents) << StatusSummary();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), (kChildren + 1) * kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs c JOIN {s}.runs p ON p.id = c.parent_run_id "
                   "WHERE c.workflow = 'ch_work' AND p.workflow = 'ch_parent'"),
            kChildren * kParents);
  EXPECT_EQ(EventCount("child_started"), kChildren * kParents);
  EXPECT_EQ(EventCount("resumed"), kParents);
  EXPECT_EQ(SqlInt("SELECT count(DISTINCT run_id) FROM {s}.run_events WHERE kind = 'resumed'"),
            kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.run_events e JOIN {s}.runs r ON r.id = e.run_id "
                   "WHERE e.kind = 'completed' AND r.workflow = 'ch_parent'"),
            kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT run_id, step FROM {s}.run_events "
                   "WHERE " +
                   kStepCommits + " GROUP BY run_id, step HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE children = 'all' "
                   "AND status = 'RESUMED'"),
            kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);

  // Each parent's summaries: six, all completed, exactly its own children
  // with their own outputs. (Their order is checked by
  // WaitForAllResumesOnceWithEverySummaryInStartOrder.)
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs p WHERE p.workflow = 'ch_parent' "
                   "AND jsonb_array_length(p.output->'context'->'children') = " +
                   std::to_string(kChildren) +
                   " "
                   "AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p.output->'context'->"
                   "'children') s JOIN {s}.runs c ON c.id = (s->>'id')::uuid "
                   "WHERE c.parent_run_id <> p.id OR s->>'status' <> 'completed' "
                   "OR s->'output' <> c.output) "
                   "AND (SELECT count(DISTINCT s->>'id') FROM jsonb_array_elements("
                   "p.output->'context'->'children') s) = " +
                   std::to_string(kChildren)),
            kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs p WHERE p.workflow = 'ch_parent' AND "
                   "(SELECT string_agg(s->'output'->>'n', ',' ORDER BY s->'output'->>'n') "
                   "FROM jsonb_array_elements(p.output->'context'->'children') s) = "
                   "'1,2,3,4,5,6'"),
            kParents);
  // Both daemons served the load.
  EXPECT_GT(a->ClaimedAtStop(), 0) << a->Log();
  EXPECT_GT(b->ClaimedAtStop(), 0) << b->Log();
}

// `cairn cancel` of a parent waiting for children that wait themselves:
// the whole tree (a child that is a parent too, and its own child) is
// cancelled, every wait with it, and nobody resumes.
TEST_F(Children, CancellingAParentCancelsItsUnfinishedChildrenRecursively) {
  auto daemon = StartDaemon(4);
  const Json park = {{"workflow", "ch_park"}, {"input", Json::object()}};
  const Json mid = {{"workflow", "ch_parent"}, {"input", ParentInput(Json::array({park}), "all")}};
  const std::string parent = StartRun("ch_parent", ParentInput({park, mid, park}, "all"));
  // parent, mid and three ch_park runs all wait.
  ASSERT_TRUE(WaitFor("SELECT count(*) FROM {s}.runs WHERE status = 'waiting'", 5, 15s))
      << StatusSummary() << daemon->Log();
  ASSERT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE status = 'WAITING'"), 5);

  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), 3u);
  const std::string mid_id = started[1];
  EXPECT_EQ(RunColumn(mid_id, "workflow"), "ch_parent");
  const std::vector<std::string> grandchildren = StartedChildIds(mid_id);
  ASSERT_EQ(grandchildren.size(), 1u);
  EXPECT_EQ(RunColumn(grandchildren[0], "parent_run_id"), mid_id);
  // A run that finished before the cancel is left alone.
  const std::string bystander = StartRun("ch_work", {{"n", 9}});
  ASSERT_TRUE(WaitForStatus(bystander, "completed")) << StatusSummary();

  auto cancel = Cli({"cancel", parent, "--reason", "test cancels the tree"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;

  EXPECT_EQ(RunColumn(parent, "status"), "cancelled");
  EXPECT_EQ(RunColumn(parent, "cancel_reason"), "test cancels the tree");
  for (const std::string& child : started) {
    EXPECT_EQ(RunColumn(child, "status"), "cancelled") << child;
    EXPECT_EQ(RunColumn(child, "cancel_reason"), "parent run " + parent + " was cancelled");
    EXPECT_EQ(RunEventCount(child, "cancelled"), 1) << child;
  }
  EXPECT_EQ(RunColumn(grandchildren[0], "status"), "cancelled");
  EXPECT_EQ(RunColumn(grandchildren[0], "cancel_reason"),
            "parent run " + mid_id + " was cancelled");
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 5);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE finished_at IS NULL"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE status = 'CANCELLED'"), 5);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 5);
  EXPECT_EQ(RunColumn(bystander, "status"), "completed");

  // Cancelled children do not resume their cancelled parents.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(EventCount("resumed"), 0);
  EXPECT_EQ(EventCount("signalled"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 5);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records WHERE status = 'CANCELLED'"), 5);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  EXPECT_EQ(RunColumn(parent, "context ? 'children'"), "f");

  // Cancelling again changes nothing.
  auto again = Cli({"cancel", parent});
  EXPECT_EQ(again.exit_code, 5) << again.out << again.err;  // already done
  EXPECT_EQ(Sql("SELECT outcome FROM {s}.cancel_run('" + mid_id + "')"), "already_finished");
  Stop(*daemon);
}

// A child of an unknown workflow: the parent's step fails permanently (one
// attempt), and none of its children exists, not even the known one started
// before it.
TEST_F(Children, UnknownChildWorkflowFailsTheParentStepAndStartsNoChild) {
  auto daemon = StartDaemon(2);
  const Json unknown = {{"workflow", "ch_no_such_workflow"}, {"input", Json::object()}};
  const std::string parent = StartRun("ch_parent", ParentInput({Work(1), unknown}, "all"));
  ASSERT_TRUE(WaitForStatus(parent, "failed")) << StatusSummary() << daemon->Log();

  const std::string error = RunColumn(parent, "error");
  EXPECT_NE(error.find("ch_no_such_workflow"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown workflow"), std::string::npos) << error;
  EXPECT_EQ(RunColumn(parent, "cursor"), "spawn");
  EXPECT_EQ(RunColumn(parent, "attempt"), "1");
  EXPECT_EQ(RunEventCount(parent, "failed"), 1);
  EXPECT_EQ(RunEventCount(parent, "retried"), 0);
  EXPECT_EQ(RunEventCount(parent, "child_started"), 0);
  EXPECT_EQ(RunEventCount(parent, "step_committed"), 0);
  EXPECT_EQ(RunEventCount(parent, "waiting"), 0);

  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs"), 1);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE parent_run_id IS NOT NULL"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.wait_records"), 0);
  EXPECT_EQ(RunColumn(parent, "status"), "failed");
  Stop(*daemon);
}

// Children the parent does not wait for: the parent goes on at once; each
// child still names its parent and finishes on its own, even after the
// finished parent was deleted (as retention does) before it.
TEST_F(Children, UnwaitedChildrenOutliveTheirParent) {
  auto daemon = StartDaemon();
  const std::string parent =
      StartRun("ch_parent", ParentInput(Json::array({Work(1, 1500), Work(2, 1500)}), ""));
  ASSERT_TRUE(WaitForStatus(parent, "completed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunEventCount(parent, "waiting"), 0);
  ASSERT_EQ(ChildRows(parent).size(), 2u);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE parent_run_id = '" + parent +
                   "' AND parent_wait_key IS NULL AND finished_at IS NULL"),
            2)
      << "the parent finished first; its children report to no wait";

  Sql("DELETE FROM {s}.runs WHERE id = '" + parent + "'");
  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_work' AND "
              "status = 'completed' AND parent_run_id IS NULL",
              2, 15s))
      << StatusSummary() << daemon->Log();
  Stop(*daemon);
}

// A wait for children whose timeout passes resumes nothing: the parent takes
// the wait's timeout path (here: none, so it fails), and the children that
// finish later change nothing.
TEST_F(Children, ExpiredWaitForChildrenFailsTheParentAndLateChildrenChangeNothing) {
  Json input = ParentInput(Json::array({Work(1, 2000)}), "all");
  input["children_timeout_ms"] = 300;
  auto daemon = StartDaemon();
  const std::string parent = StartRun("ch_parent", input);
  ASSERT_TRUE(WaitForStatus(parent, "failed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunEventCount(parent, "wait_expired"), 1);
  EXPECT_NE(RunColumn(parent, "error").find("timed out"), std::string::npos)
      << RunColumn(parent, "error");
  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_work' AND "
              "status = 'completed'",
              1, 15s))
      << StatusSummary() << daemon->Log();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(RunColumn(parent, "status"), "failed");
  EXPECT_EQ(RunEventCount(parent, "resumed"), 0);
  EXPECT_EQ(RunEventCount(parent, "signalled"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  Stop(*daemon);
}

// Children finished by an application's REPEATABLE READ transactions at the
// same time: the second one cannot miss the first (it fails with a
// serialisation error and its retry counts the last child down), so the
// parent resumes once with both summaries.
TEST_F(Children, SiblingsFinishedConcurrentlyAtRepeatableReadResumeTheParent) {
  auto daemon = StartDaemon(4);
  const Json park = {{"workflow", "ch_park"}, {"input", Json::object()}};
  const std::string parent = StartRun("ch_parent", ParentInput({park, park}, "all"));
  ASSERT_TRUE(WaitFor("SELECT count(*) FROM {s}.runs WHERE status = 'waiting'", 3, 15s))
      << StatusSummary() << daemon->Log();
  const std::vector<std::string> children = StartedChildIds(parent);
  ASSERT_EQ(children.size(), 2u);
  const std::string cancel = "SELECT outcome FROM \"" + schema() + "\".cancel_run($1::uuid)";

  PgSession first(url());
  PgSession second(url());
  first.Value("BEGIN ISOLATION LEVEL REPEATABLE READ");
  second.Value("BEGIN ISOLATION LEVEL REPEATABLE READ");
  second.Value("SELECT 1");  // its snapshot predates the first's commit
  ASSERT_EQ(first.Value(cancel, {children[0]}), "cancelled");
  std::string second_error;
  std::thread racer([&] {
    try {
      second.Value(cancel, {children[1]});  // queues behind the first
      second.Value("COMMIT");
    } catch (const std::exception& e) {
      second_error = e.what();
      second.Value("ROLLBACK");
    }
  });
  std::this_thread::sleep_for(300ms);
  first.Value("COMMIT");
  racer.join();
  if (!second_error.empty()) {
    EXPECT_NE(second_error.find("could not serialize"), std::string::npos) << second_error;
    EXPECT_EQ(second.Value(cancel, {children[1]}), "cancelled");  // the application's retry
  }

  ASSERT_TRUE(WaitForStatus(parent, "completed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunEventCount(parent, "resumed"), 1);
  const Json summaries =
      JsonOf("SELECT context->'children' FROM {s}.runs WHERE id = '" + parent + "'");
  ASSERT_EQ(summaries.size(), 2u) << summaries.dump();
  EXPECT_EQ(summaries[0]["status"], "cancelled");
  EXPECT_EQ(summaries[1]["status"], "cancelled");
  Stop(*daemon);
}

// ---- Children cancelled with their parent, as they asked -------------------

// A parent that fails for good cancels, in the commit that fails it, the
// children that asked (cancel_when_parent_fails) and their own children; a
// child started without the option (the plain start_child of older plugins)
// keeps running. `cairn show` names what each child asked for.
TEST_F(Children, AFailingParentCancelsTheChildrenThatAskedAndLeavesTheOthers) {
  auto daemon = StartDaemon(4);
  Json asking_park = {
      {"workflow", "ch_park"}, {"input", Json::object()}, {"cancel_when_parent_fails", true}};
  const Json plain_park = {{"workflow", "ch_park"}, {"input", Json::object()}};
  const Json asking_mid = {{"workflow", "ch_parent"},
                           {"input", ParentInput(Json::array({plain_park}), "all")},
                           {"cancel_when_parent_fails", true},
                           {"cancel_when_first_done", true}};
  const std::string parent = StartRun(
      "ch_doomed",
      {{"children", {asking_park, plain_park, asking_mid}}, {"message", "the parent gives up"}});
  // parent (hold), its two parks, mid and mid's park all wait.
  ASSERT_TRUE(WaitFor("SELECT count(*) FROM {s}.runs WHERE status = 'waiting'", 5, 15s))
      << StatusSummary() << daemon->Log();
  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), 3u);
  const std::string& asking = started[0];
  const std::string& plain = started[1];
  const std::string& mid = started[2];
  const std::vector<std::string> grandchildren = StartedChildIds(mid);
  ASSERT_EQ(grandchildren.size(), 1u);

  // What each asked for: on the child's row, in the parent's history and in
  // `cairn show`.
  EXPECT_EQ(RunColumn(asking, "cancel_when_parent_fails::text || cancel_when_first_done::text"),
            "truefalse");
  EXPECT_EQ(RunColumn(plain, "cancel_when_parent_fails::text || cancel_when_first_done::text"),
            "falsefalse");
  EXPECT_EQ(JsonOf("SELECT jsonb_agg(value->'cancel_when' ORDER BY position) FROM {s}.run_events "
                   "WHERE run_id = '" +
                   parent + "' AND kind = 'child_started'"),
            Json::array({Json::array({"parent_fails"}), nullptr,
                         Json::array({"parent_fails", "first_done"})}));
  const CommandResult shown = Cli({"show", mid, "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(Json::parse(shown.out)["cancel_when"], Json::array({"parent_fails", "first_done"}))
      << shown.out;
  const CommandResult shown_plain = Cli({"show", plain, "--json"});
  ASSERT_EQ(shown_plain.exit_code, 0) << shown_plain.err;
  EXPECT_EQ(Json::parse(shown_plain.out)["cancel_when"], Json::array()) << shown_plain.out;
  const CommandResult text = Cli({"show", asking});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("cancel_when         [\"parent_fails\"]"), std::string::npos) << text.out;

  Sql("SELECT {s}.signal('go:" + parent + "')");
  ASSERT_TRUE(WaitForStatus(parent, "failed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunColumn(parent, "error"), "the parent gives up");

  // Cancelled in the transaction that failed the parent: no poll later.
  for (const std::string& child : {asking, mid}) {
    EXPECT_EQ(RunColumn(child, "status"), "cancelled") << child;
    EXPECT_EQ(RunColumn(child, "cancel_reason"), "parent run " + parent + " failed") << child;
    EXPECT_EQ(RunEventCount(child, "cancelled"), 1) << child;
    EXPECT_TRUE(
        SqlBool("SELECT c.finished_at = p.finished_at FROM {s}.runs c, {s}.runs p "
                "WHERE c.id = '" +
                child + "' AND p.id = '" + parent + "'"))
        << child;
  }
  EXPECT_EQ(RunColumn(grandchildren[0], "status"), "cancelled");
  EXPECT_EQ(RunColumn(grandchildren[0], "cancel_reason"), "parent run " + mid + " was cancelled");
  // One step started both: they are cancelled in no set order.
  EXPECT_EQ(
      JsonOf(
          "SELECT value || jsonb_build_object('ids', (SELECT jsonb_agg(i ORDER BY i COLLATE \"C\") "
          "FROM jsonb_array_elements_text(value->'ids') i)) FROM {s}.run_events "
          "WHERE run_id = '" +
          parent + "' AND kind = 'children_cancelled'"),
      (Json{{"because", "parent_failed"},
            {"ids", asking < mid ? Json::array({asking, mid}) : Json::array({mid, asking})}}));
  // The history reads: failed, then the children it cancelled.
  EXPECT_EQ(Sql("SELECT string_agg(kind, ',' ORDER BY position) FROM {s}.run_events "
                "WHERE run_id = '" +
                parent + "' AND kind IN ('failed', 'children_cancelled')"),
            "failed,children_cancelled");

  // The child that asked for nothing still waits, and still finishes.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(RunColumn(plain, "status"), "waiting");
  Sql("SELECT {s}.signal('go:" + plain + "')");
  ASSERT_TRUE(WaitForStatus(plain, "completed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'cancelled'"), 3);
  Stop(*daemon);
}

// A parent whose wait for its children times out (no timeout step) fails in
// the sweeper's transaction, which cancels the children that asked.
TEST_F(Children, AWaitForChildrenThatTimesOutCancelsTheChildrenThatAsked) {
  auto daemon = StartDaemon(4);
  const Json asking = {
      {"workflow", "ch_park"}, {"input", Json::object()}, {"cancel_when_parent_fails", true}};
  const Json plain = {{"workflow", "ch_park"}, {"input", Json::object()}};
  Json input = ParentInput({asking, plain}, "all");
  input["children_timeout_ms"] = 1500;
  const std::string parent = StartRun("ch_parent", input);
  ASSERT_TRUE(WaitForStatus(parent, "failed")) << StatusSummary() << daemon->Log();
  EXPECT_EQ(RunEventCount(parent, "wait_expired"), 1);
  const std::vector<std::string> started = StartedChildIds(parent);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(RunColumn(started[0], "status"), "cancelled");
  EXPECT_EQ(RunColumn(started[0], "cancel_reason"), "parent run " + parent + " failed");
  EXPECT_EQ(RunColumn(started[1], "status"), "waiting");
  EXPECT_EQ(RunEventCount(parent, "resumed"), 0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.signal_inbox"), 0);
  Stop(*daemon);
}

// 20 parents on two daemons, each waiting for the first of four children:
// two quick ones that asked (cancel_when_first_done; they race to be first),
// one that parks and asked, one that parks and asked for nothing. The
// commit that resumes each parent cancels the children that asked and had
// not finished, each exactly once, naming the child that was first; the
// child that asked for nothing keeps waiting.
TEST_F(Children, AFirstWaitCancelsTheOtherChildrenThatAskedExactlyOnce) {
  constexpr int kParents = 20;
  auto a = StartDaemon(6);
  auto b = StartDaemon(6);
  ASSERT_TRUE(a->Running() && b->Running());
  Json quick_1 = Work(1);
  quick_1["cancel_when_first_done"] = true;
  Json quick_2 = Work(2);
  quick_2["cancel_when_first_done"] = true;
  const Json asking_park = {
      {"workflow", "ch_park"}, {"input", Json::object()}, {"cancel_when_first_done", true}};
  const Json plain_park = {{"workflow", "ch_park"}, {"input", Json::object()}};
  const Json input = ParentInput({quick_1, quick_2, asking_park, plain_park}, "first");
  Sql("SELECT count({s}.start_run('ch_parent', '" + input.dump() +
      "'::jsonb)) FROM generate_series(1, " + std::to_string(kParents) + ")");
  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_parent' "
              "AND status = 'completed'",
              kParents, 30s))
      << StatusSummary();
  // The parked children that asked for nothing, one a parent, all wait.
  ASSERT_TRUE(
      WaitFor("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_park' "
              "AND status = 'waiting'",
              kParents, 15s))
      << StatusSummary();
  Stop(*a);
  Stop(*b);

  EXPECT_EQ(EventCount("resumed"), kParents);
  // Nothing is cancelled twice, and nothing failed.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM (SELECT run_id FROM {s}.run_events WHERE kind = "
                   "'cancelled' GROUP BY run_id HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE status = 'failed'"), 0);
  // Every parked child that asked is cancelled, naming its parent's first.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs c JOIN {s}.runs p ON p.id = c.parent_run_id "
                   "WHERE c.workflow = 'ch_park' AND c.cancel_when_first_done "
                   "AND c.status = 'cancelled' AND c.cancel_reason = 'child run ' || "
                   "(p.output->'context'->'children'->0->>'id') || ' of parent run ' || p.id || "
                   "' finished first'"),
            kParents)
      << StatusSummary();
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_park' "
                   "AND NOT cancel_when_first_done AND status = 'waiting'"),
            kParents);
  // A quick child either was first, or finished on its own before its
  // parent resumed, or was cancelled by that resume; the first is never.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs c JOIN {s}.runs p ON p.id = c.parent_run_id "
                   "WHERE c.id::text = p.output->'context'->'children'->0->>'id' "
                   "AND c.status = 'completed'"),
            kParents);
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs WHERE workflow = 'ch_work' "
                   "AND status NOT IN ('completed', 'cancelled')"),
            0);
  // Each parent recorded one cancellation, of the children it cancelled.
  EXPECT_EQ(SqlInt("SELECT count(*) FROM {s}.runs p WHERE p.workflow = 'ch_parent' AND "
                   "(SELECT count(*) FROM {s}.run_events e WHERE e.run_id = p.id "
                   "AND e.kind = 'children_cancelled' AND e.value->>'because' = 'first_done' "
                   "AND jsonb_array_length(e.value->'ids') = (SELECT count(*) FROM {s}.runs c "
                   "WHERE c.parent_run_id = p.id AND c.status = 'cancelled')) = 1"),
            kParents);
  EXPECT_GT(a->ClaimedAtStop(), 0) << a->Log();
  EXPECT_GT(b->ClaimedAtStop(), 0) << b->Log();
}

}  // namespace
}  // namespace cairn::test
