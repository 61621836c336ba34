/* SPDX-License-Identifier: MIT */
/* capsule/oci-spec.c: every wall of contract section 6 step 2, asserted on the generated
 * config.json, and the absence of anything that would widen the capsule (an extra capability,
 * a host namespace, a writable host bind, an extra environment variable). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/env.h"
#include "capsule/oci-spec.h"
#include "capsule/seccomp-allowlist.h"
#include "capsule/seccomp-profile.h"
#include "capsule/protocol.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

typedef struct Fixture {
        Config config;
        SystemMount mounts[3];
        CapsuleSpecParams params;
        char *argv[4];
} Fixture;

static void fixture_init(Fixture *f) {
        memset(f, 0, sizeof(*f));
        f->config.version = 1;
        f->config.name = (char *) "coder-1";
        f->config.container_uid = 10000;
        f->config.container_gid = 10001;
        f->config.driver = DRIVER_RUNSC;
        f->config.platform = (char *) "ptrace";
        f->mounts[0] = (SystemMount) { (char *) "/usr", (char *) "/usr", NULL };
        f->mounts[1] = (SystemMount) { (char *) "/lib", (char *) "/lib", NULL };
        f->mounts[2] = (SystemMount) { (char *) "/opt/tools", (char *) "/tools", (char *) "t1" };
        f->config.system_mounts = f->mounts;
        f->config.n_system_mounts = 3;
        f->config.limits = (ConfigLimits) {
                .memory = 2ULL << 30,
                .memory_swap = 3ULL << 30,
                .cpus_milli = 1500,
                .cpus = "1.5",
                .pids = 512,
                .workspace_tmpfs = 2ULL << 30,
                .tmp_tmpfs = 256ULL << 20,
        };
        f->argv[0] = (char *) "cargo";
        f->argv[1] = (char *) "test";
        f->argv[2] = (char *) "--offline";
        f->argv[3] = NULL;
        f->params = (CapsuleSpecParams) {
                .config = &f->config,
                .job_id = "cargo_test_1",
                .argv = f->argv,
                .timeout_seconds = 300,
                .root_dir = "/var/lib/tfw/scratch/b1/root",
                .snapshot_dir = "/var/lib/tfw/scratch/s1",
                .init_path = "/usr/libexec/tentaflake-worker/tentaflake-capsule-init",
                .passwd_path = "/var/lib/tfw/scratch/b1/passwd",
                .group_path = "/var/lib/tfw/scratch/b1/group",
                .cgroups_path = "/tentaflake-worker-coder-1/tfw-coder-1-cargo_test_1",
        };
}

static json_t *build(const Fixture *f) {
        json_t *spec = NULL;
        TfwError e = {};
        int r = capsule_spec_build(&f->params, &spec, &e);
        if (r < 0)
                fail_msg("capsule_spec_build: %s", e.message);
        return spec;
}

static void assert_keys_exactly(json_t *obj, const char *const *keys, const char *what) {
        const char *k;
        json_t *v;
        size_t n = 0;

        assert_true(json_is_object(obj));
        for (; keys[n]; n++)
                if (!json_object_get(obj, keys[n]))
                        fail_msg("%s: missing key '%s'", what, keys[n]);
        json_object_foreach(obj, k, v) {
                bool known = false;
                for (size_t i = 0; keys[i]; i++)
                        known = known || streq(keys[i], k);
                if (!known)
                        fail_msg("%s: unexpected key '%s'", what, k);
        }
        assert_int_equal(json_object_size(obj), n);
}

static int64_t get_int(json_t *o, const char *path) {
        json_t *v = json_object_get(o, path);
        if (!json_is_integer(v))
                fail_msg("'%s' is not an integer", path);
        return json_integer_value(v);
}

static bool strv_has(json_t *l, const char *s);

static json_t *find_mount(json_t *spec, const char *dest) {
        json_t *mounts = json_object_get(spec, "mounts"), *m, *found = NULL;
        size_t i;
        json_array_foreach(mounts, i, m) {
                if (streq(json_string_value(json_object_get(m, "destination")), dest)) {
                        if (found)
                                fail_msg("mount '%s' appears twice", dest);
                        found = m;
                }
        }
        return found;
}

static bool has_option(json_t *m, const char *opt) {
        json_t *o;
        size_t i;
        json_array_foreach(json_object_get(m, "options"), i, o) {
                if (streq(json_string_value(o), opt))
                        return true;
        }
        return false;
}

static void test_top_level(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);

        /* Nothing but these: in particular no hooks (host commands run by the runtime). */
        const char *keys[] = { "ociVersion", "process", "root", "hostname", "mounts", "linux",
                               "annotations", NULL };
        assert_keys_exactly(spec, keys, "spec");
        assert_string_equal(json_string_value(json_object_get(spec, "hostname")), "capsule");
        json_t *ann = json_object_get(spec, "annotations");
        assert_string_equal(json_string_value(json_object_get(ann, CAPSULE_ANNOTATION_WORKER)),
                            "coder-1");
        assert_string_equal(json_string_value(json_object_get(ann, CAPSULE_ANNOTATION_JOB)),
                            "cargo_test_1");
}

static void test_process_user_and_caps(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *proc = json_object_get(spec, "process");

        const char *pkeys[] = { "terminal", "user", "args", "env", "cwd", "capabilities",
                                "rlimits", "noNewPrivileges", NULL };
        assert_keys_exactly(proc, pkeys, "process");
        assert_true(json_is_false(json_object_get(proc, "terminal")));
        assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));

        json_t *user = json_object_get(proc, "user");
        const char *ukeys[] = { "uid", "gid", "additionalGids", NULL };
        assert_keys_exactly(user, ukeys, "process.user");
        assert_int_equal(get_int(user, "uid"), 10000);
        assert_int_equal(get_int(user, "gid"), 10001);
        assert_true(json_is_array(json_object_get(user, "additionalGids")));
        assert_int_equal(json_array_size(json_object_get(user, "additionalGids")), 0);

        /* All five sets present and empty: an absent set may mean a runtime default. */
        json_t *caps = json_object_get(proc, "capabilities");
        const char *ckeys[] = { "bounding", "effective", "inheritable", "permitted", "ambient",
                                NULL };
        assert_keys_exactly(caps, ckeys, "process.capabilities");
        for (size_t i = 0; ckeys[i]; i++) {
                json_t *set = json_object_get(caps, ckeys[i]);
                assert_true(json_is_array(set));
                if (json_array_size(set) != 0)
                        fail_msg("capability set '%s' is not empty", ckeys[i]);
        }

        assert_string_equal(json_string_value(json_object_get(proc, "cwd")), "/work");
}

static void test_process_args_env(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *proc = json_object_get(spec, "process");

        json_t *args = json_object_get(proc, "args");
        const char *want_args[] = { CAPSULE_INIT_PATH, "--", "cargo", "test", "--offline" };
        assert_int_equal(json_array_size(args), ELEMENTSOF(want_args));
        for (size_t i = 0; i < ELEMENTSOF(want_args); i++)
                assert_string_equal(json_string_value(json_array_get(args, i)), want_args[i]);

        /* Exactly the contract's environment, in this order, nothing else. */
        json_t *env = json_object_get(proc, "env");
        const char *want_env[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/work", "TMPDIR=/tmp", "LANG=C.UTF-8", "TENTAFLAKE_JOB=cargo_test_1",
        };
        assert_int_equal(json_array_size(env), ELEMENTSOF(want_env));
        for (size_t i = 0; i < ELEMENTSOF(want_env); i++)
                assert_string_equal(json_string_value(json_array_get(env, i)), want_env[i]);
}

static void test_rlimits(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *rl = json_object_get(json_object_get(spec, "process"), "rlimits"), *r;
        size_t i;
        bool core = false, nofile = false, nproc = false;

        json_array_foreach(rl, i, r) {
                const char *t = json_string_value(json_object_get(r, "type"));
                int64_t hard = get_int(r, "hard"), soft = get_int(r, "soft");
                /* soft == hard: the job cannot raise a soft limit towards a larger hard one. */
                assert_int_equal(hard, soft);
                if (streq(t, "RLIMIT_CORE")) {
                        core = true;
                        assert_int_equal(hard, 0);
                } else if (streq(t, "RLIMIT_NOFILE")) {
                        nofile = true;
                        assert_int_equal(hard, 1024);
                } else if (streq(t, "RLIMIT_NPROC")) {
                        nproc = true;
                        assert_int_equal(hard, 512);
                } else
                        fail_msg("unexpected rlimit %s", t);
        }
        assert_true(core && nofile && nproc);
}

static void test_root(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *root = json_object_get(spec, "root");
        assert_string_equal(json_string_value(json_object_get(root, "path")),
                            "/var/lib/tfw/scratch/b1/root");
        assert_true(json_is_true(json_object_get(root, "readonly")));
        /* System mounts apply to the empty root; gVisor's binds are read-only whole (no "rro",
         * which is runc's). */
        assert_non_null(find_mount(spec, "/usr"));
        assert_false(strv_has(json_object_get(find_mount(spec, "/usr"), "options"), "rro"));
        assert_non_null(find_mount(spec, "/tools"));

        /* With an image root, it is the root and the host system mounts are not added. */
        f.config.rootfs = (char *) "/srv/images/toolchain";
        _cleanup_json_ json_t *spec2 = build(&f);
        root = json_object_get(spec2, "root");
        assert_string_equal(json_string_value(json_object_get(root, "path")),
                            "/srv/images/toolchain");
        assert_true(json_is_true(json_object_get(root, "readonly")));
        assert_null(find_mount(spec2, "/usr"));
        assert_null(find_mount(spec2, "/tools"));
        assert_non_null(find_mount(spec2, "/snapshot"));
        /* The synthetic passwd and group, never the image's own, read-only. */
        json_t *pw = find_mount(spec2, "/etc/passwd"), *gr = find_mount(spec2, "/etc/group");
        assert_non_null(pw);
        assert_non_null(gr);
        assert_string_equal(json_string_value(json_object_get(pw, "source")),
                            f.params.passwd_path);
        assert_string_equal(json_string_value(json_object_get(gr, "source")),
                            f.params.group_path);
        assert_true(has_option(pw, "ro"));
        assert_true(has_option(gr, "ro"));
}

/* A capsule started ahead of its job (threat 12): nothing of the job in its spec, only init
 * waiting (--warm) and PATH; the walls as for any job; a streamed input has no /snapshot. */
static void test_warm_spec(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        f.params.warm = true;
        f.params.job_id = "warm-0123456789ab";
        f.params.cgroups_path = "/tentaflake-worker-coder-1/tfw-coder-1-warm-0123456789ab";
        f.params.snapshot_dir = NULL;
        f.params.extra_env = (char *const[]) { (char *) "SECRET_OF_A_JOB=1", NULL };
        f.params.check = "lint";
        _cleanup_json_ json_t *spec = build(&f);
        json_t *proc = json_object_get(spec, "process");
        json_t *args = json_object_get(proc, "args");
        assert_int_equal(json_array_size(args), 2);
        assert_string_equal(json_string_value(json_array_get(args, 0)), CAPSULE_INIT_PATH);
        assert_string_equal(json_string_value(json_array_get(args, 1)), CAPSULE_WARM_ARG);
        json_t *env = json_object_get(proc, "env");
        assert_int_equal(json_array_size(env), 1);
        assert_string_equal(json_string_value(json_array_get(env, 0)),
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        _cleanup_free_ char *dump = json_dumps(spec, 0);
        assert_null(strstr(dump, "cargo"));
        assert_null(strstr(dump, "SECRET_OF_A_JOB"));
        assert_null(strstr(dump, "TENTAFLAKE"));
        assert_null(find_mount(spec, CAPSULE_SNAPSHOT_PATH));
        /* The walls are the same as a cold job's. */
        assert_int_equal(get_int(json_object_get(proc, "user"), "uid"), 10000);
        assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));
        assert_true(json_is_true(json_object_get(json_object_get(spec, "root"), "readonly")));
        assert_non_null(find_mount(spec, CAPSULE_WORK_PATH));
}

static void test_mounts(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *mounts = json_object_get(spec, "mounts"), *m;
        size_t i;

        /* The only host paths the capsule sees, each read-only. */
        const char *allowed_sources[] = { f.params.snapshot_dir, f.params.init_path,
                                          f.params.passwd_path, f.params.group_path, "/usr",
                                          "/lib", "/opt/tools" };
        json_array_foreach(mounts, i, m) {
                const char *type = json_string_value(json_object_get(m, "type"));
                const char *src = json_string_value(json_object_get(m, "source"));
                const char *dest = json_string_value(json_object_get(m, "destination"));
                assert_non_null(type);
                assert_non_null(dest);
                assert_false(has_option(m, "rw"));
                if (streq(type, "bind")) {
                        bool ok = false;
                        for (size_t k = 0; k < ELEMENTSOF(allowed_sources); k++)
                                ok = ok || streq(src, allowed_sources[k]);
                        if (!ok)
                                fail_msg("unexpected host bind '%s' -> '%s'", src, dest);
                        if (!has_option(m, "ro"))
                                fail_msg("host bind '%s' is not read-only", src);
                        assert_true(has_option(m, "nosuid"));
                        assert_true(has_option(m, "nodev"));
                } else if (streq(type, "tmpfs")) {
                        assert_true(has_option(m, "nosuid"));
                        /* /dev holds gVisor's own device nodes, so only it may lack nodev;
                         * nothing on it can be executed. */
                        if (streq(dest, "/dev"))
                                assert_true(has_option(m, "noexec"));
                        else
                                assert_true(has_option(m, "nodev"));
                } else if (streq(type, "proc")) {
                        assert_string_equal(dest, "/proc");
                } else if (streq(type, "sysfs")) {
                        assert_string_equal(dest, "/sys");
                        assert_true(has_option(m, "ro"));
                } else
                        fail_msg("unexpected mount type '%s' at '%s'", type, dest);
        }

        json_t *work = find_mount(spec, "/work");
        assert_non_null(work);
        assert_string_equal(json_string_value(json_object_get(work, "type")), "tmpfs");
        assert_true(has_option(work, "size=2147483648"));
        assert_true(has_option(work, "uid=10000"));
        assert_true(has_option(work, "gid=10001"));
        json_t *tmp = find_mount(spec, "/tmp");
        assert_non_null(tmp);
        assert_string_equal(json_string_value(json_object_get(tmp, "type")), "tmpfs");
        assert_true(has_option(tmp, "size=268435456"));

        json_t *snap = find_mount(spec, "/snapshot");
        assert_non_null(snap);
        assert_string_equal(json_string_value(json_object_get(snap, "source")),
                            f.params.snapshot_dir);
        assert_true(has_option(snap, "ro"));
        assert_true(has_option(snap, "noexec"));

        json_t *init = find_mount(spec, CAPSULE_INIT_PATH);
        assert_non_null(init);
        assert_string_equal(json_string_value(json_object_get(init, "source")),
                            f.params.init_path);
        assert_true(has_option(init, "ro"));

        /* The empty root carries passwd and group itself; no host mount for them. */
        assert_null(find_mount(spec, "/etc/passwd"));
        assert_null(find_mount(spec, "/etc/group"));

        json_t *tools = find_mount(spec, "/tools");
        assert_string_equal(json_string_value(json_object_get(tools, "source")), "/opt/tools");
        assert_non_null(find_mount(spec, "/proc"));
        assert_non_null(find_mount(spec, "/dev"));
}

static void test_linux(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *lx = json_object_get(spec, "linux"), *ns;
        size_t i;

        /* No uidMappings, no sysctl, no devices passed; the seccomp profile is
         * test_seccomp's. */
        const char *lkeys[] = { "namespaces", "resources", "cgroupsPath", "seccomp", NULL };
        assert_keys_exactly(lx, lkeys, "linux");
        /* The cgroup the driver made and limited, under this worker's group. */
        assert_string_equal(json_string_value(json_object_get(lx, "cgroupsPath")),
                            "/tentaflake-worker-coder-1/tfw-coder-1-cargo_test_1");

        /* Fresh namespaces only: a "path" would join an existing (host) namespace. */
        const char *want[] = { "pid", "ipc", "uts", "mount", "network" };
        json_t *nss = json_object_get(lx, "namespaces");
        assert_int_equal(json_array_size(nss), ELEMENTSOF(want));
        json_array_foreach(nss, i, ns) {
                const char *keys[] = { "type", NULL };
                assert_keys_exactly(ns, keys, "namespace");
                assert_string_equal(json_string_value(json_object_get(ns, "type")), want[i]);
        }

        json_t *res = json_object_get(lx, "resources");
        json_t *mem = json_object_get(res, "memory");
        assert_int_equal(get_int(mem, "limit"), 2LL << 30);
        assert_int_equal(get_int(mem, "swap"), 3LL << 30); /* OCI swap is memory+swap */
        assert_int_equal(get_int(json_object_get(res, "pids"), "limit"), 512);
        json_t *cpu = json_object_get(res, "cpu");
        assert_int_equal(get_int(cpu, "period"), 100000);
        assert_int_equal(get_int(cpu, "quota"), 150000); /* 1.5 CPUs */
        json_t *dev = json_array_get(json_object_get(res, "devices"), 0);
        assert_true(json_is_false(json_object_get(dev, "allow")));
        assert_string_equal(json_string_value(json_object_get(dev, "access")), "rwm");
}

/* The runc driver's spec (capsule/oci-spec.h, CapsuleKernelWalls; threat 23): the walls of the
 * host kernel on top of everything test_linux asserts. */
static void runc_fixture(Fixture *f, CapsuleKernelWalls *w, bool landlock) {
        fixture_init(f);
        f->config.driver = DRIVER_RUNC;
        *w = (CapsuleKernelWalls) {.landlock = landlock};
        snprintf(w->root_dir, sizeof(w->root_dir), "/run/tentaflake-worker-coder-1/runc-roots/c1");
        f->params.kernel = w;
}

static void assert_id_map(json_t *map, json_int_t job) {
        /* Root is the dedicated id that owns nothing, the job its own id; no other id, never 0. */
        assert_int_equal(json_array_size(map), 2);
        assert_int_equal(get_int(json_array_get(map, 0), "containerID"), 0);
        assert_int_equal(get_int(json_array_get(map, 0), "hostID"), CONFIG_CAPSULE_ROOT_ID);
        assert_int_equal(get_int(json_array_get(map, 1), "containerID"), job);
        assert_int_equal(get_int(json_array_get(map, 1), "hostID"), job);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(get_int(json_array_get(map, i), "size"), 1);
                assert_int_not_equal(get_int(json_array_get(map, i), "hostID"), 0);
        }
}

static bool strv_has(json_t *a, const char *s) {
        json_t *v;
        size_t i;
        json_array_foreach(a, i, v) if (streq(json_string_value(v), s)) return true;
        return false;
}

/* With network: runsc's init relays the connections (--egress), runc's passes their sockets to
 * the proxy (--egress-pass, capsule/protocol.h); without it, neither. */
static void test_egress_arg_per_engine(void **state) {
        (void) state;
        Fixture f;
        CapsuleKernelWalls w;
        char *allow[] = { (char *) "registry.npmjs.org:443", NULL };

        fixture_init(&f);
        f.config.network.allow = allow;
        f.config.network.n_allow = 1;
        _cleanup_json_ json_t *gv = build(&f);
        json_t *args = json_object_get(json_object_get(gv, "process"), "args");
        assert_true(strv_has(args, "--egress"));
        assert_false(strv_has(args, "--egress-pass"));

        runc_fixture(&f, &w, true);
        f.config.network.allow = allow;
        f.config.network.n_allow = 1;
        _cleanup_json_ json_t *rc = build(&f);
        args = json_object_get(json_object_get(rc, "process"), "args");
        assert_true(strv_has(args, "--egress-pass"));
        assert_false(strv_has(args, "--egress"));

        runc_fixture(&f, &w, true);
        _cleanup_json_ json_t *none = build(&f);
        args = json_object_get(json_object_get(none, "process"), "args");
        assert_false(strv_has(args, "--egress-pass"));
        assert_false(strv_has(args, "--egress"));
}

static void test_runc_walls(void **state) {
        (void) state;
        Fixture f;
        CapsuleKernelWalls w;
        runc_fixture(&f, &w, true);
        snprintf(w.listener_path, sizeof(w.listener_path), "/run/tentaflake-worker-coder-1/seccomp-listeners/0123.sock");
        f.params.work_dir = "/var/lib/tfw/store/lane-0/gen-1";
        f.params.snapshot_dir = NULL;
        _cleanup_json_ json_t *spec = build(&f);
        json_t *lx = json_object_get(spec, "linux");

        const char *lkeys[] = { "namespaces", "resources", "cgroupsPath", "seccomp", "uidMappings", "gidMappings",
                                "maskedPaths", "readonlyPaths", NULL };
        assert_keys_exactly(lx, lkeys, "linux");
        const char *want[] = { "user", "pid", "ipc", "uts", "mount", "network", "cgroup" };
        json_t *nss = json_object_get(lx, "namespaces"), *ns;
        size_t i;
        assert_int_equal(json_array_size(nss), ELEMENTSOF(want));
        json_array_foreach(nss, i, ns) {
                const char *keys[] = { "type", NULL };
                assert_keys_exactly(ns, keys, "namespace");
                assert_string_equal(json_string_value(json_object_get(ns, "type")), want[i]);
        }
        assert_id_map(json_object_get(lx, "uidMappings"), 10000);
        assert_id_map(json_object_get(lx, "gidMappings"), 10001);
        const char *masked[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sysrq-trigger",
                                 "/proc/kallsyms", "/sys/firmware", NULL };
        for (const char *const *m = masked; *m; m++)
                assert_true(strv_has(json_object_get(lx, "maskedPaths"), *m));
        assert_true(strv_has(json_object_get(lx, "readonlyPaths"), "/proc/sys"));
        assert_true(strv_has(json_object_get(lx, "readonlyPaths"), "/proc/sysrq-trigger"));
        /* The allowlist, as the layer's window needs it, notifying the driver's listener
         * (capsule/seccomp-notify.h); never runsc's profile. */
        _cleanup_json_ json_t *allow = capsule_seccomp_allowlist_json(true, true);
        assert_int_equal(json_object_set_new(allow, "listenerPath", json_string(w.listener_path)), 0);
        assert_true(json_equal(json_object_get(lx, "seccomp"), allow));
        /* The job's own pids limit (the host's cgroup counts its processes). */
        assert_int_equal(get_int(json_object_get(json_object_get(lx, "resources"), "pids"), "limit"), 512);
        /* ... and no RLIMIT_NPROC, which the kernel would ask first: the cgroup refuses the fork
         * and records it (the "pids" wall). */
        json_t *rl;
        json_array_foreach(json_object_get(json_object_get(spec, "process"), "rlimits"), i, rl)
                assert_string_not_equal(json_string_value(json_object_get(rl, "type")), "RLIMIT_NPROC");
        assert_int_equal(json_array_size(json_object_get(json_object_get(spec, "process"), "rlimits")), 2);

        /* The root: the driver's empty directory, read-only. */
        json_t *root = json_object_get(spec, "root");
        assert_string_equal(json_string_value(json_object_get(root, "path")), w.root_dir);
        assert_true(json_is_true(json_object_get(root, "readonly")));
        /* Init confines the job with Landlock: its first argument. */
        json_t *args = json_object_get(json_object_get(spec, "process"), "args");
        assert_string_equal(json_string_value(json_array_get(args, 0)), CAPSULE_INIT_PATH);
        assert_string_equal(json_string_value(json_array_get(args, 1)), "--landlock");
        assert_true(json_is_true(json_object_get(json_object_get(spec, "process"), "noNewPrivileges")));
        /* gVisor's /dev covers are not runc's: runc's /dev holds only its six devices. */
        json_t *m;
        json_array_foreach(json_object_get(spec, "mounts"), i, m) {
                const char *dest = json_string_value(json_object_get(m, "destination"));
                assert_false(streq(dest, CAPSULE_DEV_FUSE_PATH) || streq(dest, CAPSULE_DEV_NET_PATH));
        }
        /* A system mount is read-only with every mount below it ("rro": runc makes only the top of
         * an rbind read-only otherwise). */
        json_t *usr = find_mount(spec, "/usr");
        assert_non_null(usr);
        assert_true(strv_has(json_object_get(usr, "options"), "rbind"));
        assert_true(strv_has(json_object_get(usr, "options"), "rro"));
}

static void test_runc_without_landlock(void **state) {
        (void) state;
        Fixture f;
        CapsuleKernelWalls w;
        runc_fixture(&f, &w, false);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *args = json_object_get(json_object_get(spec, "process"), "args");
        assert_string_equal(json_string_value(json_array_get(args, 1)), "--");
        /* No listener given: the profile that notifies nothing, without a listenerPath. */
        _cleanup_json_ json_t *allow = capsule_seccomp_allowlist_json(false, false);
        assert_true(json_equal(json_object_get(json_object_get(spec, "linux"), "seccomp"), allow));
        /* An image root is never runc's. */
        json_t *out = NULL;
        TfwError e = {};
        f.config.rootfs = (char *) "/srv/image";
        assert_int_equal(capsule_spec_build(&f.params, &out, &e), -EINVAL);
        assert_null(out);
}

/* The rules of linux.seccomp that name syscall `name`, in their order. */
static size_t seccomp_rules_for(json_t *sc, const char *name, json_t **ret, size_t max) {
        json_t *rule, *n;
        size_t i, j, k = 0;
        json_array_foreach(json_object_get(sc, "syscalls"), i, rule) {
                json_array_foreach(json_object_get(rule, "names"), j, n) {
                        if (streq(json_string_value(n), name) && k < max)
                                ret[k++] = rule;
                }
        }
        return k;
}

static const char *rule_action(json_t *rule) {
        return json_string_value(json_object_get(rule, "action"));
}

/* Refused to the job, whatever the arguments (the list: Docker's default profile
 * refuses each of them to an unprivileged container, or allows none of them; with the syscalls
 * runsc 0.0~20240729 implements that Docker's allow-list leaves out). */
static const char *const must_refuse[] = {
        "unshare", "setns", "mount", "umount2", "pivot_root", "keyctl", "add_key", "request_key",
        "bpf", "ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "kexec_load",
        "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
        "reboot", "acct", "open_by_handle_at", "name_to_handle_at", "userfaultfd", "chroot",
        "sethostname", "setdomainname", "syslog", "iopl", "ioperm", "settimeofday",
        "clock_settime", "fsopen", "fsmount", "move_mount", "open_tree", "io_uring_setup",
        "kcmp", "vhangup", "quotactl", "lookup_dcookie", "fanotify_init", "mbind", "set_mempolicy",
        "get_mempolicy", "migrate_pages", "move_pages", "create_module", "afs_syscall",
        "io_uring_enter", "io_uring_register",
};

/* The profile a runsc capsule loads (capsule/seccomp-profile.h), in cold and warm specs. */
static void test_seccomp(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        f.params.warm = true;
        _cleanup_json_ json_t *warm = build(&f);
        json_t *sc = json_object_get(json_object_get(spec, "linux"), "seccomp");
        json_t *r[16];
        size_t n;

        assert_non_null(sc);
        /* A capsule started ahead runs the very same profile. */
        assert_true(json_equal(sc, json_object_get(json_object_get(warm, "linux"), "seccomp")));
        const char *keys[] = { "defaultAction", "architectures", "syscalls", NULL };
        assert_keys_exactly(sc, keys, "linux.seccomp");
        /* What is not named is allowed (capsule/seccomp-profile.c says why). */
        assert_string_equal(json_string_value(json_object_get(sc, "defaultAction")), "SCMP_ACT_ALLOW");

        /* Each refused name: exactly one rule, an unconditional ERRNO (EPERM); never TRACE,
         * which a tracer could let through. */
        for (size_t i = 0; i < ELEMENTSOF(must_refuse); i++) {
                n = seccomp_rules_for(sc, must_refuse[i], r, ELEMENTSOF(r));
                if (n != 1 || !streq(rule_action(r[0]), "SCMP_ACT_ERRNO") || json_object_get(r[0], "args"))
                        fail_msg("'%s' is not refused by one unconditional SCMP_ACT_ERRNO rule", must_refuse[i]);
        }

        /* clone: allowed only when no namespace flag is set (masked-equal 0 on the flags),
         * then refused. */
        n = seccomp_rules_for(sc, "clone", r, ELEMENTSOF(r));
        assert_int_equal(n, 2);
        assert_string_equal(rule_action(r[0]), "SCMP_ACT_ALLOW");
        json_t *args = json_object_get(r[0], "args");
        assert_int_equal(json_array_size(args), 1);
        json_t *a = json_array_get(args, 0);
        assert_int_equal(get_int(a, "index"), 0);
        assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
        assert_int_equal(get_int(a, "value"), 0x7E020000); /* NEWNS|CGROUP|UTS|IPC|USER|PID|NET */
        assert_int_equal(get_int(a, "valueTwo"), 0);
        assert_string_equal(rule_action(r[1]), "SCMP_ACT_ERRNO");
        assert_null(json_object_get(r[1], "args"));

        /* clone3: ENOSYS, so libc falls back to clone; never allowed. */
        n = seccomp_rules_for(sc, "clone3", r, ELEMENTSOF(r));
        assert_int_equal(n, 1);
        assert_string_equal(rule_action(r[0]), "SCMP_ACT_TRACE");

        /* personality: Docker's values only, then refused. */
        n = seccomp_rules_for(sc, "personality", r, ELEMENTSOF(r));
        assert_int_equal(n, 6);
        const int64_t personas[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };
        for (size_t i = 0; i < ELEMENTSOF(personas); i++) {
                assert_string_equal(rule_action(r[i]), "SCMP_ACT_ALLOW");
                a = json_array_get(json_object_get(r[i], "args"), 0);
                assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_EQ");
                assert_int_equal(get_int(a, "value"), personas[i]);
        }
        assert_string_equal(rule_action(r[5]), "SCMP_ACT_ERRNO");

        /* socket: anything but AF_VSOCK. */
        n = seccomp_rules_for(sc, "socket", r, ELEMENTSOF(r));
        assert_int_equal(n, 1);
        assert_string_equal(rule_action(r[0]), "SCMP_ACT_ERRNO");
        a = json_array_get(json_object_get(r[0], "args"), 0);
        assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_EQ");
        assert_int_equal(get_int(a, "value"), 40);

        /* mknod and mknodat: a character or a block device refused (masked-equal on S_IFMT of
         * the mode: argument 1, and 2 for mknodat); anything else falls to the default. */
        const struct { const char *name; int64_t index; } mk[] = { { "mknod", 1 }, { "mknodat", 2 } };
        for (size_t k = 0; k < ELEMENTSOF(mk); k++) {
                n = seccomp_rules_for(sc, mk[k].name, r, ELEMENTSOF(r));
                assert_int_equal(n, 2);
                const int64_t types[] = { 0020000 /* S_IFCHR */, 0060000 /* S_IFBLK */ };
                for (size_t t = 0; t < 2; t++) {
                        assert_string_equal(rule_action(r[t]), "SCMP_ACT_ERRNO");
                        a = json_array_get(json_object_get(r[t], "args"), 0);
                        assert_int_equal(get_int(a, "index"), mk[k].index);
                        assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
                        assert_int_equal(get_int(a, "value"), 0170000);
                        assert_int_equal(get_int(a, "valueTwo"), types[t]);
                }
        }

        /* What a build needs is named by no rule: the default allows it. */
        const char *needed[] = { "read", "write", "openat", "execve", "wait4", "fork", "vfork",
                                 "futex", "mmap", "rt_sigaction", "pipe2", "prlimit64", "prctl",
                                 "getrandom", "rseq", "seccomp" };
        for (size_t i = 0; i < ELEMENTSOF(needed); i++) {
                if (seccomp_rules_for(sc, needed[i], r, ELEMENTSOF(r)) != 0)
                        fail_msg("'%s' is named by a rule", needed[i]);
        }
        /* Only these actions; TRACE only for clone3. */
        json_t *rule;
        size_t i;
        json_array_foreach(json_object_get(sc, "syscalls"), i, rule) {
                const char *act = rule_action(rule);
                if (!streq(act, "SCMP_ACT_ALLOW") && !streq(act, "SCMP_ACT_ERRNO") && !streq(act, "SCMP_ACT_TRACE"))
                        fail_msg("unexpected action '%s'", act);
                if (streq(act, "SCMP_ACT_TRACE"))
                        assert_string_equal(json_string_value(json_array_get(json_object_get(rule, "names"), 0)),
                                            "clone3");
        }
}

/* gVisor's /dev has /dev/fuse and /dev/net/tun: both covered by an empty tmpfs that cannot be
 * written, read or entered, right after /dev itself. */
static void test_dev_covered(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *spec = build(&f);
        json_t *mounts = json_object_get(spec, "mounts");
        size_t dev = SIZE_MAX, i;
        json_t *m;
        json_array_foreach(mounts, i, m) {
                if (streq(json_string_value(json_object_get(m, "destination")), "/dev"))
                        dev = i;
        }
        assert_true(dev != SIZE_MAX);
        const char *covered[] = { "/dev/fuse", "/dev/net" };
        for (size_t k = 0; k < ELEMENTSOF(covered); k++) {
                m = json_array_get(mounts, dev + 1 + k);
                assert_string_equal(json_string_value(json_object_get(m, "destination")), covered[k]);
                assert_string_equal(json_string_value(json_object_get(m, "type")), "tmpfs");
                assert_true(has_option(m, "ro"));
                assert_true(has_option(m, "mode=0000"));
                assert_true(has_option(m, "nodev"));
                assert_true(has_option(m, "noexec"));
                assert_true(has_option(m, "nosuid"));
        }
}

static void test_passwd_group(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_free_ char *pw = NULL, *gr = NULL;

        assert_int_equal(capsule_passwd_text(&f.config, &pw), 0);
        assert_int_equal(capsule_group_text(&f.config, &gr), 0);
        assert_non_null(strstr(pw, "\ntentaflake:x:10000:10001:tentaflake job:/work:/bin/sh\n"));
        assert_non_null(strstr(pw, "nobody:x:65534:65534:"));
        assert_non_null(strstr(gr, "\ntentaflake:x:10001:\n"));
        assert_non_null(strstr(gr, "nogroup:x:65534:"));
        /* Nothing of the host's own files. */
        assert_null(strstr(pw, "daemon"));

        /* A job that runs as nobody (ZeroClaw) gets one entry for that id, not two. */
        f.config.container_uid = 65534;
        f.config.container_gid = 65534;
        free(pw);
        free(gr);
        pw = gr = NULL;
        assert_int_equal(capsule_passwd_text(&f.config, &pw), 0);
        assert_int_equal(capsule_group_text(&f.config, &gr), 0);
        assert_null(strstr(pw, "nobody"));
        assert_null(strstr(gr, "nogroup"));
        assert_non_null(strstr(pw, "tentaflake:x:65534:65534:"));
}

static void test_rejects_bad_params(void **state) {
        (void) state;
        Fixture f;
        json_t *spec = NULL;
        TfwError e = {};
        char *empty_argv[] = { NULL };

        fixture_init(&f);
        f.params.job_id = "../x";
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);
        assert_string_equal(e.code, "bad_capsule_spec");

        fixture_init(&f);
        f.params.argv = empty_argv;
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);

        fixture_init(&f);
        f.params.snapshot_dir = "relative/snap";
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);

        fixture_init(&f);
        f.params.init_path = "/usr/../tmp/init";
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);

        fixture_init(&f);
        f.params.cgroups_path = "relative/cg";
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);

        /* Added variables cannot replace the constant environment, nor come without '='. */
        char *env_path[] = { (char *) "PATH=/tmp/evil", NULL };
        char *env_bare[] = { (char *) "SECRET", NULL };
        char *env_job[] = { (char *) "TENTAFLAKE_JOB=other", NULL };
        char **bad_envs[] = { env_path, env_bare, env_job };
        for (size_t i = 0; i < ELEMENTSOF(bad_envs); i++) {
                fixture_init(&f);
                f.params.extra_env = bad_envs[i];
                assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);
        }
        char *many[CAPSULE_EXTRA_ENV_MAX + 2];
        for (size_t i = 0; i <= CAPSULE_EXTRA_ENV_MAX; i++)
                many[i] = (char *) "A=1";
        many[CAPSULE_EXTRA_ENV_MAX + 1] = NULL;
        fixture_init(&f);
        f.params.extra_env = many;
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);

        fixture_init(&f);
        f.config.container_uid = 0;
        assert_int_equal(capsule_spec_build(&f.params, &spec, &e), -EINVAL);
        assert_null(spec);
}

/* A caller's variables follow the constant environment, in their order. */
static void test_extra_env(void **state) {
        (void) state;
        Fixture f;
        char *extra[] = { (char *) "RUST_BACKTRACE=1", (char *) "MSG=a b=c", NULL };
        fixture_init(&f);
        f.params.extra_env = extra;
        _cleanup_json_ json_t *spec = build(&f);
        json_t *env = json_object_get(json_object_get(spec, "process"), "env");
        const char *want_env[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/work", "TMPDIR=/tmp", "LANG=C.UTF-8", "TENTAFLAKE_JOB=cargo_test_1",
                "RUST_BACKTRACE=1", "MSG=a b=c",
        };
        assert_int_equal(json_array_size(env), ELEMENTSOF(want_env));
        for (size_t i = 0; i < ELEMENTSOF(want_env); i++)
                assert_string_equal(json_string_value(json_array_get(env, i)), want_env[i]);
}

/* The validation plane (issue 13): CI=true and TENTAFLAKE_CHECK join the constant
 * environment before the policy's variables; --open-files and --file-size-mb are the
 * capsule's RLIMIT_NOFILE and RLIMIT_FSIZE. */
static void test_validation_env_and_rlimits(void **state) {
        (void) state;
        Fixture f;
        char *extra[] = { (char *) "RUST_BACKTRACE=1", NULL };
        fixture_init(&f);
        f.params.extra_env = extra;
        f.params.check = "unit tests";
        f.config.limits.open_files = 256;
        f.config.limits.file_size = 2 << 20;
        _cleanup_json_ json_t *spec = build(&f);
        json_t *proc = json_object_get(spec, "process");
        json_t *env = json_object_get(proc, "env");
        const char *want_env[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/work", "TMPDIR=/tmp", "LANG=C.UTF-8", "TENTAFLAKE_JOB=cargo_test_1",
                "CI=true", "TENTAFLAKE_CHECK=unit tests", "RUST_BACKTRACE=1",
        };
        assert_int_equal(json_array_size(env), ELEMENTSOF(want_env));
        for (size_t i = 0; i < ELEMENTSOF(want_env); i++)
                assert_string_equal(json_string_value(json_array_get(env, i)), want_env[i]);
        json_t *r;
        size_t i;
        int64_t nofile = -1, fsize = -1;
        json_array_foreach(json_object_get(proc, "rlimits"), i, r) {
                const char *t = json_string_value(json_object_get(r, "type"));
                if (streq(t, "RLIMIT_NOFILE"))
                        nofile = get_int(r, "hard");
                if (streq(t, "RLIMIT_FSIZE")) {
                        fsize = get_int(r, "hard");
                        assert_int_equal(get_int(r, "soft"), fsize);
                }
        }
        assert_int_equal(nofile, 256);
        assert_int_equal(fsize, 2 << 20);
}

static void assert_options(json_t *m, const char *const *opts) {
        for (; *opts; opts++)
                if (!has_option(m, *opts))
                        fail_msg("mount '%s' lacks option '%s'", json_string_value(json_object_get(m, "destination")), *opts);
}

/* A generation at /work: init alone starts as the sandbox's root with the layer's capabilities
 * (capsule/protocol.h), told the ids it drops to; /work and the cache's lower layers are
 * read-only binds, the layer a tmpfs of limits.workspace_tmpfs; the profile leaves init mount
 * and nothing else more than without the layer. */
static void test_layer(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f);
        _cleanup_json_ json_t *plain = build(&f);
        char *paths[] = { (char *) "build", (char *) "node_modules/.cache", NULL };
        f.params.snapshot_dir = NULL;
        f.params.work_dir = "/store/lane-0/ro";
        f.params.cache_paths = paths;
        f.params.cache_dir = "/store/cache/ro";
        _cleanup_json_ json_t *spec = build(&f);
        f.params.warm = true;
        _cleanup_json_ json_t *warm = build(&f);
        json_t *proc = json_object_get(spec, "process");

        json_t *user = json_object_get(proc, "user");
        assert_int_equal(get_int(user, "uid"), 0);
        assert_int_equal(get_int(user, "gid"), 0);
        assert_int_equal(json_array_size(json_object_get(user, "additionalGids")), 0);
        const char *want[] = CAPSULE_LAYER_CAPS;
        json_t *caps = json_object_get(proc, "capabilities");
        const char *held[] = { "bounding", "effective", "permitted" };
        for (size_t i = 0; i < ELEMENTSOF(held); i++) {
                json_t *set = json_object_get(caps, held[i]);
                assert_int_equal(json_array_size(set), ELEMENTSOF(want) - 1);
                for (size_t k = 0; want[k]; k++)
                        assert_string_equal(json_string_value(json_array_get(set, k)), want[k]);
        }
        assert_int_equal(json_array_size(json_object_get(caps, "inheritable")), 0);
        assert_int_equal(json_array_size(json_object_get(caps, "ambient")), 0);
        assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));

        json_t *args = json_object_get(proc, "args");
        assert_string_equal(json_string_value(json_array_get(args, 0)), CAPSULE_INIT_PATH);
        assert_string_equal(json_string_value(json_array_get(args, 1)), CAPSULE_LAYER_ARG "10000:10001");
        assert_string_equal(json_string_value(json_array_get(args, 2)), "--");
        assert_string_equal(json_string_value(json_array_get(args, 3)), "cargo");
        json_t *wargs = json_object_get(json_object_get(warm, "process"), "args");
        assert_int_equal(json_array_size(wargs), 3);
        assert_string_equal(json_string_value(json_array_get(wargs, 1)), CAPSULE_LAYER_ARG "10000:10001");
        assert_string_equal(json_string_value(json_array_get(wargs, 2)), CAPSULE_WARM_ARG);
        /* Without a generation nothing of it: the job's ids, no capability, no argument. */
        json_t *pargs = json_object_get(json_object_get(plain, "process"), "args");
        assert_string_equal(json_string_value(json_array_get(pargs, 1)), "--");

        json_t *work = find_mount(spec, CAPSULE_WORK_PATH);
        assert_non_null(work);
        assert_string_equal(json_string_value(json_object_get(work, "source")), "/store/lane-0/ro");
        assert_options(work, (const char *const[]){ "ro", "nosuid", "nodev", NULL });
        /* The cache's versions, one read-only bind; the overlays on the paths are init's. */
        json_t *versions = find_mount(spec, CAPSULE_CACHE_LOWER_PATH);
        assert_non_null(versions);
        assert_string_equal(json_string_value(json_object_get(versions, "source")), "/store/cache/ro");
        assert_options(versions, (const char *const[]){ "ro", "nosuid", "nodev", NULL });
        for (size_t i = 0; paths[i]; i++) {
                char old[64];
                snprintf(old, sizeof(old), CAPSULE_WORK_PATH "/%s", paths[i]);
                assert_null(find_mount(spec, old));
        }
        json_t *layer = find_mount(spec, CAPSULE_LAYER_PATH);
        assert_non_null(layer);
        assert_string_equal(json_string_value(json_object_get(layer, "type")), "tmpfs");
        assert_options(layer, (const char *const[]){ "size=2147483648", "mode=0700", "nosuid", "nodev", NULL });
        assert_null(find_mount(plain, CAPSULE_LAYER_PATH));

        /* The profile: "mount" and "umount2" left to init (which refuses them again), nothing
         * else changed. */
        json_t *sc = json_object_get(json_object_get(spec, "linux"), "seccomp");
        json_t *psc = json_object_get(json_object_get(plain, "linux"), "seccomp");
        json_t *r[4];
        static const char *const left[] = CAPSULE_SECCOMP_LAYER_CALLS;
        assert_int_equal(ELEMENTSOF(left), 2);
        for (size_t i = 0; i < ELEMENTSOF(left); i++) {
                assert_int_equal(seccomp_rules_for(sc, left[i], r, 4), 0);
                assert_int_equal(seccomp_rules_for(psc, left[i], r, 4), 1);
        }
        for (size_t i = 0; i < ELEMENTSOF(must_refuse); i++)
                if (!streq(must_refuse[i], left[0]) && !streq(must_refuse[i], left[1]))
                        assert_int_equal(seccomp_rules_for(sc, must_refuse[i], r, 4),
                                         seccomp_rules_for(psc, must_refuse[i], r, 4));
}

static void test_host_pids(void **state) {
        (void) state;
        /* Generous for the ptrace platform's host threads, but finite and monotonic. */
        assert_true(capsule_host_pids_limit(512) >= 512 * 9 + 64);
        assert_true(capsule_host_pids_limit(1) >= 64);
        assert_true(capsule_host_pids_limit(UINT64_MAX) <= (1ULL << 22));
        assert_true(capsule_host_pids_limit(1000) > capsule_host_pids_limit(999));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_top_level),
                cmocka_unit_test(test_process_user_and_caps),
                cmocka_unit_test(test_process_args_env),
                cmocka_unit_test(test_warm_spec),
                cmocka_unit_test(test_rlimits),
                cmocka_unit_test(test_root),
                cmocka_unit_test(test_mounts),
                cmocka_unit_test(test_linux),
                cmocka_unit_test(test_runc_walls),
                cmocka_unit_test(test_egress_arg_per_engine),
                cmocka_unit_test(test_runc_without_landlock),
                cmocka_unit_test(test_seccomp),
                cmocka_unit_test(test_dev_covered),
                cmocka_unit_test(test_passwd_group),
                cmocka_unit_test(test_rejects_bad_params),
                cmocka_unit_test(test_extra_env),
                cmocka_unit_test(test_host_pids),
                cmocka_unit_test(test_layer),
                cmocka_unit_test(test_validation_env_and_rlimits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
