// History as tests count it (run_events): a step that commits writes one
// row, step_committed, or completed when its commit ends the run.
#pragma once

#include <string>

namespace cairn::test {

// The condition on run_events.kind of a step's commit.
inline const std::string kStepCommits = "kind IN ('step_committed', 'completed')";

}  // namespace cairn::test
