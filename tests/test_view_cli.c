/* test_view_cli.c - `run --view` and `bench view` through the binary: bad
 * options and a view that cannot be served are refused before the loop
 * runs (exit 2 for bad input, 1 for a page or port that cannot be had; no
 * line of a running loop printed), the reason named. A real run with the
 * page open is the browser test (tests/view/browser.mjs). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "test_loop_run.h"

TEST(view_options_refused_before_the_run)
{
    NEED_BIN();
    CHECK_EQ(ONIGPU("run", "--view", "1.2.3:80"), 2);
    CHECK(strstr(out, "--view 1.2.3:80") && strstr(out, "no dotted IPv4 address"));
    CHECK_EQ(ONIGPU("run", "--view", "70000"), 2);
    CHECK(strstr(out, "PORT is no number 0..65535"));
    CHECK_EQ(ONIGPU("run", "--view"), 2);
    CHECK_EQ(ONIGPU("run", "--view-token", "/etc/hostname"), 2);
    CHECK(strstr(out, "--view-token is the token of --view: give --view too"));
    CHECK_EQ(ONIGPU("run", "--view", "0", "--view-token", "/nonexistent/token"), 2);
    CHECK(strstr(out, "--view-token /nonexistent/token") && strstr(out, "can be read"));
    char tok[] = "/tmp/onigpu-view-token-XXXXXX";
    int fd = mkstemp(tok);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "short\n", 6) == 6);
    close(fd);
    CHECK_EQ(ONIGPU("run", "--view", "0", "--view-token", tok), 2);
    CHECK(strstr(out, "8 to 127 printable characters"));
    unlink(tok);
    CHECK_EQ(ONIGPU("bench", "view", "--out", "/etc/hostname"), 2);
    CHECK(strstr(out, "--out /etc/hostname: must be a directory"));
}

/* The page's files are read before the run: none there, no run (and no
 * truth file left behind). */
TEST(view_without_its_page_is_refused)
{
    NEED_BIN();
    setenv("ONIGPU_WEB_DIR", "/nonexistent/web", 1);
    int st = ONIGPU("run", "--view", "0", "--seconds", "1", "--block", "30");
    unsetenv("ONIGPU_WEB_DIR");
    CHECK_EQ(st, 1);
    if (strstr(out, "libmicrohttpd"))
        SKIP("built without libmicrohttpd");
    CHECK(strstr(out, "/nonexistent/web/index.html cannot be read") != NULL);
    CHECK(strstr(out, "frames/s") == NULL); /* no loop ran */
    CHECK(unit_sh("ls /tmp/onigpu-truth-%d-* >/dev/null 2>&1", (int)onigpu_pid) != 0);
}

TEST(view_on_a_port_in_use_is_refused)
{
    NEED_BIN();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(s, 1) == 0);
    REQUIRE(getsockname(s, (struct sockaddr *)&sa, &len) == 0);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(sa.sin_port));
    int st = ONIGPU("run", "--view", addr, "--seconds", "1", "--block", "30");
    close(s);
    CHECK_EQ(st, 1);
    if (strstr(out, "libmicrohttpd"))
        SKIP("built without libmicrohttpd");
    if (strstr(out, "cannot be read") && strstr(out, "npm ci"))
        SKIP("the page's charting library is not installed (tools/deps.sh: npm ci in web/view)");
    CHECK(strstr(out, "cannot listen on") != NULL);
    CHECK(strstr(out, "frames/s") == NULL);
}
