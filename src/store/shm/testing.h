// store/shm/testing.h: for tests only. A hook called inside a shared-store update while its shard is locked, so
// that a test can kill the process at a chosen point of the update and check that the others recover; and a
// switch that makes open() create its file the way it does where the file system has no O_TMPFILE.
#pragma once

namespace rk::shm_testing {

enum class Stage {
  kJournalled,  // the old state is in the journal; the slot's state is not yet written
  kWritten,     // the new state is written; the journal is not yet cleared
};

extern void (*hook)(Stage);

extern bool no_tmpfile;

}  // namespace rk::shm_testing
