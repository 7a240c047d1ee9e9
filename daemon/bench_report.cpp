// See bench_report.hpp.
#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <sstream>
#include <string>

namespace cairn::bench {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto low = static_cast<size_t>(std::floor(rank));
  const size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (rank - static_cast<double>(low));
}

std::optional<PgbenchSummary> ParsePgbenchSummary(std::string_view output) {
  const std::string text(output);
  static const std::regex kTps(R"(tps = ([0-9]+(\.[0-9]+)?) \(without initial connection time\))");
  static const std::regex kProcessed(R"(number of transactions actually processed: ([0-9]+))");
  static const std::regex kFailed(R"(number of failed transactions: ([0-9]+))");
  std::smatch tps;
  std::smatch processed;
  if (!std::regex_search(text, tps, kTps) || !std::regex_search(text, processed, kProcessed)) {
    return std::nullopt;
  }
  PgbenchSummary summary;
  summary.tps = std::stod(tps[1].str());
  summary.transactions = std::stoll(processed[1].str());
  std::smatch failed;
  if (std::regex_search(text, failed, kFailed)) summary.failed = std::stoll(failed[1].str());
  return summary;
}

std::vector<double> ParsePgbenchLatencies(std::string_view log) {
  // client_id transaction_no time script_no time_epoch time_us [schedule_lag]
  std::vector<double> latencies;
  std::istringstream lines{std::string(log)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int64_t client = 0;
    int64_t transaction = 0;
    int64_t time_us = 0;
    int64_t script = 0;
    int64_t epoch = 0;
    int64_t epoch_us = 0;
    if (!(fields >> client >> transaction >> time_us >> script >> epoch >> epoch_us)) continue;
    int64_t lag_us = 0;
    // Its time is all lag: pgbench did not time the statements (its clock
    // is read once per wake-up, and the result was already there). Without
    // --rate a line has no lag.
    if ((fields >> lag_us) && time_us <= lag_us) continue;
    latencies.push_back(static_cast<double>(time_us - lag_us) / 1000.0);
  }
  return latencies;
}

UnitCost CostPerUnit(const Counters& before, const Counters& after, int64_t own_reads,
                     int64_t units) {
  if (units <= 0) return {};
  const auto per = [&](int64_t delta) {
    return static_cast<double>(delta) / static_cast<double>(units);
  };
  UnitCost cost;
  cost.transactions = per(after.commits - before.commits - own_reads);
  cost.durable_commits = per(after.next_xid - before.next_xid);
  cost.wal_bytes = per(after.wal_bytes - before.wal_bytes);
  cost.wal_fpi = per(after.wal_fpi - before.wal_fpi);
  cost.wal_syncs = per(after.wal_syncs - before.wal_syncs);
  return cost;
}

namespace {

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// 1234567 -> "1 234 567" (a thin grouping that no locale can misread).
std::string Grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ' ';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

// Columns in characters, not bytes: "·" and "×" are two bytes of UTF-8.
size_t Width(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

std::string FormatRate(double per_second) {
  if (per_second < 10) return Printf("%.1f", per_second);
  return Grouped(std::llround(per_second));
}

std::string FormatRatio(double ratio) {
  if (ratio >= 10) return Printf("%.0f", ratio);
  if (ratio >= 1) return Printf("%.1f", ratio);
  return Printf("%.2f", ratio);
}

std::string FormatFleet(int processes, int slots, int batch_size) {
  return std::to_string(processes) + (processes == 1 ? " process × " : " processes × ") +
         std::to_string(slots) + (slots == 1 ? " slot" : " slots") +
         (batch_size > 1 ? ", batches of " + std::to_string(batch_size) : "");
}

std::string FormatMillis(double ms) {
  if (ms >= 100) return Printf("%.0f", ms);
  if (ms >= 10) return Printf("%.1f", ms);
  return Printf("%.2f", ms);
}

std::string FormatMiB(int64_t bytes) {
  return Printf("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string FormatCost(const UnitCost& cost) {
  const auto count = [](double value) {
    if (value >= 10) return Printf("%.1f", value);
    return value >= 0.1 || value == 0 ? Printf("%.2f", value) : Printf("%.3f", value);
  };
  return count(cost.transactions) + " · " + count(cost.durable_commits) + " · " +
         Grouped(std::llround(cost.wal_bytes)) + " · " + count(cost.wal_fpi);
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 3);
  for (size_t i = 0; i < header.size(); ++i) widths[i] = std::max(widths[i], Width(header[i]));
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], Width(row[i]));
    }
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    out += "|";
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      out += " " + cell + std::string(widths[i] - Width(cell), ' ') + " |";
    }
    out += "\n";
  };
  line(header);
  out += "|";
  for (size_t width : widths) out += std::string(width + 2, '-') + "|";
  out += "\n";
  for (const auto& row : rows) line(row);
  return out;
}

}  // namespace cairn::bench
