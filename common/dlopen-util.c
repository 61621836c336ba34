/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>

#include "common/dlopen-util.h"

#define DLSYM_MAX 64

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

int dlopen_many_sym_sentinel(void **dlp, const char *filename, TfwError *e, ...) {
        void **slots[DLSYM_MAX];
        void *values[DLSYM_MAX];
        size_t n = 0;
        int r = 0;
        va_list ap;

        if (!filename || filename[0] != '/')
                return tfw_error(e, EINVAL, "internal", "library '%s' is not an absolute path",
                                 filename ? filename : "");
        /* Loaded already: no lock (a child forked while another thread held it would wait
         * for ever). */
        if (__atomic_load_n(dlp, __ATOMIC_ACQUIRE))
                return 0;
        pthread_mutex_lock(&dl_lock);
        if (*dlp)
                goto out;
        /* RTLD_NOW: every symbol is bound before the first call, as -z now does for the rest. */
        void *dl = dlopen(filename, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                const char *m = dlerror();
                r = tfw_error(e, EOPNOTSUPP, "internal", "cannot load '%s': %s", filename, m ? m : "unknown error");
                goto out;
        }
        va_start(ap, e);
        for (;;) {
                void **slot = va_arg(ap, void **);
                if (!slot)
                        break;
                const char *name = va_arg(ap, const char *);
                if (n >= DLSYM_MAX) {
                        r = tfw_error(e, E2BIG, "internal", "'%s': more than %d symbols asked for", filename, DLSYM_MAX);
                        break;
                }
                (void) dlerror();
                void *v = dlsym(dl, name);
                if (!v) {
                        const char *m = dlerror();
                        r = tfw_error(e, EOPNOTSUPP, "internal", "'%s' lacks symbol '%s': %s", filename, name,
                                      m ? m : "null");
                        break;
                }
                slots[n] = slot;
                values[n++] = v;
        }
        va_end(ap);
        if (r < 0) {
                (void) dlclose(dl);
                goto out;
        }
        for (size_t i = 0; i < n; i++)
                *slots[i] = values[i];
        __atomic_store_n(dlp, dl, __ATOMIC_RELEASE); /* after the symbols: a reader of *dlp sees them */
out:
        pthread_mutex_unlock(&dl_lock);
        return r;
}
