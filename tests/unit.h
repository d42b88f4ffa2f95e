/* unit.h - onigpu's small test framework (one header; each tests/test_*.c is one program).
 *
 *   TEST(name) { CHECK(x); CHECK_EQ(a, b); CHECK_RC(call(), ONI_ESUCCESS); }
 *   SKIP("why")  ends the current test as skipped (the program exits 77 if
 *                every test skipped, which CTest reports as "skipped").
 * Run one program with a substring argument to run only matching tests. */
#ifndef UNIT_H
#define UNIT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef void (*unit_fn)(void);
struct unit_case { const char *name; unit_fn fn; };

static struct unit_case unit_cases[512];
static int unit_ncases, unit_failed_checks, unit_skipped, unit_dropped;

/* A case past the table's end is counted, and the program fails (main): it
 * must not silently never run. */
static void unit_register(const char *name, unit_fn fn)
{
    if (unit_ncases < (int)(sizeof unit_cases / sizeof unit_cases[0]))
        unit_cases[unit_ncases++] = (struct unit_case){name, fn};
    else
        unit_dropped++;
}

#define TEST(name)                                                                     \
    static void name(void);                                                            \
    __attribute__((constructor)) static void unit_reg_##name(void) { unit_register(#name, name); } \
    static void name(void)

#define UNIT_FAIL(...)                                                                 \
    do {                                                                               \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                              \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                           \
        unit_failed_checks++;                                                          \
    } while (0)

#define CHECK(cond)                                                                    \
    do { if (!(cond)) UNIT_FAIL("CHECK(%s) failed", #cond); } while (0)

#define CHECK_EQ(a, b)                                                                 \
    do {                                                                               \
        long long unit_a_ = (long long)(a), unit_b_ = (long long)(b);                  \
        if (unit_a_ != unit_b_)                                                        \
            UNIT_FAIL("CHECK_EQ(%s, %s): %lld != %lld", #a, #b, unit_a_, unit_b_);     \
    } while (0)

/* Like CHECK_EQ, but prints oni_error_str of both sides (needs oni.h). */
#define CHECK_RC(expr, want)                                                           \
    do {                                                                               \
        int unit_rc_ = (int)(expr), unit_w_ = (int)(want);                             \
        if (unit_rc_ != unit_w_)                                                       \
            UNIT_FAIL("%s returned %d (%s), want %d (%s)", #expr, unit_rc_,            \
                      oni_error_str(unit_rc_), unit_w_, oni_error_str(unit_w_));       \
    } while (0)

/* A check that must hold for the rest of the test to make sense. */
#define REQUIRE(cond)                                                                  \
    do { if (!(cond)) { UNIT_FAIL("REQUIRE(%s) failed", #cond); return; } } while (0)

/* Run the shell command printf would make of fmt and the arguments; its
 * exit status (0: success), -1 when it could not run or was too long. */
__attribute__((format(printf, 1, 2), unused)) static int unit_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof cmd)
        return -1;
    int st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

#define SKIP(...)                                                                      \
    do {                                                                               \
        fprintf(stderr, "  skipped: ");                                                \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                           \
        unit_skipped++;                                                                \
        return;                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    int failed = 0, ran = 0, skipped = 0;
    for (int i = 0; i < unit_ncases; i++) {
        if (argc > 1 && !strstr(unit_cases[i].name, argv[1]))
            continue;
        int before = unit_failed_checks, skip_before = unit_skipped;
        fprintf(stderr, "[ RUN  ] %s\n", unit_cases[i].name);
        unit_cases[i].fn();
        ran++;
        if (unit_failed_checks != before) {
            failed++;
            fprintf(stderr, "[ FAIL ] %s\n", unit_cases[i].name);
        } else if (unit_skipped != skip_before) {
            skipped++;
            fprintf(stderr, "[ SKIP ] %s\n", unit_cases[i].name);
        } else {
            fprintf(stderr, "[  OK  ] %s\n", unit_cases[i].name);
        }
    }
    fprintf(stderr, "%d tests, %d failed, %d skipped\n", ran, failed, skipped);
    if (unit_dropped) {
        fprintf(stderr, "%d more tests than unit.h's table holds: never run\n", unit_dropped);
        return 1;
    }
    if (ran == 0)
        return 1;
    if (failed)
        return 1;
    return skipped == ran ? 77 : 0;
}

#endif
