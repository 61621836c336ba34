/* SPDX-License-Identifier: MIT */
/* The one image-reference rule (contract section 2, runtime.image; section 8, run.image):
 * a reference pinned by digest, in one of two forms:
 *   sha256:<64 lowercase hex>                  a local image id (docker load / docker import)
 *   NAME@sha256:<64 lowercase hex>             a repo digest already pulled
 * NAME is 1..255 bytes of [a-z0-9._/:-] in '/'-separated components, each beginning and ending
 * with a letter or digit ("registry:5000/team/tool:1.2" is one; "a//b", "/a", "a:", "-a" and
 * "--x" are not), so no reference can ever be read as a flag by an engine CLI. */
#pragma once

#include <stdbool.h>

#define IMAGE_NAME_MAX 255

bool image_ref_is_pinned(const char *s);
