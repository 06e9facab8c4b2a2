/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - the libFuzzer entry point every tests/fuzz/fuzz_*.c defines. Built two ways: with
 * clang -fsanitize=fuzzer for `make fuzz`, and with replay.c as a plain test that runs the
 * saved corpus (tests/fuzz/corpus/<target>/) on every `make check`.
 */
#ifndef HP_FUZZ_H
#define HP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
