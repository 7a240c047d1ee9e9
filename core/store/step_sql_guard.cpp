// See step_sql_guard.hpp. The refused statements are listed once, below.
#include "step_sql_guard.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace cairn::store {
namespace {

// Statements that end, split or re-characterise cairn's checkpoint transaction.
constexpr std::array<std::string_view, 8> kTransactionControl = {
    "abort", "begin", "commit", "end", "release", "rollback", "savepoint", "start"};
// Statements that change the session (which outlives the step) or cannot
// run inside a transaction block.
constexpr std::array<std::string_view, 10> kSessionState = {
    "checkpoint", "copy",    "deallocate", "discard",  "listen",
    "load",       "prepare", "reset",      "unlisten", "vacuum"};

bool IsOneOf(std::string_view word, const auto& words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The first three words of the statement (lower-cased; a quoted token ends
// the leading words) and whether anything follows a ';'.
struct StatementShape {
  std::vector<std::string> words;
  bool several = false;

  std::string_view Word(size_t i) const {
    return i < words.size() ? std::string_view(words[i]) : std::string_view();
  }
};

StatementShape Shape(std::string_view sql) {
  StatementShape shape;
  bool after_semicolon = false;
  size_t tokens = 0;
  size_t i = 0;
  const size_t n = sql.size();
  auto note_token = [&] {
    if (after_semicolon) shape.several = true;
  };
  while (i < n) {
    const char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      while (i < n && sql[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      int depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] == '/' && i + 1 < n && sql[i + 1] == '*') {
          ++depth;
          i += 2;
        } else if (sql[i] == '*' && i + 1 < n && sql[i + 1] == '/') {
          --depth;
          i += 2;
        } else {
          ++i;
        }
      }
    } else if (c == ';') {
      after_semicolon = true;
      ++i;
    } else if (c == '\'' || c == '"') {
      note_token();
      const bool backslash_escapes = c == '\'' && i > 0 &&
                                     (sql[i - 1] == 'e' || sql[i - 1] == 'E') &&
                                     (i < 2 || !IsWordChar(sql[i - 2]));
      ++i;
      while (i < n) {
        if (backslash_escapes && sql[i] == '\\') {
          i += 2;
        } else if (sql[i] == c) {
          if (i + 1 < n && sql[i + 1] == c) {
            i += 2;  // doubled quote
          } else {
            ++i;
            break;
          }
        } else {
          ++i;
        }
      }
      ++tokens;  // a quoted token ends the leading words
    } else if (c == '$' && i + 1 < n && !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      // Dollar quote $tag$ ... $tag$ (a $1 parameter is handled below).
      size_t j = i + 1;
      while (j < n && IsWordChar(sql[j])) ++j;
      if (j < n && sql[j] == '$') {
        note_token();
        const std::string_view tag = sql.substr(i, j - i + 1);
        const size_t end = sql.find(tag, j + 1);
        i = end == std::string_view::npos ? n : end + tag.size();
        ++tokens;
      } else {
        note_token();
        i = j;
      }
    } else if (IsWordChar(c)) {
      note_token();
      size_t j = i;
      while (j < n && (IsWordChar(sql[j]) || sql[j] == '$')) ++j;
      std::string word(sql.substr(i, j - i));
      std::transform(word.begin(), word.end(), word.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (tokens == shape.words.size() && tokens < 3) shape.words.push_back(word);
      ++tokens;
      i = j;
    } else {
      note_token();
      ++tokens;
      ++i;
    }
  }
  return shape;
}

}  // namespace

std::optional<std::string> StepSqlRefusal(std::string_view sql) {
  const StatementShape shape = Shape(sql);
  if (shape.several) {
    return std::string("several statements in one call; pass one statement per call");
  }
  const std::string_view first = shape.Word(0);
  const std::string_view second = shape.Word(1);
  if (first.empty()) return std::string("empty statement");
  if (IsOneOf(first, kTransactionControl)) {
    return "transaction control (" + std::string(first) +
           ") is refused: the step runs inside cairn's checkpoint transaction, which cairn "
           "commits or rolls back";
  }
  if (first == "set") {
    // SET LOCAL ends with the transaction; SET CONSTRAINTS is transaction
    // scoped by definition. Plain SET outlives it, and neither may change
    // the transaction's own characteristics.
    const std::string_view target = second == "local" ? shape.Word(2) : second;
    if (target.starts_with("transaction")) {
      return "transaction control (set " + std::string(target) +
             ") is refused: cairn sets up the checkpoint transaction";
    }
    if (second == "local" || second == "constraints") return std::nullopt;
  }
  if (first == "set" || IsOneOf(first, kSessionState)) {
    return "'" + std::string(first) +
           "' is refused in a step: it changes session state of a shared connection or "
           "cannot run in a transaction (SET LOCAL is allowed)";
  }
  return std::nullopt;
}

}  // namespace cairn::store
