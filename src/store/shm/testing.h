// store/shm/testing.h: for tests only. A hook called inside a shared-store update while its shard is locked, so
// that a test can kill the process at a chosen point of the update and check that the others recover; and a
// switch that makes open() create its file the way it does where the file system has no O_TMPFILE.
#pragma once

namespace rk::store::shm_testing {

enum class Stage {
  kJournalled,  // the old state is in the journal; the slot's state is not yet written
  kWritten,     // the new state is written; the journal is not yet cleared
};

// Only in builds with tests (RK_TEST_HOOKS, set by CMake when RK_BUILD_TESTS is on): a release build has neither
// the variables nor a branch on them.
#if defined(RK_TEST_HOOKS)
extern void (*hook)(Stage);
extern bool no_tmpfile;
inline void reached(Stage s) {
  if (hook) hook(s);
}
inline bool without_tmpfile() { return no_tmpfile; }
#else
inline void reached(Stage) {}
inline bool without_tmpfile() { return false; }
#endif

}  // namespace rk::store::shm_testing
