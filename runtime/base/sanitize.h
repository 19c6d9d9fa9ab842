/* sanitize.h - LUDO__ASAN is 1 when AddressSanitizer instruments this
 * build: GCC says so with __SANITIZE_ADDRESS__, clang (the fuzz builds)
 * through __has_feature. */
#ifndef LUDO_BASE_SANITIZE_H
#define LUDO_BASE_SANITIZE_H

#if defined(__SANITIZE_ADDRESS__)
#define LUDO__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LUDO__ASAN 1
#endif
#endif
#ifndef LUDO__ASAN
#define LUDO__ASAN 0
#endif

#endif
