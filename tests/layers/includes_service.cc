// Compiled twice by ctest (tests/CMakeLists.txt, layers.*): as part of the service itself, where it must build,
// and as part of the Redis store, where the build must refuse it (docs/architecture.md, "How may use is enforced").
#include "service/service.h"
