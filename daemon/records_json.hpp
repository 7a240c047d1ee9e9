// The JSON form of what the store returns (runs, waits, history events,
// workers, schedules), shared by the CLI's --json output and the console's
// /api/v1 answers so that both say the same thing with the same names. Pure
// functions: thread-safe.
#pragma once

#include "model.hpp"
#include "store.hpp"
#include "store_schedules.hpp"

namespace cairn::cli {

Json RunToJson(const Run& run);
Json WaitToJson(const WaitRecord& wait);
Json EventToJson(const RunEvent& event);
Json WorkerToJson(const store::WorkerState& worker);
Json ScheduleToJson(const store::ScheduleRecord& schedule);

}  // namespace cairn::cli
