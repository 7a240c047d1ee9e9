// `cairn console`: serves the web console (console.hpp) on --listen until
// SIGTERM or SIGINT. The access token that enables actions comes from
// --token-file or the systemd credential console-token, never from the
// command line (argv is visible to every user of the host).
#include <pthread.h>
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "console.hpp"
#include "http_server.hpp"

namespace cairn::cli {

namespace {

// The credential name in $CREDENTIALS_DIRECTORY (LoadCredential=console-token:...).
constexpr const char* kTokenCredential = "console-token";
// Shorter tokens are guessable; `openssl rand -hex 32` makes a good one.
constexpr size_t kMinTokenBytes = 16;

std::optional<std::string> ReadToken(const po::variables_map& vm) {
  std::optional<std::string> token;
  if (vm.count("token-file")) {
    token = ReadSecretFile(vm["token-file"].as<std::string>(), "--token-file");
  } else if (const char* dir = std::getenv("CREDENTIALS_DIRECTORY"); dir != nullptr && *dir) {
    const std::filesystem::path file = std::filesystem::path(dir) / kTokenCredential;
    if (std::filesystem::exists(file)) {
      token = ReadSecretFile(file, "systemd credential console-token");
    }
  }
  if (token && token->size() < kMinTokenBytes) {
    throw InvalidArgumentError("the console's access token is " + std::to_string(token->size()) +
                               " bytes; it needs at least " + std::to_string(kMinTokenBytes) +
                               " (make one with: openssl rand -hex 32)");
  }
  return token;
}

}  // namespace

po::options_description ConsoleOptions() {
  po::options_description options("options");
  options.add_options()(
      "listen", po::value<std::string>()->value_name("HOST:PORT")->default_value("127.0.0.1:8080"),
      "address to serve the console on (IPv4; port 0 picks a free one)")(
      "token-file", po::value<std::string>()->value_name("FILE"),
      "file holding the access token that enables actions (signal, cancel, retry); without it "
      "(or the systemd credential console-token) the console is read-only")(
      "connections", po::value<int>()->value_name("N")->default_value(4),
      "database sessions the console keeps open at most");
  options.add(ConnectionOptions());
  return options;
}

int RunConsole(const std::vector<std::string>& args) {
  // Blocked before civetweb starts its threads, so only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto vm = Parse("console", args);
  const int connections = vm["connections"].as<int>();
  if (connections < 1 || connections > 64) {
    throw InvalidArgumentError("--connections must be from 1 to 64, got " +
                               std::to_string(connections));
  }
  console::ConsoleOptions options;
  options.database = DatabaseOptions(vm, "cairn console");
  options.token = ReadToken(vm);
  options.connections = connections;
  console::Console console(std::move(options));
  console.Probe();

  HttpServerOptions server_options;
  server_options.listen = vm["listen"].as<std::string>();
  server_options.key = "--listen";
  server_options.max_body_bytes = console::MaxRequestBodyBytes();
  HttpServer server(server_options,
                    [&console](const HttpRequest& request) { return console.Handle(request); });
  server.Start();
  std::cout << "cairn console: serving http://" << server.address() << "/ ("
            << (console.read_only() ? "read-only: no access token"
                                    : "actions need the access token")
            << ")" << std::endl;
  sd_notify(0, "READY=1");
  int received = 0;
  sigwait(&signals, &received);
  sd_notify(0, "STOPPING=1");
  server.Stop();
  return kExitOk;
}

}  // namespace cairn::cli
