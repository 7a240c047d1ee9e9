// Process isolation, the daemon's side: steps that run in supervised child
// processes (`cairn step-host`, step_host.hpp) instead of on threads of the
// daemon. A pool keeps idle step processes for reuse; a slot takes one for
// each step call and gives it back. A step process that crashes, runs out of
// memory or overruns the step's timeout (it is then killed) is replaced by a
// new one, and the attempt fails with code "crashed" or "timeout": the
// daemon's other runs go on, and no thread is ever left behind. Thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin_registry.hpp"
#include "step.hpp"

namespace cairn::plugins {

struct StepProcessOptions {
  std::string executable;  // the cairn binary; "" = this process's own (/proc/self/exe)
  std::vector<std::string> plugin_paths;  // what each step process loads
  std::string log_level = "info";
  std::string log_format = "text";
  uint64_t memory_limit = 0;  // bytes of address space per step process; 0 = none
  std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
};

class StepProcesses : public std::enable_shared_from_this<StepProcesses> {
 public:
  // Starts the first step process and learns from it which plugins and
  // steps there are. Throws PluginError when the plugins do not load (with
  // the loader's message) or the process does not start.
  static std::shared_ptr<StepProcesses> Start(StepProcessOptions options);
  ~StepProcesses();
  StepProcesses(const StepProcesses&) = delete;
  StepProcesses& operator=(const StepProcesses&) = delete;

  // The plugins a step process loaded, in load order.
  const std::vector<PluginInfo>& plugins() const { return plugins_; }

  // The step `step_name` run in a step process, or nullptr when no plugin
  // registered it.
  std::shared_ptr<Step> Find(const std::string& step_name);

  // Starts step processes, on a thread of the pool's own, until `count` are
  // idle, so that as many steps can begin without waiting for one to load
  // its plugins (the daemon asks for one per slot). Returns at once: the
  // daemon's readiness does not wait for them. One that does not start is
  // warned about: a step that finds no idle process starts its own.
  void KeepReady(int count);
  // Stops KeepReady's thread: no more processes are launched, those already
  // launched are awaited, and the thread is joined. A daemon calls it as it
  // stops, while logging still works.
  void StopWarmUp();

  // Step processes started so far (a crashed or killed one is replaced).
  int64_t started() const;
  // Step processes waiting for a step.
  size_t Idle() const;

 private:
  struct Process;
  explicit StepProcesses(StepProcessOptions options);
  std::unique_ptr<Process> Spawn();  // Launch, then AwaitReady
  // Starts a step process on the spawner thread and returns without waiting
  // for it to be ready. A step process dies with the thread that started it
  // (PR_SET_PDEATHSIG, so that none outlives a killed daemon): started on a
  // slot's or KeepReady's thread, it would die when that thread ends, even
  // in the middle of another slot's step. The spawner lives as the pool does.
  std::unique_ptr<Process> Launch();
  std::unique_ptr<Process> LaunchHere();  // on the spawner thread
  void RunSpawner();
  void AwaitReady(Process& process);
  void FillIdle(int count);  // KeepReady's thread
  std::unique_ptr<Process> Acquire();
  void Release(std::unique_ptr<Process> process);
  friend class ProcessStep;

  StepProcessOptions options_;
  std::vector<PluginInfo> plugins_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Process>> idle_;
  int64_t started_ = 0;
  std::thread warmer_;  // KeepReady's, joined before the processes go
  std::atomic<bool> warm_up_stopped_{false};
  std::mutex spawner_mutex_;
  std::condition_variable spawner_wake_;
  std::deque<std::packaged_task<std::unique_ptr<Process>()>> launches_;
  bool spawner_stop_ = false;
  std::thread spawner_;  // started last, by the constructor
};

}  // namespace cairn::plugins
