/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the writer's frame decoder in the cache profile (links, ATTR frames,
 * directory times). The target is fuzz-artifact-frames.c with the cache profile on; its seeds
 * are in tests/fuzz/corpus/cache-frames. */
#include <stdbool.h>

#define FRAMES_CACHE_PROFILE true
#define FRAMES_SCRATCH "tfw-fuzz-cache-frames-"
#include "fuzz-artifact-frames.c"
