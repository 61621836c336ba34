/* SPDX-License-Identifier: MIT */
/* libcurl, loaded by serve (http_global_init) only: see common/dlopen-util.h. */
#pragma once

#include <curl/curl.h>

#include "common/dlopen-util.h"

extern DLSYM_PROTOTYPE(curl_easy_cleanup);
extern DLSYM_PROTOTYPE(curl_easy_getinfo);
extern DLSYM_PROTOTYPE(curl_easy_init);
extern DLSYM_PROTOTYPE(curl_easy_perform);
extern DLSYM_PROTOTYPE(curl_easy_reset);
extern DLSYM_PROTOTYPE(curl_easy_setopt);
extern DLSYM_PROTOTYPE(curl_easy_strerror);
extern DLSYM_PROTOTYPE(curl_global_init);
extern DLSYM_PROTOTYPE(curl_slist_append);
extern DLSYM_PROTOTYPE(curl_slist_free_all);

/* Load libcurl (TFW_LIBCURL) and every sym_ above; 0 when already loaded. */
int dlopen_libcurl(TfwError *e);
