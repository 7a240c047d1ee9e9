// Unit tests of the daemon configuration: defaults, every key, errors naming
// file, line and key, secrets from files and systemd credentials, and the
// environment overrides. No database.
#include "config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "temp_dir.hpp"
#include "test_paths.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using process::TempDir;

std::string LoadError(const std::string& text, const std::string& source = "cairn.yaml") {
  try {
    LoadConfigFromString(text, source);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void ExpectDefaults(const DaemonConfig& c) {
  EXPECT_EQ(c.database.url, "");
  EXPECT_EQ(c.database.schema, "cairn");
  EXPECT_EQ(c.database.pool_size, 0);
  EXPECT_EQ(c.worker.id, "");
  EXPECT_EQ(c.worker.queues, std::vector<std::string>{"default"});
  EXPECT_EQ(c.worker.concurrency, 8);
  EXPECT_EQ(c.worker.poll_interval, milliseconds(1000));
  EXPECT_EQ(c.worker.lease, milliseconds(30000));
  EXPECT_EQ(c.worker.claim_batch, 0);
  EXPECT_EQ(c.worker.shutdown_grace, milliseconds(30000));
  EXPECT_TRUE(c.worker.listen);
  EXPECT_EQ(c.plugins.directories, std::vector<fs::path>{"/usr/lib/cairn/plugins"});
  EXPECT_EQ(c.workflows.paths, std::vector<fs::path>{"/etc/cairn/workflows"});
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.log.format, "text");
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9464");
  EXPECT_EQ(c.metrics.backlog_interval, milliseconds(15000));
  EXPECT_EQ(c.health.listen, "127.0.0.1:9464");
  EXPECT_EQ(c.health.grace, milliseconds(10000));
  EXPECT_EQ(c.maintenance.reaper_interval, milliseconds(5000));
  EXPECT_EQ(c.maintenance.retention, milliseconds(30LL * 86400 * 1000));
  EXPECT_EQ(c.maintenance.crash_limit, 3);
  EXPECT_EQ(c.database.idle_timeout, std::chrono::minutes(1));
  EXPECT_EQ(c.plugins.isolation, "process");
  EXPECT_TRUE(c.plugins.isolation_by_workflow.empty());
  EXPECT_EQ(c.plugins.memory_limit, 0u);
  // Eight slots, and the poller, lease keeper, sweeper, schedule service,
  // idempotency session, LISTEN, retention and the backlog reader.
  EXPECT_EQ(c.FixedConnections(), 8);
  EXPECT_EQ(c.EffectivePoolSize(), 16);
  EXPECT_EQ(c.EffectiveConcurrency(), 8);
  EXPECT_EQ(c.EffectiveClaimBatch(), 8);
}

TEST(ConfigLoader, UsesDefaultsWhenKeysAreAbsent) {
  ExpectDefaults(LoadConfigFromString("", "cairn.yaml"));
  ExpectDefaults(LoadConfigFromString("# nothing\n", "cairn.yaml"));
  ExpectDefaults(LoadConfigFromString("worker: {}\ndatabase: {}\n", "cairn.yaml"));
  ExpectDefaults(DaemonConfig{});
}

TEST(ConfigLoader, ReferenceFileDocumentsTheDefaults) {
  const DaemonConfig c = LoadConfig(fs::path(cairn::test::SourceDir()) / "config/cairn.yaml");
  ExpectDefaults(c);
  EXPECT_EQ(c.source, cairn::test::SourceDir() + "/config/cairn.yaml");
  // Every key is in the reference: set there, or shown in a comment.
  std::ifstream in(fs::path(cairn::test::SourceDir()) / "config/cairn.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const Json& entry : ShowConfig(c)) {
    const std::string key = entry["key"];
    const std::string name = key.substr(key.find('.') + 1);
    EXPECT_TRUE(c.origins.count(key) != 0 || text.find("# " + name + ":") != std::string::npos)
        << key << " is not documented in config/cairn.yaml";
  }
}

TEST(ConfigLoader, ReadsEveryKey) {
  const DaemonConfig c = LoadConfigFromString(R"(
database:
  url: postgresql://cairn@db/cairn
  schema: jobs
  pool_size: 20
worker:
  id: w1
  queues: [default, "mail.out"]
  concurrency: 16
  poll_interval: 250ms
  lease: 1m
  claim_batch: 4
  shutdown_grace: 10s
  listen: false
plugins:
  directories: [/opt/p, relative/plugins]
workflows:
  paths: [../workflows, /abs/wf.yaml]
log: {level: debug, format: json}
metrics:
  listen: ""
  backlog_interval: 1m
health:
  listen: "0.0.0.0:8080"
  grace: 2s
maintenance:
  reaper_interval: 2s
  retention: 0
)",
                                              "/etc/cairn/cairn.yaml");
  EXPECT_EQ(c.database.url, "postgresql://cairn@db/cairn");
  EXPECT_EQ(c.database.url_origin, "database.url in /etc/cairn/cairn.yaml");
  EXPECT_EQ(c.database.schema, "jobs");
  EXPECT_EQ(c.database.pool_size, 20);
  EXPECT_EQ(c.worker.id, "w1");
  EXPECT_EQ(c.worker.queues, (std::vector<std::string>{"default", "mail.out"}));
  EXPECT_EQ(c.worker.concurrency, 16);
  EXPECT_EQ(c.worker.poll_interval, milliseconds(250));
  EXPECT_EQ(c.worker.lease, milliseconds(60000));
  EXPECT_EQ(c.worker.claim_batch, 4);
  EXPECT_EQ(c.worker.shutdown_grace, milliseconds(10000));
  EXPECT_FALSE(c.worker.listen);
  EXPECT_EQ(c.plugins.directories,
            (std::vector<fs::path>{"/opt/p", "/etc/cairn/relative/plugins"}));
  EXPECT_EQ(c.workflows.paths, (std::vector<fs::path>{"/etc/workflows", "/abs/wf.yaml"}));
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.log.format, "json");
  EXPECT_EQ(c.metrics.listen, "");
  EXPECT_EQ(c.metrics.backlog_interval, milliseconds(60000));
  EXPECT_EQ(c.health.listen, "0.0.0.0:8080");
  EXPECT_EQ(c.health.grace, milliseconds(2000));
  EXPECT_EQ(c.maintenance.reaper_interval, milliseconds(2000));
  EXPECT_EQ(c.maintenance.retention, milliseconds(0));
  EXPECT_EQ(c.EffectivePoolSize(), 20);
  EXPECT_EQ(c.EffectiveClaimBatch(), 4);
  EXPECT_EQ(c.EffectiveWorkerId(), "w1");
}

TEST(ConfigLoader, DefaultWorkerIdIsHostnameAndPid) {
  const DaemonConfig c;
  const std::string id = c.EffectiveWorkerId();
  EXPECT_NE(id.find(':' + std::to_string(getpid())), std::string::npos) << id;
  EXPECT_GT(id.find(':'), 0u);
}

TEST(ConfigLoader, ReadsQueueLimitsWithTheBurstDefaultingToOneSecondOfRate) {
  const DaemonConfig none = LoadConfigFromString("", "cairn.yaml");
  EXPECT_FALSE(none.queue_limits_declared);
  EXPECT_TRUE(none.queue_limits.empty());

  const DaemonConfig c = LoadConfigFromString(
      "queue_limits:\n"
      "  payments:\n"
      "    max_running: 10\n"
      "  mail:\n"
      "    rate_per_second: 2.5\n"
      "  api:\n"
      "    max_running: 4\n"
      "    rate_per_second: 50\n"
      "    burst: 100\n",
      "cairn.yaml");
  ASSERT_TRUE(c.queue_limits_declared);
  ASSERT_EQ(c.queue_limits.size(), 3u);
  const QueueLimitConfig& payments = c.queue_limits.at("payments");
  EXPECT_EQ(payments.max_running, 10);
  EXPECT_FALSE(payments.rate_per_second);
  EXPECT_FALSE(payments.burst);
  const QueueLimitConfig& mail = c.queue_limits.at("mail");
  EXPECT_FALSE(mail.max_running);
  EXPECT_DOUBLE_EQ(mail.rate_per_second.value_or(0), 2.5);
  EXPECT_EQ(mail.burst, 3);  // one second of rate, rounded up
  const QueueLimitConfig& api = c.queue_limits.at("api");
  EXPECT_EQ(api.max_running, 4);
  EXPECT_EQ(api.burst, 100);

  const Json shown = ShowConfig(c);
  const auto it = std::find_if(shown.begin(), shown.end(),
                               [](const Json& e) { return e["key"] == "queue_limits"; });
  ASSERT_NE(it, shown.end());
  EXPECT_EQ((*it)["value"]["api"],
            (Json{{"max_running", 4}, {"rate_per_second", 50.0}, {"burst", 100}}));
  EXPECT_EQ((*it)["value"]["mail"], (Json{{"rate_per_second", 2.5}, {"burst", 3}}));
  EXPECT_TRUE((*it)["reloadable"].get<bool>());

  // An empty section is declared: the fleet's limits are lifted.
  const DaemonConfig empty = LoadConfigFromString("queue_limits: {}\n", "cairn.yaml");
  EXPECT_TRUE(empty.queue_limits_declared);
  EXPECT_TRUE(empty.queue_limits.empty());
}

TEST(ConfigLoader, ResolvesRelativePathsAgainstTheConfigFolder) {
  TempDir dir;
  const fs::path file = dir.Write("etc/cairn.yaml",
                                  "plugins:\n  directories: [plugins]\n"
                                  "workflows:\n  paths: [./wf, ../shared/wf.yaml]\n");
  const DaemonConfig c = LoadConfig(file);
  EXPECT_EQ(c.plugins.directories, std::vector<fs::path>{dir.path() / "etc/plugins"});
  EXPECT_EQ(c.workflows.paths,
            (std::vector<fs::path>{dir.path() / "etc/wf", dir.path() / "shared/wf.yaml"}));
}

TEST(ConfigLoader, RejectsUnknownKeyWithFileAndLine) {
  EXPECT_EQ(LoadError("worker:\n  concurrency: 4\n  concurency: 4\n"),
            "cairn.yaml:3: worker.concurency: unknown key \"concurency\" (did you mean "
            "\"concurrency\"?)");
  EXPECT_EQ(LoadError("databse:\n  url: x\n"),
            "cairn.yaml:1: databse: unknown key \"databse\" (did you mean \"database\"?)");
}

TEST(ConfigLoader, RejectsInvalidSchemaName) {
  EXPECT_EQ(LoadError("database:\n  schema: \"bad-name; drop\"\n"),
            "cairn.yaml:2: database.schema: invalid schema name \"bad-name; drop\": must match "
            "^[A-Za-z_][A-Za-z0-9_]{0,62}$");
  EXPECT_EQ(LoadError("database:\n  schema: " + std::string(64, 'a') + "\n")
                .rfind("cairn.yaml:2: database.schema: invalid schema name", 0),
            0u);
}

struct BadCase {
  std::string text;
  std::string message;
};

TEST(ConfigLoader, EveryValidationErrorNamesFileLineAndKey) {
  const std::vector<BadCase> cases = {
      {"worker:\n  concurrency: 0\n",
       "cairn.yaml:2: worker.concurrency: must be an integer between 1 and 1024, got \"0\""},
      {"worker:\n  concurrency: many\n",
       "cairn.yaml:2: worker.concurrency: must be an integer between 1 and 1024"},
      {"worker:\n  poll_interval: 0s\n",
       "cairn.yaml:2: worker.poll_interval: must be longer than 0"},
      {"worker:\n  lease: 500ms\n", "cairn.yaml:2: worker.lease: must be at least 1s"},
      {"worker:\n  lease: soon\n", "cairn.yaml:2: worker.lease: invalid duration \"soon\""},
      {"worker:\n  listen: sometimes\n", "cairn.yaml:2: worker.listen: must be true or false"},
      {"worker:\n  queues: []\n", "cairn.yaml:2: worker.queues: must list at least one queue"},
      {"worker:\n  queues: default\n", "cairn.yaml:2: worker.queues: must be a list"},
      {"worker:\n  queues:\n    - a\n    - a\n",
       "cairn.yaml:4: worker.queues[1]: duplicate queue \"a\""},
      {"worker:\n  queues: [\"a b\"]\n",
       "cairn.yaml:2: worker.queues[0]: invalid queue name \"a b\""},
      {"database:\n  pool_size: -1\n",
       "cairn.yaml:2: database.pool_size: must be an integer between 0"},
      {"log:\n  level: verbose\n",
       "cairn.yaml:2: log.level: must be one of trace | debug | info | warn | error, got "
       "\"verbose\""},
      {"log:\n  format: xml\n",
       "cairn.yaml:2: log.format: must be one of text | json, got \"xml\""},
      {"metrics:\n  listen: localhost\n", "cairn.yaml:2: metrics.listen: must be host:port"},
      {"metrics:\n  listen: \"127.0.0.1:99999\"\n",
       "cairn.yaml:2: metrics.listen: must be host:port"},
      {"metrics:\n  listen: \"[::1]:9464\"\n",
       "cairn.yaml:2: metrics.listen: IPv6 addresses are not supported"},
      {"metrics:\n  backlog_interval: 0\n",
       "cairn.yaml:2: metrics.backlog_interval: must be longer than 0"},
      {"metrics:\n  backlog: 5s\n", "cairn.yaml:2: metrics.backlog: unknown key"},
      {"health:\n  listen: localhost\n", "cairn.yaml:2: health.listen: must be host:port"},
      {"health:\n  listen: \"[::]:80\"\n",
       "cairn.yaml:2: health.listen: IPv6 addresses are not supported"},
      {"health:\n  grace: -1s\n", "cairn.yaml:2: health.grace: "},
      {"health: 5\n", "cairn.yaml:1: health: must be a mapping"},
      {"maintenance:\n  reaper_interval: 0\n",
       "cairn.yaml:2: maintenance.reaper_interval: must be longer than 0"},
      {"plugins:\n  directories: [\"\"]\n",
       "cairn.yaml:2: plugins.directories[0]: must not be empty"},
      {"plugins:\n  isolation_by_workflow:\n    order: thread\n    bench: fibre\n",
       "cairn.yaml:4: plugins.isolation_by_workflow.bench: must be one of process | thread, got "
       "\"fibre\""},
      {"plugins:\n  isolation_by_workflow: [order]\n",
       "cairn.yaml:2: plugins.isolation_by_workflow: must be a mapping"},
      {"worker: 5\n", "cairn.yaml:1: worker: must be a mapping"},
      {"- a\n", "cairn.yaml:1: must be a mapping"},
      {"database:\n  url: x\n  url_file: /x\n",
       "cairn.yaml:3: database.url_file: set only one of url, url_file and url_credential (url "
       "is set too)"},
      {"worker:\n  concurrency: [1\n", "cairn.yaml:"},
      {"queue_limits:\n  api:\n    max_running: -1\n",
       "cairn.yaml:3: queue_limits.api.max_running: must be an integer between 1 and 1000000"},
      {"queue_limits:\n  api:\n    max_running: 0\n",
       "cairn.yaml:3: queue_limits.api.max_running: must be an integer between 1 and 1000000"},
      {"queue_limits:\n  api:\n    rate_per_second: 0\n",
       "cairn.yaml:3: queue_limits.api.rate_per_second: must be a number of steps a second "
       "greater than 0"},
      {"queue_limits:\n  api:\n    rate_per_second: -5\n",
       "cairn.yaml:3: queue_limits.api.rate_per_second: must be a number of steps a second"},
      {"queue_limits:\n  api:\n    rate_per_second: fast\n",
       "cairn.yaml:3: queue_limits.api.rate_per_second: must be a number, got \"fast\""},
      {"queue_limits:\n  api:\n    rate_per_second: 5\n    burst: 0\n",
       "cairn.yaml:4: queue_limits.api.burst: must be an integer between 1 and 1000000"},
      {"queue_limits:\n  api:\n    max_running: 2\n    burst: 5\n",
       "cairn.yaml:4: queue_limits.api.burst: needs rate_per_second beside it"},
      {"queue_limits:\n  api:\n    max_runing: 2\n",
       "cairn.yaml:3: queue_limits.api.max_runing: unknown key"},
      {"queue_limits:\n  api: {}\n", "cairn.yaml:2: queue_limits.api: sets no limit"},
      {"queue_limits: [api]\n",
       "cairn.yaml:1: queue_limits: must be a mapping of queue names to limits"},
      {"queue_limits:\n  \"a b\":\n    max_running: 1\n",
       "cairn.yaml:3: queue_limits.a b: invalid queue name \"a b\""},
  };
  for (const BadCase& c : cases) {
    const std::string message = LoadError(c.text);
    EXPECT_EQ(message.substr(0, c.message.size()), c.message) << "input:\n" << c.text;
  }
  EXPECT_NE(LoadError("worker:\n  concurrency: [1\n").find("malformed YAML"), std::string::npos);
}

TEST(ConfigLoader, AcceptsListenAddresses) {
  for (const char* ok : {"127.0.0.1:9464", "0.0.0.0:1", ":9464", "metrics.local:80", ""}) {
    EXPECT_EQ(LoadError(std::string("metrics:\n  listen: \"") + ok + "\"\n"), "") << ok;
    EXPECT_EQ(LoadError(std::string("health:\n  listen: \"") + ok + "\"\n"), "") << ok;
  }
}

TEST(ConfigLoader, RejectsReservedSchemaNames) {
  EXPECT_EQ(LoadError("database:\n  schema: public\n"),
            "cairn.yaml:2: database.schema: schema name \"public\" is reserved: public is shared "
            "by every role of the database; cairn needs a schema of its own, whose objects its "
            "owner role owns and whose privileges it controls");
  EXPECT_NE(LoadError("database:\n  schema: pg_cairn\n").find("\"pg_cairn\" is reserved"),
            std::string::npos);
  EXPECT_NE(LoadError("database:\n  schema: Information_Schema\n").find("is reserved"),
            std::string::npos);
}

// A config file's mode, refused as ssh refuses its own: anyone who may write
// it chooses cairn's database, plugins and workflows; anyone who may read it
// reads a password in database.url.
class ConfigFileModes : public ::testing::Test {
 protected:
  fs::path File(const std::string& text, unsigned mode) {
    const fs::path file = dir_.Write("cairn.yaml", text);
    fs::permissions(file, fs::perms(mode));
    return file;
  }
  static std::string Error(const fs::path& file) {
    try {
      LoadConfig(file);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir_;
};

TEST_F(ConfigFileModes, AFileWritableByOthersIsRefusedNamingItAndTheFix) {
  const fs::path file = File("database:\n  url: postgresql://cairn:s3cret@db/cairn\n", 0666);
  EXPECT_EQ(Error(file), file.string() +
                             ": the configuration file is writable by others (mode 0666): anyone "
                             "could change the database, plugins and workflows it names; chmod "
                             "o-w " +
                             file.string());
  // Without a password too: the file still decides what cairn loads.
  EXPECT_NE(Error(File("log:\n  level: info\n", 0602)).find("chmod o-w"), std::string::npos);
  // Group-writable is a deployment's choice (a group of administrators).
  EXPECT_EQ(Error(File("log:\n  level: info\n", 0664)), "");
}

TEST_F(ConfigFileModes, APasswordInAFileReadableByOthersIsRefused) {
  const fs::path file = File("database:\n  url: postgresql://cairn:s3cret@db/cairn\n", 0644);
  const std::string error = Error(file);
  EXPECT_NE(error.find("database.url: holds a password, and the file is readable by others "
                       "(mode 0644): chmod o-r " +
                       file.string()),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("s3cret"), std::string::npos) << error;
  EXPECT_EQ(Error(File("database:\n  url: \"host=db password=x\"\n", 0604)).empty(), false);
  EXPECT_EQ(Error(File("database:\n  url: postgresql://cairn:s3cret@db/cairn\n", 0640)), "");
  EXPECT_EQ(Error(File("database:\n  url: postgresql://cairn@db/cairn\n", 0644)), "");
}

TEST_F(ConfigFileModes, ASecretFileReadableOrWritableByOthersIsRefused) {
  const fs::path secret = dir_.Write("db-url", "postgresql://cairn:s3cret@db/cairn\n");
  for (const auto& [mode, who] : {std::pair<unsigned, std::string>{0644, "readable by others"},
                                  {0602, "writable by others"},
                                  {0606, "readable and writable by others"}}) {
    fs::permissions(secret, fs::perms(mode));
    const std::string error = Error(File("database:\n  url_file: db-url\n", 0644));
    EXPECT_NE(error.find("database URL file: " + who), std::string::npos) << error;
    EXPECT_NE(error.find("chmod o-rw " + secret.string()), std::string::npos) << error;
  }
  // Its group may read it: root:cairn 0640 is how a service shares a secret.
  fs::permissions(secret, fs::perms(0640));
  EXPECT_EQ(LoadConfig(File("database:\n  url_file: db-url\n", 0644)).database.url,
            "postgresql://cairn:s3cret@db/cairn");
}

TEST(ConfigSecrets, ReadsUrlFileTrimmingTheNewline) {
  TempDir dir;
  fs::permissions(dir.Write("secrets/db-url", "postgresql://cairn:s3cret@db/cairn\n"),
                  fs::perms(0600));
  const fs::path file = dir.Write("cairn.yaml", "database:\n  url_file: secrets/db-url\n");
  const DaemonConfig c = LoadConfig(file);
  EXPECT_EQ(c.database.url, "postgresql://cairn:s3cret@db/cairn");
  EXPECT_EQ(c.database.url_origin, "file " + (dir.path() / "secrets/db-url").string());
}

TEST(ConfigSecrets, MissingUrlFileIsAClearError) {
  TempDir dir;
  const fs::path file = dir.Write("cairn.yaml", "database:\n  url_file: /nonexistent/db-url\n");
  try {
    LoadConfig(file);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() +
                                         ":2: database.url_file: /nonexistent/db-url: database "
                                         "URL file: no such file");
  }
  fs::permissions(dir.Write("empty", "\n"), fs::perms(0600));
  const fs::path empty = dir.Write("empty.yaml", "database:\n  url_file: empty\n");
  try {
    LoadConfig(empty);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("file is empty"), std::string::npos) << e.what();
  }
}

TEST(ConfigSecrets, ReadsSystemdCredential) {
  TempDir dir;
  fs::permissions(dir.Write("creds/database-url", "host=db user=cairn password=x\r\n"),
                  fs::perms(0400));
  const char* old = getenv("CREDENTIALS_DIRECTORY");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("CREDENTIALS_DIRECTORY", (dir.path() / "creds").c_str(), 1);
  const DaemonConfig c =
      LoadConfigFromString("database:\n  url_credential: database-url\n", "c.yaml");
  EXPECT_EQ(c.database.url, "host=db user=cairn password=x");
  EXPECT_EQ(c.database.url_origin, "systemd credential database-url");
  EXPECT_EQ(LoadError("database:\n  url_credential: ../etc/passwd\n", "c.yaml")
                .rfind("c.yaml:2: database.url_credential: must be a credential name", 0),
            0u);
  unsetenv("CREDENTIALS_DIRECTORY");
  EXPECT_EQ(LoadError("database:\n  url_credential: database-url\n", "c.yaml")
                .rfind("c.yaml:2: database.url_credential: credential \"database-url\" requested "
                       "but $CREDENTIALS_DIRECTORY is not set",
                       0),
            0u);
  if (saved) setenv("CREDENTIALS_DIRECTORY", saved->c_str(), 1);
}

TEST(ConfigEnvironment, OverridesTheFile) {
  DaemonConfig c = LoadConfigFromString(
      "database:\n  url: postgresql://file/db\n  schema: fromfile\nworker:\n  concurrency: 2\n",
      "cairn.yaml");
  ApplyEnvironment(c, Env({{"CAIRN_DATABASE_URL", "postgresql://env/db"},
                           {"CAIRN_SCHEMA", "fromenv"},
                           {"CAIRN_CONCURRENCY", "32"},
                           {"CAIRN_LOG_LEVEL", "warn"},
                           {"CAIRN_METRICS_LISTEN", "0.0.0.0:9500"}}));
  EXPECT_EQ(c.database.url, "postgresql://env/db");
  EXPECT_EQ(c.database.url_origin, "environment CAIRN_DATABASE_URL");
  EXPECT_EQ(c.database.schema, "fromenv");
  EXPECT_EQ(c.worker.concurrency, 32);
  EXPECT_EQ(c.log.level, "warn");
  EXPECT_EQ(c.metrics.listen, "0.0.0.0:9500");
}

TEST(ConfigEnvironment, MetricsListenBeatsTheFileButCannotDisableMetrics) {
  DaemonConfig c = LoadConfigFromString("metrics:\n  listen: \"127.0.0.1:9100\"\n", "cairn.yaml");
  ApplyEnvironment(c, Env({{"CAIRN_METRICS_LISTEN", "0.0.0.0:9464"}}));
  EXPECT_EQ(c.metrics.listen, "0.0.0.0:9464");
  // Empty counts as unset, like every variable: the file's address stays.
  DaemonConfig disabled = LoadConfigFromString("metrics:\n  listen: \"\"\n", "cairn.yaml");
  ApplyEnvironment(disabled, Env({{"CAIRN_METRICS_LISTEN", ""}}));
  EXPECT_EQ(disabled.metrics.listen, "");
  DaemonConfig kept =
      LoadConfigFromString("metrics:\n  listen: \"127.0.0.1:9100\"\n", "cairn.yaml");
  ApplyEnvironment(kept, Env({{"CAIRN_METRICS_LISTEN", ""}}));
  EXPECT_EQ(kept.metrics.listen, "127.0.0.1:9100");
}

TEST(ConfigEnvironment, UnsetOrEmptyVariablesKeepTheFile) {
  DaemonConfig c = LoadConfigFromString("database:\n  url: postgresql://file/db\n", "cairn.yaml");
  ApplyEnvironment(c, Env({{"CAIRN_DATABASE_URL", ""}}));
  EXPECT_EQ(c.database.url, "postgresql://file/db");
  EXPECT_EQ(c.database.schema, "cairn");
  EXPECT_EQ(c.worker.concurrency, 8);
}

TEST(ConfigEnvironment, RejectsInvalidValuesNamingTheVariable) {
  const DaemonConfig original;
  struct Case {
    const char* name;
    const char* value;
    const char* message;
  };
  for (const Case& k : {
           Case{"CAIRN_CONCURRENCY", "0",
                "environment: CAIRN_CONCURRENCY: must be an integer between 1 and 1024, got \"0\""},
           Case{"CAIRN_CONCURRENCY", "8x",
                "environment: CAIRN_CONCURRENCY: must be an integer between 1 and 1024, got "
                "\"8x\""},
           Case{"CAIRN_SCHEMA", "public; drop",
                "environment: CAIRN_SCHEMA: invalid schema name \"public; drop\": must match "
                "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
           Case{"CAIRN_LOG_LEVEL", "loud",
                "environment: CAIRN_LOG_LEVEL: must be one of trace | debug | info | warn | "
                "error, got \"loud\""},
           Case{"CAIRN_METRICS_LISTEN", "9464",
                "environment: CAIRN_METRICS_LISTEN: must be host:port (port 1-65535) or empty to "
                "disable, got \"9464\""},
           Case{"CAIRN_METRICS_LISTEN", "0.0.0.0:99999",
                "environment: CAIRN_METRICS_LISTEN: must be host:port (port 1-65535) or empty to "
                "disable, got \"0.0.0.0:99999\""},
       }) {
    DaemonConfig c = original;
    try {
      ApplyEnvironment(c, Env({{k.name, k.value}}));
      ADD_FAILURE() << "accepted " << k.name << "=" << k.value;
    } catch (const ConfigError& e) {
      EXPECT_STREQ(e.what(), k.message);
    }
    EXPECT_EQ(c.database.schema, "cairn");  // unchanged on error
    EXPECT_EQ(c.worker.concurrency, 8);
    EXPECT_EQ(c.metrics.listen, "127.0.0.1:9464");
  }
}

TEST(ConfigEnvironment, ReadsTheProcessEnvironment) {
  setenv("CAIRN_CONCURRENCY", "3", 1);
  DaemonConfig c;
  ApplyEnvironment(c);
  unsetenv("CAIRN_CONCURRENCY");
  EXPECT_EQ(c.worker.concurrency, 3);
}

TEST(ConfigValidation, ChecksValuesSetInCode) {
  DaemonConfig c;
  EXPECT_NO_THROW(ValidateConfig(c));
  c.worker.concurrency = 0;
  try {
    ValidateConfig(c);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "config: worker.concurrency: must be an integer between 1 and 1024");
  }
}

TEST(ConfigLoader, RefusesDeepOrHugeInput) {
  const std::string deep =
      "worker:\n  queues: " + std::string(1000, '[') + std::string(1000, ']') + "\n";
  EXPECT_EQ(LoadError(deep),
            "cairn.yaml:2: YAML nesting is deeper than 64 levels; refusing to parse it");
  // Unclosed as well: yaml-cpp's guard stops it where it noticed, at the end.
  const std::string unclosed = "worker:\n  queues: " + std::string(1000, '[') + "\n";
  EXPECT_EQ(LoadError(unclosed),
            "cairn.yaml:3: YAML nesting is deeper than 64 levels; refusing to parse it");
  TempDir dir;
  const fs::path big = dir.Write("big.yaml", std::string(5 * 1024 * 1024, '#'));
  EXPECT_THROW(LoadConfig(big), ConfigError);
  EXPECT_THROW(LoadConfig(dir.path() / "missing.yaml"), ConfigError);
}

TEST(DatabaseUrlHasPassword, FindsEveryForm) {
  EXPECT_TRUE(DatabaseUrlHasPassword("postgresql://cairn:s3cret@db:5432/cairn"));
  EXPECT_TRUE(DatabaseUrlHasPassword("postgresql://db/cairn?user=u&password=p"));
  EXPECT_TRUE(DatabaseUrlHasPassword("host=db password=s3cret user=cairn"));
  EXPECT_TRUE(DatabaseUrlHasPassword("host=db password='s3 cret'"));
  EXPECT_FALSE(DatabaseUrlHasPassword("postgresql://cairn@db/cairn"));
  EXPECT_FALSE(DatabaseUrlHasPassword("postgresql://cairn:@db/cairn"));
  EXPECT_FALSE(DatabaseUrlHasPassword("host=db user=cairn passfile=/etc/pgpass"));
  EXPECT_FALSE(DatabaseUrlHasPassword(""));
}

TEST(RedactDatabaseUrl, HidesPasswords) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://cairn:s3cret@db:5432/cairn"),
            "postgresql://cairn:****@db:5432/cairn");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://cairn@db/cairn"), "postgresql://cairn@db/cairn");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db/cairn?user=u&password=p&sslmode=require"),
            "postgresql://db/cairn?user=u&password=****&sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("host=db password=s3cret user=cairn"),
            "host=db password=**** user=cairn");
  EXPECT_EQ(RedactDatabaseUrl("host=db password='s3 cret' user=cairn"),
            "host=db password=**** user=cairn");
}

// ---------------------------------------------------------------- layers

// A value for every key that differs from its default. A key added to the
// table without a sample here fails EveryKeyHasAnEnvironmentVariable.
std::map<std::string, std::string> SampleValues(const fs::path& dir) {
  return {
      {"database.url", "postgresql://sample/db"},
      {"database.url_file", (dir / "url").string()},
      {"database.url_credential", "database-url"},
      {"database.schema", "sample"},
      {"database.pool_size", "40"},
      {"database.idle_timeout", "2m"},
      {"worker.id", "sample-1"},
      {"worker.queues", "[a, b]"},
      {"worker.concurrency", "5"},
      {"worker.poll_interval", "2s"},
      {"worker.lease", "40s"},
      {"worker.claim_batch", "3"},
      {"worker.batch_size", "16"},
      {"worker.shutdown_grace", "20s"},
      {"worker.listen", "false"},
      {"plugins.directories", "[" + (dir / "plugins").string() + "]"},
      {"plugins.isolation", "thread"},
      {"plugins.isolation_by_plugin", "{noop: process}"},
      {"plugins.isolation_by_workflow", "{order: thread}"},
      {"plugins.memory_limit", "536870912"},
      {"workflows.paths", "[" + (dir / "workflows").string() + "]"},
      {"log.level", "debug"},
      {"log.format", "json"},
      {"metrics.listen", "127.0.0.1:9500"},
      {"metrics.backlog_interval", "30s"},
      {"health.listen", "127.0.0.1:9501"},
      {"health.grace", "20s"},
      {"maintenance.reaper_interval", "10s"},
      {"maintenance.crash_limit", "5"},
      {"maintenance.retention", "7d"},
      {"queue_limits", "{api: {max_running: 3, rate_per_second: 2.5, burst: 4}}"},
      {"schedules", "[{name: nightly, workflow: w, cron: '0 3 * * *'}]"},
  };
}

TEST(ConfigLayers, EveryKeyHasAnEnvironmentVariable) {
  TempDir dir;
  fs::permissions(dir.Write("url", "postgresql://from/file\n"), fs::perms(0600));
  fs::permissions(dir.Write("creds/database-url", "postgresql://from/credential\n"),
                  fs::perms(0400));
  const char* old = getenv("CREDENTIALS_DIRECTORY");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("CREDENTIALS_DIRECTORY", (dir.path() / "creds").c_str(), 1);

  const std::map<std::string, std::string> samples = SampleValues(dir.path());
  const Json defaults = ShowConfig(DaemonConfig{});
  ASSERT_GT(defaults.size(), 20u);
  for (const Json& entry : defaults) {
    const std::string key = entry["key"];
    const std::string variable = entry["env"];
    SCOPED_TRACE(key + " via " + variable);
    EXPECT_EQ(variable, ConfigEnvironmentName(key));
    const auto sample = samples.find(key);
    ASSERT_NE(sample, samples.end()) << "no sample value for " << key << " in SampleValues";
    ConfigSources sources;
    sources.env = Env({{variable, sample->second}});
    const DaemonConfig c = LoadDaemonConfig(sources);
    const Json shown = ShowConfig(c);
    const auto it =
        std::find_if(shown.begin(), shown.end(), [&](const Json& e) { return e["key"] == key; });
    ASSERT_NE(it, shown.end());
    EXPECT_EQ((*it)["source"], "environment " + variable);
    EXPECT_NE((*it)["value"], entry["value"]) << "the variable changed nothing";
  }
  if (saved) {
    setenv("CREDENTIALS_DIRECTORY", saved->c_str(), 1);
  } else {
    unsetenv("CREDENTIALS_DIRECTORY");
  }
}

TEST(ConfigLayers, DropInsThenEnvironmentThenFlagsEachSetOnlyWhatTheyName) {
  TempDir dir;
  const fs::path file = dir.Write("cairn.yaml",
                                  "database:\n  schema: main\nworker:\n  concurrency: 2\n"
                                  "  lease: 10s\nlog:\n  level: info\n");
  dir.Write("cairn.yaml.d/20-late.yaml", "worker:\n  concurrency: 6\n");
  dir.Write("cairn.yaml.d/10-early.yaml", "worker:\n  concurrency: 4\n  queues: [fast]\n");
  dir.Write("cairn.yaml.d/README", "not yaml: [ignored because of its name\n");
  ConfigSources sources;
  sources.file = file;
  sources.env = Env({{"CAIRN_LOG_LEVEL", "warn"}, {"CAIRN_WORKER_LEASE", "20s"}});
  sources.flags = {{"--log-level", "log.level", "error"}};
  const DaemonConfig c = LoadDaemonConfig(sources);
  EXPECT_EQ(c.database.schema, "main");
  EXPECT_EQ(c.worker.concurrency, 6);  // the last drop-in in name order
  EXPECT_EQ(c.worker.queues, std::vector<std::string>{"fast"});
  EXPECT_EQ(c.worker.lease, std::chrono::seconds(20));
  EXPECT_EQ(c.log.level, "error");
  EXPECT_EQ(c.origins.at("database.schema").Text(), file.string() + ":2");
  EXPECT_EQ(c.origins.at("worker.concurrency").Text(),
            (dir.path() / "cairn.yaml.d/20-late.yaml").string() + ":2");
  EXPECT_EQ(c.origins.at("worker.lease").Text(), "environment CAIRN_WORKER_LEASE");
  EXPECT_EQ(c.origins.at("log.level").Text(), "command line --log-level");
  EXPECT_EQ(c.origins.count("worker.poll_interval"), 0u);
}

TEST(ConfigLayers, AnErrorNamesTheLayerThatSetTheValue) {
  TempDir dir;
  const fs::path file = dir.Write("cairn.yaml", "worker:\n  concurrency: 2\n");
  dir.Write("cairn.yaml.d/50-bad.yaml", "worker:\n  lease: 500ms\n");
  ConfigSources sources;
  sources.file = file;
  try {
    LoadDaemonConfig(sources);
    ADD_FAILURE() << "a lease under a second was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find((dir.path() / "cairn.yaml.d/50-bad.yaml").string()),
              std::string::npos)
        << e.what();
  }
  sources.file.reset();
  sources.env = Env({{"CAIRN_WORKER_QUEUES", "[ok, \"bad queue\"]"}});
  try {
    LoadDaemonConfig(sources);
    ADD_FAILURE() << "a queue name with a space was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("environment: CAIRN_WORKER_QUEUES", 0), 0u) << e.what();
  }
  sources.env = nullptr;
  sources.flags = {{"--concurrency", "worker.concurrency", "0"}};
  try {
    LoadDaemonConfig(sources);
    ADD_FAILURE() << "concurrency 0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("command line: --concurrency", 0), 0u) << e.what();
  }
}

// A workflow moved onto threads may need a plugin the running daemon never
// loaded in-process, so SIGHUP does not apply isolation (and says so).
TEST(ConfigLayers, IsolationIsNotReloadable) {
  for (const Json& entry : ShowConfig(DaemonConfig{})) {
    const std::string key = entry["key"];
    if (key.rfind("plugins.isolation", 0) == 0) {
      EXPECT_FALSE(entry["reloadable"].get<bool>()) << key;
    }
  }
}

TEST(ConfigLayers, ShowMasksSecrets) {
  ConfigSources sources;
  sources.env = Env({{"CAIRN_DATABASE_URL", "postgresql://cairn:hunter2@db/cairn"}});
  const Json shown = ShowConfig(LoadDaemonConfig(sources));
  EXPECT_EQ(shown.dump().find("hunter2"), std::string::npos) << shown.dump();
}

}  // namespace
}  // namespace cairn
