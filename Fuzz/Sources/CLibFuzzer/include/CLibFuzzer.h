// libFuzzer's driver, declared for Swift: the toolchain ships libFuzzer (linked by -sanitize=fuzzer)
// but no module for its C API. SwiftPM gives every executable its own `main`, so the harnesses call
// the driver from there instead of relying on the `main` inside libFuzzer.
#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with the command line `argc`/`argv` and the per-input callback `callback`.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
