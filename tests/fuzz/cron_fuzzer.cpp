// libFuzzer target: cron expressions (CronSchedule::Parse), and for one that
// parses, its next and previous fire times around fixed instants (which must
// bracket them and match). InvalidArgumentError is the documented answer to
// a bad expression; anything else, or any sanitizer report, is a defect.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cron.hpp"
#include "errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace std::chrono;
  try {
    const cairn::CronSchedule cron = cairn::CronSchedule::Parse(text);
    for (const cairn::CronTime t :
         {cairn::CronTime{sys_days{2024y / February / 29} + 23h + 59min + 30s},
          cairn::CronTime{sys_days{2026y / December / 31} + 23h + 59min}}) {
      const cairn::CronTime next = cron.NextAfter(t);
      const cairn::CronTime prev = cron.PrevBefore(t);
      if (!(next > t && prev < t && cron.Matches(next) && cron.Matches(prev))) std::abort();
      (void)cairn::FormatUtc(next);
    }
  } catch (const cairn::InvalidArgumentError&) {
    // Refused with the field and the reason: the right answer.
  }
  return 0;
}
