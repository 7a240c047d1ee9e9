// Batch mode of the executor (executor.hpp, Executor::ExecuteBatch): many
// held runs, and a round of their steps committed in one transaction.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "executor_internal.hpp"

namespace cairn {

using executor_detail::RefusalOf;

std::vector<ExecutionEnd> Executor::ExecuteBatch(const std::vector<store::ClaimedRun>& claims,
                                                 const std::atomic<bool>& stopping) {
  std::vector<ExecutionEnd> ends(claims.size(), ExecutionEnd::kLost);
  std::vector<std::string> run_ids;
  for (const auto& claim : claims) run_ids.push_back(claim.run.id);
  std::vector<store::StackLockedRun> fresh;
  try {
    fresh = LockStackAndLoad(run_ids);
  } catch (const std::exception& e) {
    // Nothing ran: the runs' leases expire and they are taken over.
    spdlog::error("batch of {} runs: {}", claims.size(), e.what());
    return ends;
  }
  struct Unlock {
    store::Connection& connection;
    const std::vector<std::string>& run_ids;
    ~Unlock() {
      try {
        connection.UnlockStacks(run_ids);  // those still held
      } catch (const std::exception& e) {
        spdlog::warn("batch: releasing stack locks failed: {}", e.what());
      }
    }
  } unlock{*connection_, run_ids};
  // Every turn is in place before any step runs: deferred steps point into it.
  std::vector<Turn> turns;
  std::vector<size_t> claim_of;  // turn -> claim index
  turns.reserve(claims.size());
  for (size_t i = 0; i < claims.size(); ++i) {
    try {
      auto opened = Open(claims[i], std::move(fresh[i]));
      if (auto* turn = std::get_if<Turn>(&opened)) {
        turns.push_back(std::move(*turn));
        claim_of.push_back(i);
      } else {
        ends[i] = std::get<ExecutionEnd>(opened);
      }
    } catch (const std::exception& e) {
      spdlog::error("run {}: {}", claims[i].run.id, e.what());
    }
  }
  struct Drop {
    LeaseBook& leases;
    const std::vector<Turn>& turns;
    ~Drop() {
      for (const Turn& turn : turns) leases.Drop(turn.run.id);
    }
  } drop{leases_, turns};

  while (std::any_of(turns.begin(), turns.end(), [](const Turn& t) { return !t.end; })) {
    std::vector<Deferred> round;
    std::vector<Turn*> deferred_turns;
    std::vector<Turn*> active;
    round_ = &round;
    for (Turn& turn : turns) {
      if (turn.end) continue;
      active.push_back(&turn);
      const size_t before = round.size();
      try {
        Advance(turn, stopping);
      } catch (const std::exception& e) {
        spdlog::error("run {}: {}", turn.run.id, e.what());
        turn.end = ExecutionEnd::kLost;
      }
      if (round.size() > before) deferred_turns.push_back(&turn);
    }
    round_ = nullptr;
    std::vector<StepResult> results = CommitRound(round);
    for (size_t i = 0; i < results.size(); ++i) {
      Finish(*deferred_turns[i], std::move(results[i]));
    }
    // Runs whose turn ended this round let their stacks go now, not when the
    // batch ends: a signal may already have made one due for another worker.
    std::vector<std::string> ended;
    for (const Turn* turn : active) {
      if (turn->end) ended.push_back(turn->run.id);
    }
    try {
      if (!ended.empty()) connection_->UnlockStacks(ended);
    } catch (const std::exception& e) {
      spdlog::warn("batch: releasing stack locks failed: {}", e.what());
    }
  }
  for (size_t t = 0; t < turns.size(); ++t) ends[claim_of[t]] = *turns[t].end;
  return ends;
}

std::vector<Executor::StepResult> Executor::CommitRound(std::vector<Deferred>& round) {
  std::vector<StepResult> results;
  if (round.size() > 1) {
    try {
      std::vector<CommittedPlan> committed = connection_->Transact([&](store::Tx& tx) {
        std::vector<CommittedPlan> out;
        for (Deferred& step : round) out.push_back(Commit(tx, step.plan));
        return out;
      });
      for (size_t i = 0; i < round.size(); ++i) {
        results.push_back(Adopt(*round[i].run, round[i].plan, std::move(committed[i])));
      }
      return results;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kTransient || e.kind() == ErrorKind::kInDoubt) {
        // Whether the round landed is unknown: every run of it is lost, and
        // each one's lease expiry recovers it from what the database holds.
        spdlog::warn("batch round of {} checkpoints not confirmed: {}", round.size(), e.what());
        return std::vector<StepResult>(round.size(), StepResult{StepResult::End::kLost});
      }
      // A conflict or a refusal rolled the round back: each commits alone,
      // so that it hits only its own run.
      spdlog::info("batch round of {} checkpoints rolled back ({}); committing them one by one",
                   round.size(), e.what());
    }
  }
  for (Deferred& step : round) {
    results.push_back(CommitOrRecordRefusal(*step.run, std::move(step.plan), step.plan_for));
  }
  return results;
}

Executor::StepResult Executor::CommitOrRecordRefusal(Run& run, StepPlan plan,
                                                     const Planner& plan_for) {
  std::optional<StepOutcome> failure;
  try {
    return CommitAlone(run, std::move(plan));
  } catch (const Error& e) {
    failure = RefusalOf(e, options_.metrics, "run " + run.id);
    if (!failure) return {StepResult::End::kLost};
  }
  if (!plan_for) return {StepResult::End::kLost};
  try {
    return CommitAlone(run, plan_for(*failure));
  } catch (const std::exception& e) {
    spdlog::warn("run {}: recording the failure failed: {}", run.id, e.what());
    return {StepResult::End::kLost};
  }
}

}  // namespace cairn
