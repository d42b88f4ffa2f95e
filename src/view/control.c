/* control.c - the view's parsers of what users and pages send (view.h):
 * the body of POST /control ("k=4.5&channels=1,2,3": known keys once each,
 * plain decimal numbers, nothing else), the --view address and a request's
 * Host header. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include "onidefs.h"
#include "view/view.h"

static int bad(char *why, size_t cap, const char *fmt, const char *key, size_t klen)
{
    snprintf(why, cap, fmt, (int)klen, key);
    return ONI_EINVALARG;
}

/* A decimal number of at most 15 characters [0-9.]: 0 and *v, or -1. */
static int number(const char *s, size_t n, double *v)
{
    char tmp[16];
    if (!n || n >= sizeof tmp)
        return -1;
    int dots = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '.')
            dots++;
        else if (s[i] < '0' || s[i] > '9')
            return -1;
    if (dots > 1 || s[0] == '.' || s[n - 1] == '.')
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *v = strtod(tmp, NULL);
    return 0;
}

static int channels(const char *s, size_t n, uint32_t nchan, struct view_control *c, char *why, size_t cap)
{
    c->nchan = 0;
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != ',')
            j++;
        double v;
        if (c->nchan == VIEW_TRACES) {
            snprintf(why, cap, "channels: at most %d", VIEW_TRACES);
            return ONI_EINVALARG;
        }
        if (number(s + i, j - i, &v) || v != (double)(uint32_t)v || v >= nchan) {
            snprintf(why, cap, "channels: '%.*s' is no channel number 0..%u (384 a probe: probe p's c is p*384+c)",
                     (int)(j - i > 40 ? 40 : j - i), s + i, nchan - 1);
            return ONI_EINVALARG;
        }
        for (uint32_t k = 0; k < c->nchan; k++)
            if (c->chan[k] == (uint16_t)v)
                return bad(why, cap, "channels: %.*s is named twice", s + i, j - i);
        c->chan[c->nchan++] = (uint16_t)v;
        i = j + 1;
    }
    c->have_chans = 1;
    return 0;
}

int view_parse_control(const char *s, size_t n, uint32_t nchan, struct view_control *c, char *why, size_t cap)
{
    memset(c, 0, sizeof *c);
    nchan = nchan < 1 ? 1 : nchan > VIEW_MAXCHAN ? VIEW_MAXCHAN : nchan;
    if (!n)
        return bad(why, cap, "an empty request%.*s: k=NUMBER and/or channels=N,N,...", "", 0);
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != '&')
            j++;
        const char *eq = memchr(s + i, '=', j - i);
        if (!eq)
            return bad(why, cap, "'%.*s' is no key=value", s + i, j - i);
        size_t klen = (size_t)(eq - (s + i)), vlen = j - i - klen - 1;
        const char *val = eq + 1;
        if (klen == 1 && s[i] == 'k') {
            if (c->have_k)
                return bad(why, cap, "%.*s is given twice", "k", 1);
            if (number(val, vlen, &c->k) || c->k < VIEW_K_MIN || c->k > VIEW_K_MAX)
                return bad(why, cap, "k: '%.*s' is no threshold of 2..20 noise SDs", val, vlen);
            c->have_k = 1;
        } else if (klen == 8 && !memcmp(s + i, "channels", 8)) {
            if (c->have_chans)
                return bad(why, cap, "%.*s is given twice", "channels", 8);
            int rc = channels(val, vlen, nchan, c, why, cap);
            if (rc)
                return rc;
        } else {
            return bad(why, cap, "unknown key '%.*s' (k, channels)", s + i, klen);
        }
        if (j == n - 1) /* a trailing '&' */
            return bad(why, cap, "a trailing '&'%.*s", "", 0);
        i = j + 1;
    }
    return 0;
}

int view_parse_addr(const char *s, struct view_config *c, char *why, size_t cap)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    const char *port = colon ? colon + 1 : s;
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    if (colon) {
        size_t n = (size_t)(colon - s);
        struct in_addr a;
        char host[64];
        if (n == 0 || n >= sizeof host) {
            snprintf(why, cap, "'%s': HOST:PORT with HOST a dotted IPv4 address or localhost", s ? s : "");
            return ONI_EINVALARG;
        }
        memcpy(host, s, n);
        host[n] = 0;
        if (!strcmp(host, "localhost"))
            snprintf(host, sizeof host, "127.0.0.1");
        if (inet_pton(AF_INET, host, &a) != 1) {
            snprintf(why, cap, "'%s': HOST is no dotted IPv4 address (nor localhost)", host);
            return ONI_EINVALARG;
        }
        snprintf(c->host, sizeof c->host, "%s", host);
    }
    char *end = NULL;
    errno = 0;
    long p = port && *port >= '0' && *port <= '9' ? strtol(port, &end, 10) : -1;
    if (p < 0 || p > 65535 || errno || !end || *end) {
        snprintf(why, cap, "'%s': PORT is no number 0..65535 (0: any free port)", port ? port : "");
        return ONI_EINVALARG;
    }
    c->port = (uint16_t)p;
    return 0;
}

/* A request's Host names this server: on a server bound to one address,
 * that address, or loopback's names (an SSH tunnel's "localhost:PORT");
 * bound to every address (0.0.0.0), any. A page of another site whose name
 * was made to resolve to this machine (DNS rebinding) is refused so: the
 * browser sends that site's name. No Host (HTTP/1.0): taken. */
int view_host_ok(const char *bound, const char *host)
{
    if (!host || !strcmp(bound, "0.0.0.0"))
        return 1;
    size_t n = strlen(host);
    const char *colon = strrchr(host, ':');
    if (colon && !strchr(colon, ']')) /* a port after the name (not inside an IPv6 literal) */
        n = (size_t)(colon - host);
    static const char *const loop[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++)
        if (strlen(loop[i]) == n && !strncasecmp(host, loop[i], n))
            return 1;
    return strlen(bound) == n && !strncmp(host, bound, n);
}
