// Subcommands that start and inspect runs: start, show, list, history,
// signal, cancel, retry, plugins. Tables for people by default, --json for scripts.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>

#include "cli.hpp"
#include "config.hpp"
#include "definition.hpp"
#include "identifier.hpp"
#include "json_payload.hpp"
#include "plugin_catalog.hpp"
#include "records_json.hpp"
#include "run_actions.hpp"

namespace cairn::cli {

namespace {

// Up to limit + 1 bytes of a stream: enough to tell an oversized input
// without reading all of it.
std::string ReadBounded(std::istream& in, size_t limit) {
  std::string text(limit + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The text of a JSON option: the value itself, @FILE for a file's content, or
// - for standard input (a command line holds at most 128 KiB per argument).
std::string JsonArgument(const std::string& option, const std::string& value) {
  if (value == "-") {
    std::string text = ReadBounded(std::cin, kMaxPayloadBytes);
    if (std::cin.bad()) throw InvalidArgumentError(option + " -: cannot read standard input");
    return text;
  }
  if (!value.empty() && value.front() == '@') {
    const std::string file = value.substr(1);
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      throw InvalidArgumentError(option + " @" + file + ": cannot read " + file + ": " +
                                 std::strerror(errno));
    }
    std::string text = ReadBounded(in, kMaxPayloadBytes);
    if (in.bad()) throw InvalidArgumentError(option + " @" + file + ": read error");
    return text;
  }
  return value;
}

std::string Shorten(std::string text, size_t limit = 60) {
  if (text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

std::string Optional(const std::optional<std::string>& value) { return value.value_or("-"); }

// The options of a subcommand whose one positional argument is a run id.
struct RunArguments {
  po::variables_map vm;
  std::string run_id;
};

// Parses such a subcommand and checks that the run id is one.
RunArguments ParseWithRun(const std::string& command, const std::vector<std::string>& args) {
  RunArguments parsed{Parse(command, args), ""};
  parsed.run_id = parsed.vm["run"].as<std::string>();
  ValidateRunId(parsed.run_id);
  return parsed;
}

// --deadline: a duration longer than 0, checked before anything is started.
std::chrono::milliseconds ParseRunDeadline(const std::string& text) {
  std::chrono::milliseconds deadline{};
  try {
    deadline = ParseDuration(text);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(std::string("--deadline: ") + e.what());
  }
  if (deadline <= std::chrono::milliseconds::zero()) {
    throw InvalidArgumentError("--deadline: must be longer than 0, got \"" + text + "\"");
  }
  return deadline;
}

// An action's outcome for a terminal: done or nothing to do on standard
// output, a refusal on standard error; its exit code.
int Report(const std::string& command, const ActionOutcome& outcome) {
  if (outcome.exit_code == kExitOk || outcome.exit_code == kExitAlreadyDone) {
    std::cout << Printable(outcome.message) << "\n";
  } else {
    std::cerr << "cairn " << command << ": " << Printable(outcome.message) << "\n";
  }
  return outcome.exit_code;
}

store::Connection Connect(const po::variables_map& vm, const std::string& command) {
  return store::Connection(DatabaseOptions(vm, "cairn " + command));
}

}  // namespace

po::options_description StartOptions() {
  po::options_description options("options");
  options.add_options()("input", po::value<std::string>()->value_name("JSON")->default_value("{}"),
                        "run input, a JSON object; @FILE reads it from a file, - from standard "
                        "input")(
      "key", po::value<std::string>()->value_name("KEY"),
      "start key: a start with a key that is taken returns the run that holds it")(
      "key-scope", po::value<std::string>()->value_name("SCOPE"),
      "how long the key holds: forever (one run ever) or unfinished (one unfinished run at a "
      "time); default: the workflow's key_scope, else forever")(
      "queue", po::value<std::string>()->value_name("QUEUE"), "queue (default: the workflow's)")(
      "priority", po::value<int>()->value_name("N")->default_value(0), "higher runs first")(
      "at", po::value<std::string>()->value_name("TIME"),
      "start at this time (timestamp with time zone)")(
      "in", po::value<std::string>()->value_name("DURATION"),
      "start after this long (e.g. 30s, 5m)")(
      "deadline", po::value<std::string>()->value_name("DURATION"),
      "fail the run if it has not finished this long after it is due (e.g. 30m); default: the "
      "workflow's deadline")("namespace",
                             po::value<std::string>()->value_name("NAME")->default_value("default"),
                             "namespace")("definition-version", po::value<int>()->value_name("N"),
                                          "pin a definition version (default: newest)")(
      "json", "print one JSON object: {id, created}");
  options.add(ConnectionOptions());
  return options;
}

int RunStart(const std::vector<std::string>& args) {
  auto vm = Parse("start", args);

  store::StartRequest request;
  request.workflow = vm["workflow"].as<std::string>();
  request.input =
      ParseJsonPayload("--input", JsonArgument("--input", vm["input"].as<std::string>()));
  if (!request.input.is_object()) throw InvalidArgumentError("--input must be a JSON object");
  if (vm.count("key")) {
    request.key = vm["key"].as<std::string>();
    ValidateKey("--key", *request.key);
  }
  if (vm.count("key-scope")) {
    const std::string scope = vm["key-scope"].as<std::string>();
    request.key_scope = ParseKeyScope(scope);
    if (!request.key_scope) {
      throw InvalidArgumentError("--key-scope must be forever or unfinished, got \"" + scope +
                                 "\"");
    }
    if (!request.key) throw InvalidArgumentError("--key-scope needs --key");
  }
  if (vm.count("queue")) request.queue = vm["queue"].as<std::string>();
  request.priority = vm["priority"].as<int>();
  request.namespace_name = vm["namespace"].as<std::string>();
  if (vm.count("definition-version")) request.version = vm["definition-version"].as<int>();
  if (vm.count("at") && vm.count("in")) throw InvalidArgumentError("give --at or --in, not both");
  if (vm.count("deadline")) request.deadline = ParseRunDeadline(vm["deadline"].as<std::string>());
  auto connection = Connect(vm, "start");
  const store::StartedRun started = connection.Transact([&](store::Tx& tx) {
    if (vm.count("in"))
      request.run_at = store::DatabaseNowPlus(tx, ParseDuration(vm["in"].as<std::string>()));
    if (vm.count("at")) request.run_at = vm["at"].as<std::string>();
    return store::StartRun(tx, request);
  });
  if (vm.count("json")) {
    std::cout << Json{{"id", started.id}, {"created", started.created}}.dump() << "\n";
    return kExitOk;
  }
  std::cout << started.id << "\n";
  if (!started.created) {
    // Not an error: a start key exists so that a repeated start is harmless.
    std::cerr << "cairn start: key " << Printable(*request.key) << " is held by run " << started.id
              << "; no new run started\n";
  }
  return kExitOk;
}

po::options_description ShowOptions() {
  po::options_description options("options");
  options.add_options()("json", "print one JSON object");
  options.add(ConnectionOptions());
  return options;
}

int RunShow(const std::vector<std::string>& args) {
  const RunArguments parsed = ParseWithRun("show", args);
  const po::variables_map& vm = parsed.vm;
  const std::string& id = parsed.run_id;
  auto connection = Connect(vm, "show");
  auto [run, waits, error_code] = connection.Transact([&](store::Tx& tx) {
    auto run = store::GetRun(tx, id);
    if (!run) throw NotFoundError("run " + id + " does not exist");
    return std::make_tuple(*run, store::WaitsOfRun(tx, id), store::RunErrorCode(tx, id));
  });
  Json waits_json = Json::array();
  for (const auto& wait : waits) waits_json.push_back(WaitToJson(wait));
  Json object = RunToJson(run);
  // What failed the run, as a code a script can match; error says it for people.
  object["error_code"] = error_code ? Json(*error_code) : Json();
  if (vm.count("json")) {
    object["waits"] = waits_json;
    std::cout << object.dump() << "\n";
    return kExitOk;
  }
  for (const auto& [key, value] : object.items()) {
    std::cout << std::left << std::setw(20) << key
              << Printable(value.is_string() ? value.get<std::string>() : value.dump()) << "\n";
  }
  for (const auto& wait : waits) {
    std::cout << std::left << std::setw(20) << "wait"
              << Printable(wait.correlation_key + " " + wait.event + " " +
                           std::string(ToString(wait.status)) + " expires " +
                           Optional(wait.expires_at))
              << "\n";
  }
  return kExitOk;
}

po::options_description ListOptions() {
  po::options_description options("options");
  options.add_options()("workflow", po::value<std::string>()->value_name("NAME"),
                        "only this workflow")(
      "status", po::value<std::string>()->value_name("STATUS"),
      "only this status (ready, running, waiting, ...)")("waiting", "only runs parked on a wait")(
      "namespace", po::value<std::string>()->value_name("NAME"), "only this namespace")(
      "created-after", po::value<std::string>()->value_name("TIME"),
      "created at or after this time")(
      "created-before", po::value<std::string>()->value_name("TIME"), "created before this time")(
      "key-prefix", po::value<std::string>()->value_name("PREFIX"), "only keys starting with this")(
      "limit", po::value<int>()->value_name("N")->default_value(store::kMaxRunPage),
      "page size, at most 200")("cursor", po::value<std::string>()->value_name("CURSOR"),
                                "continue after the page that printed this cursor")(
      "stranded", "unfinished runs that no live worker serves (definition not loaded anywhere)")(
      "repin", po::value<std::vector<std::string>>()->value_name("FROM_HASH TO_HASH")->multitoken(),
      "move unfinished runs to another registered definition")(
      "json", "print one JSON object: {runs, next_cursor}");
  options.add(ConnectionOptions());
  return options;
}

int RunList(const std::vector<std::string>& args) {
  auto vm = Parse("list", args);
  auto connection = Connect(vm, "list");
  if (vm.count("repin")) {
    auto hashes = vm["repin"].as<std::vector<std::string>>();
    if (hashes.size() != 2) throw InvalidArgumentError("--repin takes FROM_HASH TO_HASH");
    auto ids = connection.Transact(
        [&](store::Tx& tx) { return store::RepinRuns(tx, hashes[0], hashes[1]); });
    std::cout << ids.size() << " runs re-pinned\n";
    return kExitOk;
  }
  RunPage page;
  if (vm.count("stranded")) {
    page.runs = connection.Transact([&](store::Tx& tx) {
      return store::StrandedRuns(tx, store::kWorkerLiveness, vm["limit"].as<int>());
    });
  } else {
    RunFilter filter;
    if (vm.count("workflow")) filter.workflow = vm["workflow"].as<std::string>();
    if (vm.count("status")) filter.status = ParseRunStatus(vm["status"].as<std::string>());
    if (vm.count("waiting")) filter.status = RunStatus::kWaiting;
    if (vm.count("namespace")) filter.namespace_name = vm["namespace"].as<std::string>();
    if (vm.count("created-after")) filter.created_after = vm["created-after"].as<std::string>();
    if (vm.count("created-before")) filter.created_before = vm["created-before"].as<std::string>();
    if (vm.count("key-prefix")) filter.key_prefix = vm["key-prefix"].as<std::string>();
    std::optional<std::string> cursor;
    if (vm.count("cursor")) cursor = vm["cursor"].as<std::string>();
    page = connection.Transact(
        [&](store::Tx& tx) { return store::ListRuns(tx, filter, vm["limit"].as<int>(), cursor); });
  }
  if (vm.count("json")) {
    Json runs = Json::array();
    for (const auto& run : page.runs) runs.push_back(RunToJson(run));
    std::cout << Json{{"runs", runs},
                      {"next_cursor", page.next_cursor ? Json(*page.next_cursor) : Json()}}
                     .dump()
              << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : page.runs) {
    rows.push_back({run.id, run.workflow + " v" + std::to_string(run.definition_version),
                    std::string(ToString(run.status)), Optional(run.cursor),
                    std::to_string(run.attempt), Optional(run.key), run.created_at});
  }
  PrintTable({"ID", "WORKFLOW", "STATUS", "CURSOR", "ATTEMPT", "KEY", "CREATED"}, rows);
  if (page.next_cursor) std::cout << "more: --cursor '" << Printable(*page.next_cursor) << "'\n";
  return kExitOk;
}

po::options_description HistoryOptions() {
  po::options_description options("options");
  options.add_options()("after", po::value<int64_t>()->value_name("POSITION")->default_value(0),
                        "only events after this position")(
      "limit", po::value<int>()->value_name("N")->default_value(store::kMaxHistoryPage),
      "page size, at most 1000")("json", "print one JSON object: {events, next_position}");
  options.add(ConnectionOptions());
  return options;
}

int RunHistory(const std::vector<std::string>& args) {
  const RunArguments parsed = ParseWithRun("history", args);
  const po::variables_map& vm = parsed.vm;
  const std::string& id = parsed.run_id;
  auto connection = Connect(vm, "history");
  auto page = connection.Transact([&](store::Tx& tx) {
    if (!store::GetRun(tx, id)) throw NotFoundError("run " + id + " does not exist");
    return store::History(tx, id, vm["after"].as<int64_t>(), vm["limit"].as<int>());
  });
  if (vm.count("json")) {
    Json events = Json::array();
    for (const auto& e : page.events) events.push_back(EventToJson(e));
    std::cout << Json{{"events", events},
                      {"next_position", page.next_position ? Json(*page.next_position) : Json()}}
                     .dump()
              << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : page.events) {
    std::string detail = e.field ? *e.field + " = " : "";
    if (e.value) detail += e.value->dump();
    rows.push_back({std::to_string(e.position), e.created_at, Optional(e.step),
                    std::to_string(e.attempt), e.kind, Shorten(detail)});
  }
  PrintTable({"POSITION", "TIME", "STEP", "ATTEMPT", "EVENT", "DETAIL"}, rows);
  if (page.next_position) std::cout << "more: --after " << *page.next_position << "\n";
  return kExitOk;
}

po::options_description CancelOptions() {
  po::options_description options("options");
  options.add_options()(
      "reason",
      po::value<std::string>()->value_name("TEXT")->default_value("cancelled by operator"),
      "why, recorded with the run");
  options.add(ConnectionOptions());
  return options;
}

int RunCancel(const std::vector<std::string>& args) {
  const RunArguments parsed = ParseWithRun("cancel", args);
  const po::variables_map& vm = parsed.vm;
  const std::string& id = parsed.run_id;
  auto connection = Connect(vm, "cancel");
  return Report("cancel", CancelRunNow(connection, id, vm["reason"].as<std::string>()));
}

po::options_description SignalOptions() {
  po::options_description options("options");
  options.add_options()("payload",
                        po::value<std::string>()->value_name("JSON")->default_value("{}"),
                        "event payload, JSON; @FILE reads it from a file, - from standard input")(
      "inbox-retention", po::value<std::string>()->value_name("DURATION")->default_value("24h"),
      "how long a signal for a wait that does not exist yet is kept");
  options.add(ConnectionOptions());
  return options;
}

int RunSignal(const std::vector<std::string>& args) {
  auto vm = Parse("signal", args);
  const std::string key = vm["key"].as<std::string>();
  ValidateKey("the correlation key", key);
  Json payload =
      ParseJsonPayload("--payload", JsonArgument("--payload", vm["payload"].as<std::string>()));
  auto retention = ParseDuration(vm["inbox-retention"].as<std::string>());
  auto connection = Connect(vm, "signal");
  return Report("signal", SignalWait(connection, key, payload, retention,
                                     vm["inbox-retention"].as<std::string>()));
}

po::options_description RetryOptions() {
  po::options_description options("options");
  options.add(ConnectionOptions());
  return options;
}

int RunRetry(const std::vector<std::string>& args) {
  const RunArguments parsed = ParseWithRun("retry", args);
  const po::variables_map& vm = parsed.vm;
  const std::string& id = parsed.run_id;
  auto connection = Connect(vm, "retry");
  return Report("retry", RetryRunNow(connection, id));
}

po::options_description PluginsOptions() {
  po::options_description options("options");
  options.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                        "the daemon's YAML configuration file (its plugins.directories)")(
      "json", "print a JSON array");
  return options;
}

int RunPlugins(const std::vector<std::string>& args) {
  auto vm = Parse("plugins", args);
  DaemonConfig config = LoadDaemonConfig(vm);
  // Without the workflows: this lists what the plugins hold, and the
  // isolation of a plugin's steps where isolation_by_workflow says nothing.
  std::unique_ptr<PluginCatalog> plugins = LoadPlugins(config, DefinitionSet());
  if (vm.count("json")) {
    Json list = Json::array();
    for (const auto& p : plugins->List()) {
      list.push_back({{"name", p.name},
                      {"version", p.version},
                      {"file", p.file},
                      {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
                      {"isolation", ToString(plugins->IsolationOf(p.name))},
                      {"steps", p.steps}});
    }
    std::cout << list.dump() << "\n";
    return kExitOk;
  }
  for (const auto& p : plugins->List()) {
    std::cout << Printable(p.name + " " + p.version) << " (ABI " << p.abi_major << "."
              << p.abi_minor << ", " << ToString(plugins->IsolationOf(p.name)) << ") "
              << Printable(p.file) << "\n";
    for (const auto& step : p.steps) std::cout << "  " << Printable(step) << "\n";
  }
  return kExitOk;
}

}  // namespace cairn::cli
