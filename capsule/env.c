/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "capsule/env.h"

bool capsule_env_name_is_valid(const char *s, size_t n) {
        if (n == 0 || n > 128 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_'))
                        return false;
        return true;
}

bool capsule_env_name_is_reserved(const char *s, size_t n) {
        /* TERM and container: podman unsets them after every --env (capsule/docker.c). */
        /* The proxy variables: the worker sets them when the job has egress (capsule/oci-spec.h),
         * and a policy may not point a tool elsewhere nor take one away. */
        static const char *const reserved[] = {"PATH", "HOME", "TMPDIR", "LANG", "CI", "TENTAFLAKE_JOB",
                                               "TENTAFLAKE_CHECK", "TERM", "container", "http_proxy",
                                               "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                               "all_proxy", "NO_PROXY", "no_proxy", NULL};
        for (const char *const *r = reserved; *r; r++)
                if (strlen(*r) == n && memcmp(s, *r, n) == 0)
                        return true;
        return false;
}

bool capsule_extra_env_is_valid(char *const *env) {
        size_t count = 0, bytes = 0;
        for (char *const *v = env; v && *v; v++) {
                const char *eq = strchr(*v, '=');
                if (!eq || ++count > CAPSULE_EXTRA_ENV_MAX)
                        return false;
                size_t n = (size_t) (eq - *v);
                if (!capsule_env_name_is_valid(*v, n) || capsule_env_name_is_reserved(*v, n))
                        return false;
                bytes += strlen(*v) + 1;
                if (bytes > CAPSULE_EXTRA_ENV_BYTES)
                        return false;
        }
        return true;
}
