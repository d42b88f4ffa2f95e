/* fuzz_view.c - the live view's own parsers (src/view/control.c): the body
 * of POST /control, the --view address and a request's Host header.
 * The first byte mod 3 picks the parser (0 body, 1 address, 2 Host); the
 * rest is its input. A body that parses must name known values only: a
 * threshold of VIEW_K_MIN..MAX, 1..VIEW_TRACES distinct channels below
 * the loop's (1..4 probes, from the first byte / 3); a Host taken must name loopback or the bound address. (HTTP
 * itself is libmicrohttpd's.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../../src/view/control.c"
#include "../../src/view/view.h"

static void addr(const uint8_t *data, size_t size)
{
    char s[128];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    struct view_config c;
    char why[256] = "";
    memset(&c, 0, sizeof c);
    if (view_parse_addr(s, &c, why, sizeof why) == 0) {
        struct in_addr a;
        if (inet_pton(AF_INET, c.host, &a) != 1) /* a host that parses is an address */
            abort();
    } else if (!why[0]) {
        abort();
    }
}

/* A Host taken names loopback or the bound address before its port. */
static void host(const uint8_t *data, size_t size)
{
    char s[128];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    if (!view_host_ok("10.1.2.3", s))
        return;
    static const char *const ok[] = {"localhost", "127.0.0.1", "[::1]", "10.1.2.3"};
    int named = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t k = strlen(ok[i]);
        named |= !strncasecmp(s, ok[i], k) && (s[k] == 0 || s[k] == ':');
    }
    if (!named)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    if (data[0] % 3 == 1) {
        addr(data + 1, size - 1);
        return 0;
    }
    if (data[0] % 3 == 2) {
        host(data + 1, size - 1);
        return 0;
    }
    struct view_control c;
    char why[256];
    uint32_t nchan = VIEW_PROBE_CHAN * (1u + data[0] / 3 % VIEW_MAXPROBES); /* 1..4 probes */
    if (view_parse_control((const char *)data + 1, size - 1, nchan, &c, why, sizeof why) == 0) {
        if (!c.have_k && !c.have_chans)
            abort();
        if (c.have_k && !(c.k >= VIEW_K_MIN && c.k <= VIEW_K_MAX))
            abort();
        if (c.have_chans) {
            if (!c.nchan || c.nchan > VIEW_TRACES)
                abort();
            for (uint32_t i = 0; i < c.nchan; i++) {
                if (c.chan[i] >= nchan)
                    abort();
                for (uint32_t j = 0; j < i; j++)
                    if (c.chan[j] == c.chan[i])
                        abort();
            }
        }
    } else if (!why[0]) {
        abort(); /* a refusal says why */
    }
    return 0;
}
