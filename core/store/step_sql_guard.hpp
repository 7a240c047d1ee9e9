// The one guard on a transactional step's own SQL: which statements cairn
// refuses before they reach the server. Not a sandbox (plugin code runs in
// the daemon's process and could do anything); it turns the likely mistakes
// into clear errors: transaction control, which belongs to cairn; session
// state that would leak onto a connection other runs use next; statements
// that cannot run in a transaction; and several statements in one string.
// Pure text inspection, safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cairn::store {

// Why `sql` is refused, or nothing when it may run in the step's transaction.
// The statement is scanned lexically (quotes, E'' strings, dollar quotes,
// nested comments), so keywords inside literals or comments do not count.
std::optional<std::string> StepSqlRefusal(std::string_view sql);

}  // namespace cairn::store
