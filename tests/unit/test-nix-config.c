/* SPDX-License-Identifier: MIT */
/* The worker configs the NixOS module generates (nixos/logic.nix), read by the real parser.
 *
 * Without arguments (make check): the expected outputs tests/data/nix/expected/NAME.json,
 * which tests/unit/test-nix.sh keeps equal to what the module generates for the agents of
 * tests/data/nix/cases.nix, must load with config_load() and mean what the module options
 * said (sizes as strings and as integers, defaults, driver, mounts, signing, cache, network).
 *
 * With --check FILE...: config_load() each file and print "FILE: ok" or "FILE: CODE: message";
 * exit 0 when every file loads, 1 otherwise. tests/unit/test-nix.sh runs this on every config
 * the logic generates, good and bad. It is the parser alone: unlike a worker verb it creates
 * no directory and takes no lock. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "parser/config.h"
#include "tests/unit/lib/tfw-test.h"

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)

static Config *load(const char *name) {
        char path[256];
        Config *c = NULL;
        TfwError e = {0};

        snprintf(path, sizeof(path), "tests/data/nix/expected/%s.json", name);
        if (config_load(path, &c, &e) < 0)
                fail_msg("%s: %s: %s", path, e.code, e.message);
        return c;
}

static void test_hermes_coding(void **state) {
        _cleanup_config_ Config *c = load("hermes-coding");
        (void) state;

        assert_string_equal(c->name, "hermes-coding");
        assert_string_equal(c->workspace, "/var/lib/hermes-coding/workspace");
        assert_string_equal(c->state_dir, "/var/lib/tentaflake-worker-hermes-coding");
        assert_string_equal(c->results_dir, "/run/tentaflake-worker-hermes-coding/results");
        assert_int_equal(c->container_uid, 10000);
        assert_int_equal(c->container_gid, 10000);
        assert_int_equal(c->driver, DRIVER_RUNSC);
        assert_string_equal(c->platform, "systrap");
        assert_null(c->runsc);
        assert_null(c->image);
        assert_null(c->signing_key);
        /* no systemMounts option given: the worker's default list (docs/config.md) */
        assert_int_equal(c->n_system_mounts, 8);
        assert_string_equal(c->system_mounts[0].host, "/usr");
        /* maxSnapshotBytes = 1024 * 1024 * 1024 arrives as a plain integer */
        assert_int_equal(c->limits.max_snapshot_bytes, GIB);
        assert_int_equal(c->limits.max_snapshot_entries, 200000);
        assert_int_equal(c->limits.memory, 2 * GIB);
        assert_int_equal(c->limits.memory_swap, 2 * GIB);
        assert_int_equal(c->limits.cpus_milli, 2000);
        assert_int_equal(c->limits.pids, 512);
        assert_int_equal(c->limits.workspace_tmpfs, 2 * GIB);
        assert_int_equal(c->limits.tmp_tmpfs, 256 * MIB);
        assert_int_equal(c->limits.max_timeout_seconds, 900);
        assert_int_equal(c->limits.default_timeout_seconds, 300);
        assert_int_equal(c->limits.max_log_bytes, 8 * MIB);
        assert_int_equal(c->retention_days, 14);
        assert_int_equal(c->concurrency, 1);
        /* no cache option: no cache key, so no cache */
        assert_null(c->cache.paths);
        assert_int_equal(c->cache.n_paths, 0);
        /* no network option: no network key, so no network */
        assert_null(c->network.allow);
        assert_int_equal(c->network.n_allow, 0);
}

static void test_hermes_review(void **state) {
        _cleanup_config_ Config *c = load("hermes-review");
        (void) state;

        assert_int_equal(c->container_uid, 10001);
        assert_int_equal(c->container_gid, 10000);
}

static void test_zeroclaw(void **state) {
        _cleanup_config_ Config *c = load("zeroclaw");
        (void) state;

        assert_int_equal(c->container_uid, 65534);
        assert_int_equal(c->container_gid, 65534);
        assert_string_equal(c->workspace, "/var/lib/zeroclaw-zeroclaw/data");
}

static void test_builder(void **state) {
        _cleanup_config_ Config *c = load("builder");
        (void) state;

        assert_string_equal(c->workspace, "/home/builder/ws");
        assert_string_equal(c->state_dir, "/srv/tfw/builder-state");
        assert_string_equal(c->results_dir, "/srv/tfw/builder-results");
        assert_string_equal(c->runsc, "/usr/bin/runsc");
        assert_int_equal(c->n_system_mounts, 2);
        assert_string_equal(c->system_mounts[0].host, "/nix/store");
        assert_string_equal(c->system_mounts[0].sandbox, "/nix/store");
        assert_string_equal(c->system_mounts[0].identity, "nixpkgs-24.05");
        assert_string_equal(c->system_mounts[1].host, "/opt/tools/bin");
        assert_string_equal(c->system_mounts[1].sandbox, "/usr/bin");
        assert_null(c->system_mounts[1].identity);
        assert_int_equal(c->concurrency, 2);
        assert_int_equal(c->limits.memory, 4 * GIB);
        assert_int_equal(c->limits.memory_swap, 6 * GIB);
        assert_int_equal(c->limits.cpus_milli, 1500);
        assert_string_equal(c->limits.cpus, "1.5");
        assert_int_equal(c->limits.max_timeout_seconds, 3600);
        assert_int_equal(c->limits.default_timeout_seconds, 600);
        assert_string_equal(c->signing_key, "/srv/tfw/builder-state/signing.key");
        assert_string_equal(c->signing_identity, "builder@ci.example");
        /* cache = { paths = [ "target" "build/cache" ]; maxBytes = "1g"; } */
        assert_int_equal(c->cache.n_paths, 2);
        assert_string_equal(c->cache.paths[0], "target");
        assert_string_equal(c->cache.paths[1], "build/cache");
        assert_null(c->cache.paths[2]);
        assert_int_equal(c->cache.max_bytes, GIB);
        assert_int_equal(c->cache.max_entries, 200000);
        /* network = { allow = [ ... ]; maxUploadBytes = "512k"; } */
        assert_int_equal(c->network.n_allow, 3);
        assert_string_equal(c->network.allow[0], "registry.npmjs.org:443");
        assert_string_equal(c->network.allow[1], "*.pythonhosted.org:443");
        assert_string_equal(c->network.allow[2], "10.0.0.5:3128");
        assert_null(c->network.allow[3]);
        assert_int_equal(c->network.max_upload_bytes, 512 * 1024);
        assert_int_equal(c->network.max_download_bytes, 2 * GIB);
}

static void test_docker_one(void **state) {
        _cleanup_config_ Config *c = load("docker-one");
        (void) state;

        assert_int_equal(c->driver, DRIVER_DOCKER);
        assert_string_equal(c->image,
                            "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        assert_null(c->runsc);
        assert_int_equal(c->n_system_mounts, 0);
        assert_null(c->cache.paths);
}

static int check_files(int argc, char **argv) {
        int bad = 0;

        for (int i = 0; i < argc; i++) {
                _cleanup_config_ Config *c = NULL;
                TfwError e = {0};
                if (config_load(argv[i], &c, &e) < 0) {
                        printf("%s: %s: %s\n", argv[i], e.code ? e.code : "?", e.message);
                        bad = 1;
                } else
                        printf("%s: ok\n", argv[i]);
        }
        return bad;
}

int main(int argc, char **argv) {
        if (argc >= 2 && streq(argv[1], "--check"))
                return check_files(argc - 2, argv + 2);
        if (argc != 1) {
                fprintf(stderr, "usage: %s [--check FILE...]\n", argv[0]);
                return 2;
        }

        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hermes_coding),
                cmocka_unit_test(test_hermes_review),
                cmocka_unit_test(test_zeroclaw),
                cmocka_unit_test(test_builder),
                cmocka_unit_test(test_docker_one),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
