/* SPDX-License-Identifier: MIT */
/* Shared cmocka plumbing for the unit and integration tests. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Each test runs in its own fresh temporary directory: tfw_tmpdir_setup/teardown as cmocka
 * fixtures store a TestDir in *state. */
typedef struct TestDir {
        int fd;       /* O_DIRECTORY fd of the directory */
        char *path;   /* its absolute path */
} TestDir;

int tfw_tmpdir_setup(void **state);
int tfw_tmpdir_teardown(void **state);

/* Skip with a reason; under TENTAFLAKE_MUST_WORK=1 the skip fails the test instead. */
#define tfw_skip(...)                                                                            \
        do {                                                                                     \
                if (tfw_must_work())                                                             \
                        fail_msg("SKIP is not allowed (TENTAFLAKE_MUST_WORK=1): " __VA_ARGS__);  \
                print_message("SKIP: " __VA_ARGS__);                                             \
                print_message("\n");                                                             \
                skip();                                                                          \
        } while (0)
int tfw_must_work(void);

/* Write a file below dir_fd with the given contents (len may be (size_t)-1 for strlen). */
void tfw_write_file(int dir_fd, const char *name, const char *data, size_t len);

/* Read a fixture from tests/data/<rel> (relative to the source tree root, which is the
 * working directory of `make check`); fails the test when missing. Caller frees. */
char *tfw_read_fixture(const char *rel, size_t *ret_len);

/* Open a fixture read-only; fails the test when missing. */
int tfw_open_fixture(const char *rel);

/* Run fn in a child process (a seccomp filter, a Landlock ruleset or a privilege drop that the
 * test process must not take on); its exit status: 0 when every step held, else the number of
 * the step that failed. Fails the test when the child does not exit normally. */
int tfw_in_child(int (*fn)(void));
