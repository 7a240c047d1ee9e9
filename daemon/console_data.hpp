// The JSON of each console page: what /api/v1 answers, and what
// console_html.cpp draws. Each reads through the store in the caller's
// transaction; a bad filter or an unknown run is an HttpProblem.
#pragma once

#include <string>

#include "console_request.hpp"
#include "store.hpp"

namespace cairn::console {

Json RunsData(store::Tx& tx, const Params& params);
Json RunData(store::Tx& tx, const std::string& id, const Params& params);
Json QueuesData(store::Tx& tx);
Json WorkersData(store::Tx& tx);
Json SchedulesData(store::Tx& tx);
Json DefinitionsData(store::Tx& tx);

}  // namespace cairn::console
