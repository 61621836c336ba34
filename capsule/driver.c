/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/driver.h"
#include "common/macro.h"

extern const CapsuleDriverOps capsule_driver_runsc, capsule_driver_docker, capsule_driver_podman, capsule_driver_runc;

static const CapsuleDriverOps *const driver_ops[_DRIVER_MAX] = {
        [DRIVER_RUNSC] = &capsule_driver_runsc,
        [DRIVER_DOCKER] = &capsule_driver_docker,
        [DRIVER_PODMAN] = &capsule_driver_podman,
        [DRIVER_RUNC] = &capsule_driver_runc,
};

const CapsuleDriverOps *capsule_driver_ops(RuntimeDriver kind) {
        return (unsigned) kind < _DRIVER_MAX ? driver_ops[kind] : NULL;
}

int capsule_driver_init(CapsuleDriver *d, const Config *config, const char *runsc_root, const char *engine_runtime,
                        TfwError *e) {
        CapsuleDriver n = {.config = config};
        int r;

        if ((unsigned) config->driver >= _DRIVER_MAX || !driver_ops[config->driver])
                return tfw_error(e, EINVAL, "runtime_unavailable", "unknown capsule driver");
        n.ops = driver_ops[config->driver];
        r = n.ops->init(&n, runsc_root, engine_runtime, e);
        if (r < 0)
                return r;
        *d = n;
        return 0;
}

void capsule_driver_hold(CapsuleDriver *d, int fd) {
        if (d->ops && d->ops->hold)
                d->ops->hold(d, fd);
}

void capsule_driver_done(CapsuleDriver *d) {
        if (d && d->ops)
                d->ops->done(d);
        if (d)
                d->ops = NULL;
}

void capsule_driver_label(const CapsuleDriver *d, char *buf, size_t size) {
        d->ops->label(d, buf, size);
}

json_t *capsule_driver_isolation(const CapsuleDriver *d) {
        json_t *walls = json_array();
        for (const char *const *w = d->ops->walls; walls && w && *w; w++)
                if (json_array_append_new(walls, json_string(*w)) < 0)
                        json_decref(walls), walls = NULL;
        if (walls && d->ops->confines_writes && d->ops->confines_writes(d) &&
            json_array_append_new(walls, json_string("landlock")) < 0)
                json_decref(walls), walls = NULL;
        if (!walls)
                return NULL;
        return json_pack("{s:s, s:s, s:o}", "engine", d->ops->name, "kernel", d->ops->kernel, "walls", walls);
}

bool capsule_check_runtime_binary(RuntimeDriver kind, const char *bin, const char *config_key, usec_t timeout,
                                  CapsuleCheckReport report, void *userdata) {
        _cleanup_free_ char *out = NULL;
        char detail[1400];
        struct stat st;
        int status, r;

        if (stat(bin, &st) < 0 || !S_ISREG(st.st_mode) || access(bin, X_OK) < 0) {
                snprintf(detail, sizeof(detail), "%s '%s' is missing or not executable%s%s%s", driver_to_string(kind),
                         bin, config_key ? " (" : "", config_key ? config_key : "", config_key ? ")" : "");
                report(userdata, "runtime", false, detail);
                return false;
        }
        /* engine_command runs "BINARY ARGS" bounded, with an environment of PATH only and stdout
         * captured; a stand-in Engine names the binary. */
        Engine tool = {.driver = kind, .binary = (char *) bin};
        const char *args[] = {"--version", NULL};
        r = engine_command(&tool, args, timeout, &status, &out);
        if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out || !out[0]) {
                snprintf(detail, sizeof(detail), "'%s --version' failed%s%s", bin, r < 0 ? ": " : "",
                         r < 0 ? strerror(-r) : "");
                report(userdata, "runtime", false, detail);
                return false;
        }
        snprintf(detail, sizeof(detail), "%s: %.*s", bin, (int) strcspn(out, "\n"), out);
        report(userdata, "runtime", true, detail);
        return true;
}
