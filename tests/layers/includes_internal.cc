// Compiled by ctest (tests/CMakeLists.txt, layers.*): linking ratekeeper_internal, where it must build, and linking
// ratekeeper, whose users see the public API (include/ratekeeper/) alone, where the build must refuse it
// (docs/architecture.md, "How may use is enforced").
#include "core/registry.h"
