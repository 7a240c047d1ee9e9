// The executor of one slot: takes a claimed run, holds its stack lock, runs
// its steps one transaction each (checkpoint, cursor, status and audit events
// together, fenced by the version) until the run parks, finishes, is handed
// back or is lost. One Executor per slot thread; it owns that slot's
// connection and is not shared between threads.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "definition.hpp"
#include "lease_book.hpp"
#include "model.hpp"
#include "plugin_loader.hpp"
#include "store.hpp"

namespace cairn {

class Metrics;

struct ExecutorOptions {
  std::string worker_id;
  std::chrono::milliseconds lease{30000};
  // When another session holds the stack lock, the run is handed back and
  // becomes due again after this.
  std::chrono::milliseconds stack_busy_delay{1000};
  Metrics* metrics = nullptr;  // null: record nothing
};

enum class ExecutionEnd {
  kParked,      // ready in the future, waiting, or finished: nothing more to do now
  kHandedBack,  // released without consuming an attempt (shutdown, stack held elsewhere)
  kLost,        // the lease or the version fence was lost: someone else owns the run
};

class Executor {
 public:
  Executor(store::ConnectionOptions connection_options, const DefinitionSet& definitions,
           const PluginRegistry& plugins, ExecutorOptions options, LeaseBook& leases);
  ~Executor();

  // Executes a run claimed by this worker. `stopping` asks it to hand the run
  // back after the step in flight commits. Never throws for a step's failure;
  // database errors end the run's turn here (kLost) and are logged.
  ExecutionEnd Execute(Run claimed, const std::atomic<bool>& stopping);

  // False after a connection error: the slot should build a new Executor.
  bool Healthy() const;

 private:
  struct StepResult;
  ExecutionEnd ExecuteLocked(Run& run, const std::atomic<bool>& stopping);
  StepResult RunStep(Run& run, const WorkflowDefinition& workflow, const StepDefinition& step);
  bool Release(const Run& run, std::chrono::milliseconds delay);

  // A wait the run resumes from, claimed by a signal: merged into the context
  // before the next step, then carried by that step's commit (resumed_).
  struct Resumed {
    std::string correlation_key;
    std::string claimant;
    std::vector<RunEvent> events;
  };
  std::optional<store::Resume> resume_;
  std::optional<Resumed> resumed_;

  std::unique_ptr<store::Connection> connection_;
  const DefinitionSet& definitions_;
  const PluginRegistry& plugins_;
  ExecutorOptions options_;
  LeaseBook& leases_;
};

}  // namespace cairn
