/* ratekeeper/export.h: RK_EXPORT marks what the shared library exports: the public API, and nothing else (the
 * library is built with hidden visibility, so rk::core, rk::store and every internal symbol stay inside it).
 * C and C++ alike. */
#ifndef RATEKEEPER_EXPORT_H
#define RATEKEEPER_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define RK_EXPORT __attribute__((visibility("default")))
#else
#define RK_EXPORT
#endif

#endif /* RATEKEEPER_EXPORT_H */
