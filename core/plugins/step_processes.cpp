// See step_processes.hpp.
#include "step_processes.hpp"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>

#include "step_host.hpp"
#include "step_protocol.hpp"

namespace cairn::plugins {

struct StepProcesses::Process {
  pid_t pid = 0;
  int fd = -1;

  Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // How the process ended, for a failure message; waits for it (killing it
  // when it lingers) so that no zombie is left.
  std::string Reap(bool kill_first) {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
    if (pid <= 0) return "gone";
    if (kill_first) ::kill(pid, SIGKILL);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    pid = 0;
    if (WIFSIGNALED(status)) {
      const int signal_number = WTERMSIG(status);
      const char* name = sigabbrev_np(signal_number);
      return "was killed by signal " + std::to_string(signal_number) +
             (name != nullptr ? std::string(" (SIG") + name + ")" : std::string());
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kStepHostOutOfMemory) {
      return "ran out of memory (plugins.memory_limit)";
    }
    return "exited with code " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }

  ~Process() {
    if (pid > 0 || fd >= 0) Reap(/*kill_first=*/false);
  }
};

namespace {

std::string FormatMs(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// The environment of a step process: the daemon's, without its database
// secret (a step reaches the database through the daemon only).
std::vector<std::string> StepProcessEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.starts_with("CAIRN_DATABASE_URL=") || entry.starts_with("PGPASSWORD=")) continue;
    env.push_back(entry);
  }
  return env;
}

}  // namespace

// A step served by the pool: each Invoke takes a step process, runs the step
// there and gives the process back, or replaces it when it died or overran.
class ProcessStep final : public Step {
 public:
  ProcessStep(std::shared_ptr<StepProcesses> pool, std::string name, std::string plugin)
      : pool_(std::move(pool)), name_(std::move(name)), plugin_(std::move(plugin)) {}

  const std::string& name() const override { return name_; }
  const std::string& plugin() const override { return plugin_; }
  bool EnforcesTimeout() const override { return true; }

  StepOutcome Invoke(const StepCall& call) override {
    const std::string& step = call.step.empty() ? name_ : call.step;
    const Json request = {{"type", "invoke"},
                          {"step", name_},
                          {"call",
                           {{"run_id", call.run_id},
                            {"workflow", call.workflow},
                            {"step", step},
                            {"compensates", call.compensates},
                            {"attempt", call.attempt},
                            {"input", call.input != nullptr ? *call.input : Json::object()},
                            {"context", call.context != nullptr ? *call.context : Json::object()},
                            {"transactional", call.sql != nullptr}}}};
    std::unique_ptr<StepProcesses::Process> process;
    try {
      // An idle process may have died since it was last used: the step did
      // not reach it, so one fresh process is tried before giving up.
      process = pool_->Acquire();
      if (!WriteFrame(process->fd, request)) {
        process->Reap(/*kill_first=*/true);
        process = pool_->Spawn();
        if (!WriteFrame(process->fd, request)) {
          return FailureOutcome("crashed", "step " + step + ": its step process " +
                                               process->Reap(true) + " before the step started");
        }
      }
    } catch (const std::exception& e) {
      return FailureOutcome("crashed", "step " + step + ": no step process: " + e.what());
    }
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (call.timeout.count() > 0) deadline = std::chrono::steady_clock::now() + call.timeout;
    while (true) {
      const ReadResult reply = ReadFrame(process->fd, deadline);
      if (reply.status == ReadStatus::kTimeout) {
        const std::string how = process->Reap(/*kill_first=*/true);
        return FailureOutcome("timeout", "step " + step + " exceeded its timeout of " +
                                             FormatMs(call.timeout) + "; its step process " + how);
      }
      if (reply.status != ReadStatus::kMessage) {
        const std::string how = process->Reap(/*kill_first=*/reply.status != ReadStatus::kClosed);
        spdlog::error("run {} workflow {} step {} attempt {}: the step process {}", call.run_id,
                      call.workflow, step, call.attempt, how);
        return FailureOutcome("crashed",
                              "step " + step + " crashed its step process, which " + how);
      }
      const std::string type = reply.message.value("type", "");
      if (type == "sql" || type == "idempotency") {
        Json answer =
            type == "sql" ? Answer(call, reply.message) : AnswerIdempotency(call, reply.message);
        if (!WriteFrame(process->fd, answer)) continue;  // the next read tells what happened
        continue;
      }
      if (type == "outcome") {
        StepOutcome outcome;
        try {
          outcome = OutcomeFromJson(reply.message.at("outcome"));
        } catch (const std::exception& e) {
          process->Reap(/*kill_first=*/true);
          return FailureOutcome("crashed", "step " + step +
                                               ": its step process sent a malformed "
                                               "outcome: " +
                                               e.what());
        }
        pool_->Release(std::move(process));
        return outcome;
      }
      process->Reap(/*kill_first=*/true);
      return FailureOutcome("crashed", "step " + step + ": its step process sent \"" + type + "\"");
    }
  }

 private:
  // Runs a transactional step's statement in the checkpoint's transaction.
  static Json Answer(const StepCall& call, const Json& request) {
    if (call.sql == nullptr) {
      return {{"type", "sql_error"},
              {"refused", true},
              {"message", "the step is not running as a transactional step"}};
    }
    try {
      return {{"type", "rows"},
              {"rows", call.sql->Execute(request.at("sql").get<std::string>(),
                                         request.value("params", Json::array()))}};
    } catch (const InvalidArgumentError& e) {
      return {{"type", "sql_error"}, {"refused", true}, {"message", e.what()}};
    } catch (const std::exception& e) {
      return {{"type", "sql_error"}, {"refused", false}, {"message", e.what()}};
    }
  }

  // Runs a step's idempotency call on the daemon's idempotency session.
  static Json AnswerIdempotency(const StepCall& call, const Json& request) {
    if (call.idempotency == nullptr) {
      return {{"type", "idempotency_error"},
              {"refused", true},
              {"message", "this host offers no idempotency store to step " + call.step}};
    }
    try {
      const std::string op = request.at("op").get<std::string>();
      const std::string key = request.at("key").get<std::string>();
      if (op == "claim") {
        const IdempotencyClaim claim = call.idempotency->Claim(
            key, std::chrono::milliseconds(request.at("lease_ms").get<int64_t>()));
        return {{"type", "idempotency"}, {"state", IdempotencyClaimToJson(claim)}};
      }
      if (op == "complete") {
        return {{"type", "idempotency"},
                {"done", call.idempotency->Complete(
                             key, request.at("result"),
                             std::chrono::milliseconds(request.at("ttl_ms").get<int64_t>()))}};
      }
      if (op == "fail") {
        return {{"type", "idempotency"},
                {"done", call.idempotency->Fail(key, request.at("error").get<std::string>())}};
      }
      return {{"type", "idempotency_error"},
              {"refused", true},
              {"message", "unknown idempotency call \"" + op + "\""}};
    } catch (const Error& e) {
      return {{"type", "idempotency_error"},
              {"refused", e.kind() == ErrorKind::kInvalidArgument},
              {"message", e.what()}};
    } catch (const Json::exception& e) {
      return {{"type", "idempotency_error"}, {"refused", true}, {"message", e.what()}};
    } catch (const std::exception& e) {
      return {{"type", "idempotency_error"}, {"refused", false}, {"message", e.what()}};
    }
  }

  std::shared_ptr<StepProcesses> pool_;
  std::string name_;
  std::string plugin_;
};

StepProcesses::StepProcesses(StepProcessOptions options) : options_(std::move(options)) {
  if (options_.executable.empty()) {
    std::vector<char> path(4096);
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
    if (n <= 0) throw PluginError("process isolation: cannot find the cairn binary");
    options_.executable.assign(path.data(), static_cast<size_t>(n));
  }
  spawner_ = std::thread([this] { RunSpawner(); });
}

StepProcesses::~StepProcesses() {
  StopWarmUp();
  {
    std::lock_guard lock(spawner_mutex_);
    spawner_stop_ = true;
  }
  spawner_wake_.notify_all();
  spawner_.join();
}

void StepProcesses::RunSpawner() {
  std::unique_lock lock(spawner_mutex_);
  while (true) {
    spawner_wake_.wait(lock, [&] { return spawner_stop_ || !launches_.empty(); });
    if (launches_.empty()) return;
    std::packaged_task<std::unique_ptr<Process>()> launch = std::move(launches_.front());
    launches_.pop_front();
    lock.unlock();
    launch();
    lock.lock();
  }
}

std::shared_ptr<StepProcesses> StepProcesses::Start(StepProcessOptions options) {
  std::shared_ptr<StepProcesses> pool(new StepProcesses(std::move(options)));
  // The first process tells which plugins there are, then waits for work.
  pool->Release(pool->Spawn());
  return pool;
}

std::unique_ptr<StepProcesses::Process> StepProcesses::Spawn() {
  std::unique_ptr<Process> process = Launch();
  AwaitReady(*process);
  return process;
}

void StepProcesses::KeepReady(int count) {
  if (warmer_.joinable()) warmer_.join();
  warm_up_stopped_ = false;
  warmer_ = std::thread([this, count] { FillIdle(count); });
}

void StepProcesses::StopWarmUp() {
  warm_up_stopped_ = true;
  if (warmer_.joinable()) warmer_.join();
}

void StepProcesses::FillIdle(int count) {
  size_t idle = 0;
  {
    std::lock_guard lock(mutex_);
    idle = idle_.size();
  }
  // All are launched before any is awaited: they load their plugins side by
  // side, so that a daemon with many slots is ready about as soon as one
  // with a single slot.
  std::vector<std::unique_ptr<Process>> launched;
  try {
    for (size_t i = idle; i < static_cast<size_t>(std::max(count, 0)); ++i) {
      if (warm_up_stopped_.load()) break;
      launched.push_back(Launch());
    }
    for (auto& process : launched) {
      AwaitReady(*process);
      Release(std::move(process));
    }
  } catch (const PluginError& e) {
    // The first process started, so the plugins load: a later step starts
    // its own process if it finds none idle.
    spdlog::warn("process isolation: {} of {} step processes ready: {}", Idle(), count, e.what());
  }
}

size_t StepProcesses::Idle() const {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

std::unique_ptr<StepProcesses::Process> StepProcesses::Launch() {
  std::packaged_task<std::unique_ptr<Process>()> launch([this] { return LaunchHere(); });
  std::future<std::unique_ptr<Process>> launched = launch.get_future();
  {
    std::lock_guard lock(spawner_mutex_);
    launches_.push_back(std::move(launch));
  }
  spawner_wake_.notify_all();
  return launched.get();  // rethrows LaunchHere's PluginError
}

std::unique_ptr<StepProcesses::Process> StepProcesses::LaunchHere() {
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw PluginError(std::string("process isolation: socketpair: ") + std::strerror(errno));
  }
  auto process = std::make_unique<Process>();
  process->fd = sockets[0];

  std::vector<std::string> args = {options_.executable, "step-host",
                                   "--parent-pid",      std::to_string(::getpid()),
                                   "--log-level",       options_.log_level,
                                   "--log-format",      options_.log_format,
                                   "--memory-limit",    std::to_string(options_.memory_limit)};
  for (const auto& path : options_.plugin_paths) {
    args.emplace_back("--plugin");
    args.push_back(path);
  }
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = StepProcessEnvironment();
  std::vector<char*> envp;
  for (auto& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The step process's end of the socket becomes its fd 3 (dup2 clears
  // close-on-exec there); everything else of the daemon's stays behind.
  posix_spawn_file_actions_adddup2(&actions, sockets[1], 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The daemon blocks its stop signals in every thread; the step process
  // ignores them itself and lives until the daemon closes its socket.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  const int error = ::posix_spawn(&process->pid, options_.executable.c_str(), &actions, &attr,
                                  argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(sockets[1]);
  if (error != 0) {
    process->pid = 0;
    throw PluginError("process isolation: cannot start " + options_.executable + ": " +
                      std::strerror(error));
  }
  return process;
}

void StepProcesses::AwaitReady(Process& process) {
  const ReadResult hello =
      ReadFrame(process.fd, std::chrono::steady_clock::now() + options_.start_timeout);
  if (hello.status != ReadStatus::kMessage) {
    throw PluginError("process isolation: the step process " +
                      process.Reap(hello.status == ReadStatus::kTimeout) +
                      " before it was ready (its log says why)");
  }
  if (hello.message.value("type", "") != "ready") {
    throw PluginError(hello.message.value("message", "the step process refused to start"));
  }
  {
    std::lock_guard lock(mutex_);
    ++started_;
    if (plugins_.empty()) {
      for (const Json& info : hello.message.at("plugins")) {
        plugins_.push_back(PluginInfoFromJson(info));
      }
    }
  }
  spdlog::debug("step process {} started", process.pid);
}

std::unique_ptr<StepProcesses::Process> StepProcesses::Acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto process = std::move(idle_.back());
      idle_.pop_back();
      return process;
    }
  }
  return Spawn();
}

void StepProcesses::Release(std::unique_ptr<Process> process) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(process));
}

std::shared_ptr<Step> StepProcesses::Find(const std::string& step_name) {
  for (const PluginInfo& info : plugins_) {
    for (const std::string& step : info.steps) {
      if (step == step_name)
        return std::make_shared<ProcessStep>(shared_from_this(), step, info.name);
    }
  }
  return nullptr;
}

int64_t StepProcesses::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

}  // namespace cairn::plugins
