/* SPDX-License-Identifier: MIT */
#include "validation/curl-dl.h"

static void *curl_dl;

DLSYM_PROTOTYPE(curl_easy_cleanup) = NULL;
DLSYM_PROTOTYPE(curl_easy_getinfo) = NULL;
DLSYM_PROTOTYPE(curl_easy_init) = NULL;
DLSYM_PROTOTYPE(curl_easy_perform) = NULL;
DLSYM_PROTOTYPE(curl_easy_reset) = NULL;
DLSYM_PROTOTYPE(curl_easy_setopt) = NULL;
DLSYM_PROTOTYPE(curl_easy_strerror) = NULL;
DLSYM_PROTOTYPE(curl_global_init) = NULL;
DLSYM_PROTOTYPE(curl_slist_append) = NULL;
DLSYM_PROTOTYPE(curl_slist_free_all) = NULL;

int dlopen_libcurl(TfwError *e) {
        return dlopen_many_sym(&curl_dl, TFW_LIBCURL, e,
                               DLSYM_ARG(curl_easy_cleanup),
                               DLSYM_ARG(curl_easy_getinfo),
                               DLSYM_ARG(curl_easy_init),
                               DLSYM_ARG(curl_easy_perform),
                               DLSYM_ARG(curl_easy_reset),
                               DLSYM_ARG(curl_easy_setopt),
                               DLSYM_ARG(curl_easy_strerror),
                               DLSYM_ARG(curl_global_init),
                               DLSYM_ARG(curl_slist_append),
                               DLSYM_ARG(curl_slist_free_all));
}
