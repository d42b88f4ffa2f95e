/* oebin_index.c - structure.oebin's list of folders (oebin.h), the one
 * parser of the recording's JSON, kept apart from the file work of
 * recover.c so that a fuzzer takes it alone (tests/fuzz/fuzz_record.c). */
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "record/oebin.h"

/* A folder name of structure.oebin that stays inside its kind's directory. */
static int safe_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n >= OEBIN_NAME - 16 || s[0] == '/')
        return 0;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20)
            return 0;
    for (const char *p = s; (p = strstr(p, "..")); p++)
        if ((p == s || p[-1] == '/') && (p[2] == '/' || !p[2]))
            return 0;
    return 1;
}

static int add_folder(struct oebin_index *out, int kind, const char *name, uint32_t nchan, char *why, size_t cap)
{
    static const char *const dir[3] = {"continuous", "events", "spikes"};
    if (!safe_name(name)) {
        snprintf(why, cap, "a %s folder name that is not one: \"%.60s\"", dir[kind], name);
        return -1;
    }
    if (out->n == OEBIN_MAX_FOLDERS) {
        snprintf(why, cap, "more than %d folders", OEBIN_MAX_FOLDERS);
        return -1;
    }
    struct oebin_folder *f = &out->f[out->n++];
    f->kind = kind;
    f->nchan = nchan;
    snprintf(f->path, sizeof f->path, "%s/%s", dir[kind], name);
    size_t n = strlen(f->path);
    while (n && f->path[n - 1] == '/')
        f->path[--n] = 0; /* "ONIX-100.X/" */
    return 0;
}

int oebin_parse_index(const char *text, size_t len, struct oebin_index *out, char *why, size_t cap)
{
    out->n = 0;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root || !json_is_object(root)) {
        snprintf(why, cap, "structure.oebin is not a JSON object (%s)", root ? "another value" : je.text);
        json_decref(root);
        return -1;
    }
    static const char *const key[3] = {"continuous", "events", "spikes"};
    static const char *const fkey[3] = {"folder_name", "folder_name", "folder"};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        json_t *a = json_object_get(root, key[k]);
        if (!a)
            continue;
        if (!json_is_array(a)) {
            snprintf(why, cap, "\"%s\" is not a list", key[k]);
            rc = -1;
            break;
        }
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
            json_t *fn = json_object_get(e, fkey[k]), *nc = json_object_get(e, "num_channels");
            if (!json_is_string(fn)) {
                snprintf(why, cap, "a \"%s\" entry without its \"%s\"", key[k], fkey[k]);
                rc = -1;
                break;
            }
            json_int_t ch = json_is_integer(nc) ? json_integer_value(nc) : 0;
            if (k == OEBIN_CONTINUOUS && (ch < 1 || ch > 65535)) {
                snprintf(why, cap, "a continuous entry with %lld channels", (long long)ch);
                rc = -1;
                break;
            }
            if ((rc = add_folder(out, k, json_string_value(fn), (uint32_t)(ch > 0 && ch < 65536 ? ch : 0), why, cap)))
                break;
        }
    }
    json_decref(root);
    return rc;
}

