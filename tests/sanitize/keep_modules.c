/* keep_modules.c - linked into every executable of an AddressSanitizer build
 * (cmake/PcacheSanitize.cmake), never into a library and never into a
 * normal build.
 *
 * Why: LeakSanitizer reports at exit, after the Vulkan loader has dlclose()d
 * the driver. A leak made inside an unloaded module has no module name left
 * ("<unknown module>"), so a suppression that names the driver cannot match
 * it, and a driver point release that leaks 128 bytes fails every Vulkan
 * test. Keeping every module mapped until exit keeps its name in the report,
 * and scripts/lsan.supp can then suppress exactly the driver's and LLVM's
 * modules while any leak allocated by pcache's own code still fails.
 *
 * How: a definition of dlclose() in the executable comes first in the global
 * symbol scope, so the loader's calls bind here (the link exports the symbol
 * explicitly). The handle is simply kept; nothing a test does needs a
 * module's memory back before exit. */
#include <dlfcn.h>

/* Default visibility: the tree builds with -fvisibility=hidden, and a hidden
 * definition would bind only inside the executable. */
__attribute__((visibility("default"))) int dlclose(void *handle);

__attribute__((visibility("default"))) int dlclose(void *handle) {
  (void)handle;
  return 0;
}
