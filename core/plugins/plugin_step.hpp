// The adapter from a step of a loaded plugin (a C function of cairn/plugin.h)
// to cairn::Step: it marshals the call into C buffers, invokes the plugin
// behind an exception barrier, and turns what the plugin did through the host
// table into one StepOutcome. Steps are immutable and safe to invoke from
// several threads at once (each invocation has its own context).
#pragma once

#include <cairn/plugin.h>

#include <memory>
#include <string>

#include "step.hpp"

namespace cairn::plugins {

std::shared_ptr<Step> MakePluginStep(std::string name, std::string plugin, cairn_step_fn invoke,
                                     void* user_data);

}  // namespace cairn::plugins
