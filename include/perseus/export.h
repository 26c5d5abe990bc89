/* PRS_API marks the public functions of libperseus. The library is built with hidden visibility
 * (-fvisibility=hidden), so only what carries PRS_API is exported from libperseus.so; the
 * internal functions (prs__*) and everything else stay inside it. Harmless for the static
 * library and for programs. */
#ifndef PERSEUS_EXPORT_H
#define PERSEUS_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define PRS_API __attribute__((visibility("default")))
#else
#define PRS_API
#endif

#endif
