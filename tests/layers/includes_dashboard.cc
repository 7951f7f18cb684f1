// Compiled by ctest (tests/CMakeLists.txt, layers.*): as part of the dashboard, where it must build, and as part of
// the admin API (server/api), where the build must refuse it: the dashboard adds its routes to the admin listener's,
// never the reverse (docs/architecture.md, "How may use is enforced").
#include "dashboard/dashboard.h"
