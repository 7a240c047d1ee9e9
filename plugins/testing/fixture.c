/* Loader fixtures: one C99 source compiled into several small plugins that
 * the loader must refuse (or accept), selected by compile definitions:
 *   FIXTURE_NAME, FIXTURE_STEP      plugin name and its one step's name
 *   FIXTURE_MAJOR_DELTA / _MINOR_DELTA  added to the ABI version it claims
 *   FIXTURE_NO_ENTRY                exports no entry point at all
 *   FIXTURE_NULL_DESCRIPTOR         the entry point returns NULL
 *   FIXTURE_CONSTRUCTOR_MARKER      creates the file named by the environment
 *                                   variable CAIRN_TEST_MARKER when dlopen
 *                                   runs its constructor (proves the trust
 *                                   checks happen before dlopen)
 * Every fixture with an entry point also claims the ABI minor given by the
 * environment variable CAIRN_TEST_FIXTURE_ABI_MINOR when it is set, read on
 * each call of the entry point: a plugin built for an older minor (its
 * descriptor and step table are the same in every 1.x).
 * Built into <build>/plugins/fixtures/, never into the plugin directory. */
#include <cairn/plugin.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef FIXTURE_NAME
#define FIXTURE_NAME "fixture"
#endif
#ifndef FIXTURE_STEP
#define FIXTURE_STEP "fixture_step"
#endif
#ifndef FIXTURE_MAJOR_DELTA
#define FIXTURE_MAJOR_DELTA 0
#endif
#ifndef FIXTURE_MINOR_DELTA
#define FIXTURE_MINOR_DELTA 0
#endif

#ifdef FIXTURE_CONSTRUCTOR_MARKER
__attribute__((constructor)) static void Mark(void) {
  const char* path = getenv("CAIRN_TEST_MARKER");
  if (path != NULL) {
    FILE* f = fopen(path, "w");
    if (f != NULL) fclose(f);
  }
}
#endif

static cairn_result FixtureStep(void* user_data, const cairn_step_call* call, cairn_step_ctx* ctx) {
  (void)user_data;
  (void)call;
  (void)ctx;
  return CAIRN_OK;
}

static const cairn_step_def kSteps[] = {{FIXTURE_STEP, FixtureStep, NULL}};

static const cairn_plugin_descriptor kDescriptor = {
    sizeof(cairn_plugin_descriptor),
    CAIRN_ABI_MAJOR + FIXTURE_MAJOR_DELTA,
    CAIRN_ABI_MINOR + FIXTURE_MINOR_DELTA,
    FIXTURE_NAME,
    "0.0.1",
    kSteps,
    1,
    sizeof(cairn_step_def),
};

#ifndef FIXTURE_NO_ENTRY
CAIRN_PLUGIN_EXPORT const cairn_plugin_descriptor* cairn_plugin_entry(const cairn_host_api* host) {
  (void)host;
#ifdef FIXTURE_NULL_DESCRIPTOR
  (void)kDescriptor;
  host->log(NULL, CAIRN_LOG_ERROR, "this fixture always refuses to load");
  return NULL;
#else
  {
    static cairn_plugin_descriptor claimed;
    const char* minor = getenv("CAIRN_TEST_FIXTURE_ABI_MINOR");
    if (minor == NULL || *minor == '\0') return &kDescriptor;
    claimed = kDescriptor;
    claimed.abi_minor = (uint32_t)strtoul(minor, NULL, 10);
    return &claimed;
  }
#endif
}
#else
/* Something visible, so the object is a normal plugin minus the entry. */
CAIRN_PLUGIN_EXPORT int cairn_fixture_without_entry(void) { return kDescriptor.step_count > 0; }
#endif
