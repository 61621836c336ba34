/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/etc-files.h"
#include "capsule/oci-spec.h"
#include "common/fd-util.h"
#include "common/macro.h"

static int write_new(int dir_fd, const char *name, const void *data, size_t size) {
        _cleanup_close_ int fd = openat(dir_fd, name,
                                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, data, size);
        if (r < 0)
                return r;
        /* The umask must not decide what the job can read. */
        return fchmod(fd, 0644) < 0 ? -errno : 0;
}

int capsule_etc_write(int etc_fd, const char *passwd, const char *group, const CapsuleZone *zone) {
        const char *hosts = CAPSULE_ETC_HOSTS, *nsswitch = CAPSULE_ETC_NSSWITCH,
                   *host_conf = CAPSULE_ETC_HOST_CONF;
        char timezone[CAPSULE_ZONE_NAME_MAX + 2];
        int r;

        if ((r = write_new(etc_fd, "passwd", passwd, strlen(passwd))) < 0 ||
            (r = write_new(etc_fd, "group", group, strlen(group))) < 0 ||
            (r = write_new(etc_fd, "hosts", hosts, strlen(hosts))) < 0 ||
            (r = write_new(etc_fd, "nsswitch.conf", nsswitch, strlen(nsswitch))) < 0 ||
            (r = write_new(etc_fd, "host.conf", host_conf, strlen(host_conf))) < 0 ||
            (r = write_new(etc_fd, "localtime", zone->tzif, zone->size)) < 0)
                return r;
        if (!zone->name[0])
                return 0;
        size_t n = strlen(zone->name);
        memcpy(timezone, zone->name, n);
        timezone[n] = '\n';
        return write_new(etc_fd, "timezone", timezone, n + 1);
}
