/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/bundle.h"
#include "capsule/etc-files.h"
#include "capsule/host-zone.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"

#define RUNSC_LOG_TAIL (64 * 1024)

static void bundle_free(CapsuleBundle *b) {
        if (!b)
                return;
        safe_close(b->dir_fd);
        safe_close(b->scratch_fd);
        free(b->name);
        free(b->path);
        free(b->log_path);
        free(b);
}

static int write_new_file(int dir_fd, const char *name, const char *data, mode_t mode) {
        _cleanup_close_ int fd = openat(dir_fd, name,
                                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, data, strlen(data));
        if (r < 0)
                return r;
        /* The umask must not decide what the job can read. */
        if (fchmod(fd, mode) < 0)
                return -errno;
        return 0;
}

/* The empty root: nothing but its etc (capsule/etc-files.h), nothing writable. The host's
 * zone is read here, at each build, so a capsule follows a change of the host's. */
static int make_root(int dir_fd, const char *pw, const char *gr) {
        _cleanup_(capsule_zone_done) CapsuleZone zone = {};
        int r;

        _cleanup_close_ int host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host_root < 0)
                return -errno;
        r = capsule_zone_read(host_root, &zone);
        if (r < 0)
                return r;
        if (mkdirat(dir_fd, "root", 0755) < 0)
                return -errno;
        _cleanup_close_ int root = open_dir_at(dir_fd, "root");
        if (root < 0)
                return root;
        if (mkdirat(root, "etc", 0755) < 0)
                return -errno;
        _cleanup_close_ int etc = open_dir_at(root, "etc");
        if (etc < 0)
                return etc;
        r = capsule_etc_write(etc, pw, gr, &zone);
        if (r < 0)
                return r;
        if (fchmod(etc, 0555) < 0 || fchmod(root, 0555) < 0)
                return -errno;
        return 0;
}

int capsule_bundle_create(int scratch_fd, const char *scratch_path, const char *container_id,
                          const CapsuleSpecParams *params, CapsuleBundle **ret, TfwError *e) {
        _cleanup_free_ char *root = NULL, *passwd = NULL, *group = NULL, *pw_text = NULL,
                           *gr_text = NULL, *text = NULL;
        _cleanup_json_ json_t *spec = NULL;
        CapsuleSpecParams p = *params;
        CapsuleBundle *b;
        int r;

        if (!filename_is_valid(container_id) || !path_is_absolute_normalized(scratch_path))
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid bundle location");
        b = calloc(1, sizeof(*b));
        if (!b)
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        b->dir_fd = -EBADF;
        b->scratch_fd = fcntl(scratch_fd, F_DUPFD_CLOEXEC, 3);
        b->name = strdup(container_id);
        if (b->scratch_fd < 0 || !b->name ||
            asprintf(&b->path, "%s/%s", scratch_path, container_id) < 0 ||
            asprintf(&b->log_path, "%s/runsc.log", b->path) < 0 ||
            asprintf(&root, "%s/root", b->path) < 0 ||
            asprintf(&passwd, "%s/passwd", b->path) < 0 ||
            asprintf(&group, "%s/group", b->path) < 0) {
                bundle_free(b);
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        }
        if (mkdirat(scratch_fd, container_id, 0700) < 0) {
                r = tfw_error(e, errno, "bundle_failed", "bundle '%s': %s", b->path,
                              strerror(errno));
                bundle_free(b);
                return r;
        }
        b->dir_fd = open_dir_at(scratch_fd, container_id);
        if (b->dir_fd < 0) {
                r = tfw_error(e, -b->dir_fd, "bundle_failed", "bundle '%s': %s", b->path,
                              strerror(-b->dir_fd));
                goto fail;
        }

        p.root_dir = root;
        p.passwd_path = passwd;
        p.group_path = group;
        r = capsule_spec_build(&p, &spec, e);
        if (r < 0)
                goto fail;
        r = capsule_passwd_text(p.config, &pw_text);
        if (r >= 0)
                r = capsule_group_text(p.config, &gr_text);
        text = json_dumps(spec, JSON_INDENT(1));
        if (r < 0 || !text) {
                r = tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
                goto fail;
        }
        if ((r = write_new_file(b->dir_fd, "config.json", text, 0600)) < 0 ||
            (r = write_new_file(b->dir_fd, "passwd", pw_text, 0644)) < 0 ||
            (r = write_new_file(b->dir_fd, "group", gr_text, 0644)) < 0 ||
            (!p.config->rootfs && (r = make_root(b->dir_fd, pw_text, gr_text)) < 0)) {
                r = tfw_error(e, -r, "bundle_failed", "bundle '%s': %s", b->path, strerror(-r));
                goto fail;
        }
        *ret = b;
        return 0;
fail:
        (void) capsule_bundle_remove(b);
        return r;
}

void capsule_bundle_runsc_error(const CapsuleBundle *b, char *buf, size_t n) {
        _cleanup_close_ int fd = openat(b->dir_fd, "runsc.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char tail[RUNSC_LOG_TAIL + 1];
        struct stat st;
        ssize_t k;

        buf[0] = 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        off_t start = st.st_size > RUNSC_LOG_TAIL ? st.st_size - RUNSC_LOG_TAIL : 0;
        k = pread(fd, tail, RUNSC_LOG_TAIL, start);
        if (k <= 0)
                return;
        tail[k] = 0;
        /* runsc logs JSON objects ({"msg":"...","level":"error",...}) or text lines; take
         * the last message. */
        const char *msg = NULL, *end = NULL;
        for (const char *p = tail; (p = strstr(p, "\"msg\":\"")); p++) {
                msg = p + 7;
                end = msg;
                while (*end && *end != '"')
                        end += (end[0] == '\\' && end[1]) ? 2 : 1;
        }
        if (!msg) {
                while (k > 0 && (tail[k - 1] == '\n' || tail[k - 1] == '\r'))
                        tail[--k] = 0;
                const char *nl = strrchr(tail, '\n');
                msg = nl ? nl + 1 : tail;
                end = tail + k;
        }
        size_t len = MIN((size_t) (end - msg), n - 1);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) msg[i];
                buf[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char) c;
        }
        buf[len] = 0;
}

int capsule_bundle_remove(CapsuleBundle *b) {
        int r = 0;
        if (!b)
                return 0;
        if (b->scratch_fd >= 0 && b->name) {
                /* The root and its etc are read-only even for their owner; a worker without
                 * CAP_DAC_OVERRIDE could not empty them otherwise. */
                _cleanup_close_ int root = open_dir_at(b->dir_fd, "root");
                _cleanup_close_ int etc = root >= 0 ? open_dir_at(root, "etc") : -EBADF;
                if (etc >= 0 && fchmod(etc, 0755) < 0)
                        r = -errno;
                if (root >= 0 && fchmod(root, 0755) < 0)
                        r = -errno;
                b->dir_fd = safe_close(b->dir_fd);
                int k = rm_rf_at(b->scratch_fd, b->name);
                if (k < 0)
                        r = k;
        }
        bundle_free(b);
        return r;
}
