// Compiled by ctest (tests/CMakeLists.txt, layers.*): as part of the service itself, where it must build, and as part
// of the stores below it (Redis, batched), where the build must refuse it (docs/architecture.md, "How may use is
// enforced").
#include "service/service.h"
