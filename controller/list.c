/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/walls.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "common/shell-word.h"
#include "common/term-escape.h"
#include "common/time-util.h"
#include "controller/list.h"
#include "controller/request.h"
#include "controller/status.h"
#include "parser/request.h"

#define ID_WIDTH 29 /* the ids submit makes */

/* A word as one line a terminal shows as it is (common/term-escape.h). */
static char *word_printable(const char *s) {
        size_t n = strlen(s), size = 4 * n + 1;
        char *o = malloc(size);
        return o ? (char *) term_escape(s, n, TERM_ESCAPE_LINE, o, size) : NULL;
}

const char *controller_command_short(const json_t *argv, char *buf, size_t size) {
        size_t i, len = 0;
        json_t *a;
        bool cut = false;

        snprintf(buf, size, "-");
        if (!json_is_array(argv) || json_array_size(argv) == 0 || size < 5)
                return buf;
        json_array_foreach(argv, i, a)
                if (!json_is_string(a))
                        return buf;
        buf[0] = 0;
        json_array_foreach(argv, i, a) {
                _cleanup_free_ char *p = word_printable(json_string_value(a));
                _cleanup_free_ char *w = p ? shell_word(p) : NULL;
                if (!w) {
                        cut = true;
                        break;
                }
                size_t need = strlen(w) + (i ? 1 : 0);
                if (len + need >= size) {
                        /* What fits of this word, cut at the start of a character. */
                        size_t room = size - 1 - len;
                        if (i && room > 0) {
                                buf[len++] = ' ';
                                room--;
                        }
                        size_t k = MIN(room, strlen(w));
                        while (k > 0 && ((unsigned char) w[k] & 0xc0) == 0x80)
                                k--;
                        memcpy(buf + len, w, k);
                        len += k;
                        buf[len] = 0;
                        cut = true;
                        break;
                }
                if (i)
                        buf[len++] = ' ';
                memcpy(buf + len, w, strlen(w) + 1);
                len += strlen(w);
        }
        if (cut) {
                /* Room for "...": back off to a character's start. */
                size_t at = MIN(len, size - 4);
                while (at > 0 && ((unsigned char) buf[at] & 0xc0) == 0x80)
                        at--;
                memcpy(buf + at, "...", 4);
        }
        return buf;
}

static const char *jstr(const json_t *o, const char *k) {
        return json_string_value(json_object_get(o, k));
}

static int cmp_since_asc(const void *a, const void *b) {
        const char *x = jstr(*(json_t *const *) a, "since"), *y = jstr(*(json_t *const *) b, "since");
        return strcmp(x ? x : "", y ? y : "");
}

static int cmp_finished_desc(const void *a, const void *b) {
        const char *x = jstr(*(json_t *const *) a, "finished_at"), *y = jstr(*(json_t *const *) b, "finished_at");
        /* RFC 3339 UTC stamps sort as strings; a result without one goes last. */
        return strcmp(y ? y : "", x ? x : "");
}

/* A growing array of owned objects, sorted at the end. */
typedef struct Rows {
        json_t **v;
        size_t n, cap;
} Rows;

static int rows_add(Rows *r, json_t *row) {
        if (!row)
                return -ENOMEM;
        if (r->n == r->cap) {
                size_t nc = r->cap ? r->cap * 2 : 64;
                json_t **nv = realloc(r->v, nc * sizeof(*nv));
                if (!nv) {
                        json_decref(row);
                        return -ENOMEM;
                }
                r->v = nv;
                r->cap = nc;
        }
        r->v[r->n++] = row;
        return 0;
}

/* Into arr (taking the rows), sorted by cmp, at most max; the rest counted in *ret_more. */
static void rows_take(Rows *r, int (*cmp)(const void *, const void *), size_t max, json_t *arr, size_t *ret_more) {
        if (r->n > 1)
                qsort(r->v, r->n, sizeof(*r->v), cmp);
        for (size_t i = 0; i < r->n; i++) {
                if (i < max)
                        json_array_append(arr, r->v[i]);
                json_decref(r->v[i]);
        }
        if (ret_more)
                *ret_more = r->n > max ? r->n - max : 0;
        free(r->v);
        *r = (Rows){};
}

static void rows_free(Rows *r) {
        for (size_t i = 0; i < r->n; i++)
                json_decref(r->v[i]);
        free(r->v);
        *r = (Rows){};
}

/* The inbox's requests not taken yet; names no request can have are counted in *ret_other. */
static int list_inbox(const ControllerSite *s, Rows *rows, size_t *ret_other) {
        _cleanup_closedir_ DIR *d = opendir_fd(s->inbox_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                struct stat st;
                char id[REQUEST_ID_MAX + 1], ts[RFC3339_MAX], cmd[CONTROLLER_COMMAND_SHORT + 1];
                /* Dot-files are requests being written; a cancel is no request. */
                if (de->d_name[0] == '.' || (len > 7 && streq(de->d_name + len - 7, ".cancel")))
                        continue;
                bool named = len > 5 && len - 5 <= REQUEST_ID_MAX && streq(de->d_name + len - 5, ".json");
                if (named)
                        snprintf(id, sizeof(id), "%.*s", (int) (len - 5), de->d_name);
                if (!named || !request_id_is_valid(id) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode)) {
                        (*ret_other)++;
                        continue;
                }
                if (rows->n >= CONTROLLER_LIST_ACTIVE_MAX)
                        continue;
                _cleanup_(json_decrefp) json_t *req = NULL;
                (void) controller_load_json_at(dirfd(d), de->d_name, s->policy.max_request_bytes, &req);
                const char *cls = jstr(req, "action_class");
                usec_t mtime = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st.st_mtim.tv_nsec / 1000;
                int r = rows_add(rows, json_pack("{s:s, s:s, s:s, s:s?, s:s}", "id", id, "state", "inbox", "since",
                                                 format_rfc3339(mtime, ts), "action_class",
                                                 req ? (cls ? cls : CONTROLLER_DEFAULT_CLASS) : NULL, "command",
                                                 controller_command_short(json_object_get(req, "argv"), cmd, sizeof(cmd))));
                if (r < 0)
                        return r;
        }
        return 0;
}

static json_t *recent_row(const char *id, const json_t *res) {
        char cmd[CONTROLLER_COMMAND_SHORT + 1];
        json_t *walls = json_object_get(res, "walls");
        return json_pack("{s:s, s:o, s:O, s:O, s:O, s:O, s:s, s:O, s:O}", "id", id, "walls",
                         json_is_array(walls) ? json_incref(walls) : json_array(), "status",
                         json_object_get(res, "status") ?: json_null(), "exit_code",
                         json_object_get(res, "exit_code") ?: json_null(), "signal",
                         json_object_get(res, "signal") ?: json_null(), "action_class",
                         json_object_get(res, "action_class") ?: json_null(), "command",
                         controller_command_short(json_object_get(res, "argv"), cmd, sizeof(cmd)), "submitted_at",
                         json_object_get(res, "submitted_at") ?: json_null(), "finished_at",
                         json_object_get(res, "finished_at") ?: json_null());
}

/* The results directory: state files (active) and result directories (recent). */
static int list_results(int results_fd, Rows *active, Rows *recent) {
        static const char suffix[] = ".state.json";
        _cleanup_closedir_ DIR *d = opendir_fd(results_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                char id[REQUEST_ID_MAX + 1], path[REQUEST_ID_MAX + sizeof(suffix)];
                size_t n = strlen(de->d_name), ns = strlen(suffix);
                bool state_file = n > ns && streq(de->d_name + n - ns, suffix);
                size_t idlen = state_file ? n - ns : n;
                int r = 0;

                if (de->d_name[0] == '.' || idlen > REQUEST_ID_MAX)
                        continue;
                snprintf(id, sizeof(id), "%.*s", (int) idlen, de->d_name);
                if (!request_id_is_valid(id))
                        continue;
                if (state_file && active->n < CONTROLLER_LIST_ACTIVE_MAX) {
                        _cleanup_(json_decrefp) json_t *j = NULL;
                        snprintf(path, sizeof(path), "%s%s", id, suffix);
                        const char *st;
                        /* A state file beside a result is a moment of the publication: the
                         * result counts. */
                        snprintf(path + idlen, sizeof(path) - idlen, "/result.json");
                        if (faccessat(results_fd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                                continue;
                        snprintf(path + idlen, sizeof(path) - idlen, "%s", suffix);
                        char cmd[CONTROLLER_COMMAND_SHORT + 1];
                        if (controller_load_json_at(results_fd, path, CONTROLLER_STATE_MAX_BYTES, &j) < 0 ||
                            !(st = jstr(j, "state")) ||
                            !(streq(st, "pending") || streq(st, "queued") || streq(st, "running")))
                                continue;
                        /* The class and argv of a worker older than both are null: shown as "-". */
                        r = rows_add(active, json_pack("{s:s, s:s, s:O, s:O, s:s}", "id", id, "state", st, "since",
                                                       json_object_get(j, "since") ?: json_null(), "action_class",
                                                       json_object_get(j, "action_class") ?: json_null(), "command",
                                                       controller_command_short(json_object_get(j, "argv"), cmd, sizeof(cmd))));
                } else if (!state_file) {
                        ControllerStatus cs;
                        if (controller_status(results_fd, id, 0, false, &cs) < 0)
                                continue;
                        if (cs.state == CONTROLLER_FINAL)
                                r = rows_add(recent, recent_row(id, cs.result));
                        controller_status_done(&cs);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

int controller_list(const ControllerSite *s, size_t max_recent, json_t **ret) {
        Rows inbox = {}, active = {}, recent = {};
        size_t other = 0, more = 0;
        int r;

        if (s->results_fd < 0)
                return -EBADF;
        r = list_inbox(s, &inbox, &other);
        if (r >= 0)
                r = list_results(s->results_fd, &active, &recent);
        _cleanup_(json_decrefp) json_t *l = json_pack("{s:[], s:[], s:[], s:I, s:I}", "inbox", "active", "recent",
                                                      "recent_more", (json_int_t) 0, "inbox_other", (json_int_t) other);
        if (r < 0 || !l) {
                rows_free(&inbox);
                rows_free(&active);
                rows_free(&recent);
                return r < 0 ? r : -ENOMEM;
        }
        rows_take(&inbox, cmp_since_asc, SIZE_MAX, json_object_get(l, "inbox"), NULL);
        rows_take(&active, cmp_since_asc, SIZE_MAX, json_object_get(l, "active"), NULL);
        rows_take(&recent, cmp_finished_desc, max_recent, json_object_get(l, "recent"), &more);
        json_object_set_new(l, "recent_more", json_integer((json_int_t) more));
        *ret = json_incref(l);
        return 0;
}

static void print_row(FILE *out, int width, const char *id, const char *state, const char *exit, const char *cls,
                      const char *since, const char *cmd) {
        fprintf(out, "%-*s %-10s %-5s %-17s %-20s %s\n", width, id, state, exit, cls ? cls : "-", since ? since : "-",
                cmd ? cmd : "-");
}

/* Below a result's row, the walls its job met (capsule/walls.h), one indented line each. */
static void print_walls(FILE *out, const json_t *walls) {
        size_t i;
        json_t *el;
        char line[1024];
        json_array_foreach(walls, i, el)
                if (walls_sentence(el, line, sizeof(line)))
                        fprintf(out, "    %s\n", line);
}

void controller_list_print(const json_t *l, const char *results_dir, FILE *out) {
        const char *const parts[] = {"inbox", "active", "recent"};
        size_t i, total = 0;
        int width = ID_WIDTH;
        json_t *row;

        for (size_t p = 0; p < ELEMENTSOF(parts); p++)
                json_array_foreach(json_object_get(l, parts[p]), i, row) {
                        width = MAX(width, (int) strlen(jstr(row, "id") ?: ""));
                        total++;
                }
        json_int_t more = json_integer_value(json_object_get(l, "recent_more"));
        json_int_t other = json_integer_value(json_object_get(l, "inbox_other"));
        if (total == 0 && more == 0) {
                fprintf(out, "No requests in this workspace: none in its inbox, none pending, queued or running, and no "
                             "result kept in '%s'.\n", results_dir ? results_dir : "?");
                if (other)
                        fprintf(out, "(the inbox holds %" JSON_INTEGER_FORMAT " entr%s no request can be)\n", other,
                                other == 1 ? "y" : "ies");
                return;
        }
        print_row(out, width, "ID", "STATE", "EXIT", "CLASS", "SINCE", "COMMAND");
        json_array_foreach(json_object_get(l, "inbox"), i, row)
                print_row(out, width, jstr(row, "id"), "inbox", "-", jstr(row, "action_class"), jstr(row, "since"),
                          jstr(row, "command"));
        json_array_foreach(json_object_get(l, "active"), i, row)
                print_row(out, width, jstr(row, "id"), jstr(row, "state"), "-", jstr(row, "action_class"),
                          jstr(row, "since"), jstr(row, "command"));
        json_array_foreach(json_object_get(l, "recent"), i, row) {
                char exit[24] = "-";
                json_t *code = json_object_get(row, "exit_code"), *sig = json_object_get(row, "signal");
                if (json_is_integer(code))
                        snprintf(exit, sizeof(exit), "%" JSON_INTEGER_FORMAT, json_integer_value(code));
                else if (json_is_integer(sig))
                        snprintf(exit, sizeof(exit), "sig%" JSON_INTEGER_FORMAT, json_integer_value(sig));
                print_row(out, width, jstr(row, "id"), jstr(row, "status") ?: "?", exit, jstr(row, "action_class"),
                          jstr(row, "finished_at"), jstr(row, "command"));
                print_walls(out, json_object_get(row, "walls"));
        }
        if (more)
                fprintf(out, "(%" JSON_INTEGER_FORMAT " older result(s) not listed: --recent N for more)\n", more);
        if (other)
                fprintf(out, "(the inbox also holds %" JSON_INTEGER_FORMAT " entr%s no request can be)\n", other,
                        other == 1 ? "y" : "ies");
}

int controller_list_run(const char *workspace, const char *results, size_t max_recent, bool json, FILE *out,
                        FILE *err) {
        _cleanup_(controller_site_close) ControllerSite s = CONTROLLER_SITE_NULL;
        _cleanup_(json_decrefp) json_t *l = NULL;
        TfwError e = {0};

        if (controller_site_open(workspace, results, &s, &e) < 0) {
                fprintf(err, "list: %s%s%s%s\n", e.message, e.code ? " (" : "", e.code ? e.code : "", e.code ? ")" : "");
                return 1;
        }
        if (s.results_fd < 0) {
                fprintf(err, "list: cannot read this workspace's results: %s\n",
                        s.results_error[0] ? s.results_error : "the results directory is unknown");
                return 1;
        }
        int r = controller_list(&s, max_recent, &l);
        if (r < 0) {
                fprintf(err, "list: cannot list the requests of '%s' (results '%s'): %s\n", s.workspace,
                        s.results_dir ? s.results_dir : "?", strerror(-r));
                return 1;
        }
        if (json) {
                /* On a terminal, non-ASCII as \uXXXX (as submit --json: C1 and bidi controls). */
                size_t ascii = isatty(fileno(out)) ? JSON_ENSURE_ASCII : 0;
                _cleanup_free_ char *text = json_dumps(l, JSON_INDENT(2) | JSON_PRESERVE_ORDER | ascii);
                if (!text) {
                        fprintf(err, "list: out of memory\n");
                        return 1;
                }
                fprintf(out, "%s\n", text);
        } else
                controller_list_print(l, s.results_dir, out);
        return fflush(out) == 0 ? 0 : 1;
}
