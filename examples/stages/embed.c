/* embed.c - onigpu's closed loop in a program of your own, as a library
 * call (src/loop/run.h), with a stage defined in the program itself
 * (docs/stages.md). It runs the loop on the emulated card (a breakout
 * board and an NP2.0e headstage, as `onigpu run` does), its chain the
 * built-in filter, reference and detect, then this program's stage, which
 * counts the spikes of each channel; the loop appends `decide`. Then it
 * prints the summary and the busiest channels.
 *
 *   embed_loop [SECONDS] [BACKEND] [--stimulated]   (default 2 s on the cpu backend)
 *
 * Exit status 0 when the loop ran without an error and the stage counted
 * every spike the loop reported (with --stimulated: and it stimulated), 1
 * otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loop/run.h"
#include "oni.h"

/* Spikes per channel, the program's own (a stage may keep state outside
 * the loop's; this one is read after the run). */
static uint64_t counts[ONIGPU_STAGE_MAXCHAN];

/* Reads the spikes and leaves them as they are: a stage that only looks. */
static int count_spikes(void *state, struct onigpu_block *b)
{
    for (uint32_t i = 0; i < b->out->nspikes; i++)
        if (b->out->spikes[i].chan < ONIGPU_STAGE_MAXCHAN)
            counts[b->out->spikes[i].chan]++;
    return 0;
}

static const struct onigpu_stage counter = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "counter",
    .input = ONIGPU_DATA_SPIKES,
    .output = ONIGPU_DATA_SPIKES,
    .process = count_spikes,
};

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int backend = argc > 2 ? loop_backend_parse(argv[2]) : LOOP_CPU;
    if (backend < 0) {
        fprintf(stderr, "embed_loop: unknown backend %s\n", argv[2]);
        return 2;
    }
    const struct loop_stage_spec chain[] = {
        {"filter", NULL, NULL}, {"reference", NULL, NULL}, {"detect:k=5", NULL, NULL}, {NULL, &counter, NULL},
    };
    char truth[] = "/tmp/embed-loop-truth-XXXXXX";
    int fd = mkstemp(truth); /* the emulated card writes its ground truth here */
    if (fd < 0) {
        perror("embed_loop: mkstemp");
        return 1;
    }
    close(fd);
    struct loop_run_config cfg = {
        .backend = backend, .block = 16, .seconds = seconds, .truth = truth, .stages = chain, .nstages = 4,
    };
    struct loop_run_result r;
    int rc = loop_run_session(&cfg, &r);
    remove(truth);
    if (rc)
        fprintf(stderr, "embed_loop: %s\n", r.why[0] ? r.why : oni_error_str(rc));
    if (!r.ran)
        return 1;
    printf("%s: %llu frames, %llu spikes, %llu stimulations, recall %.3f, precision %.3f, latency p50 %.1f us\n",
           loop_backend_name(backend), (unsigned long long)r.frames, (unsigned long long)r.spikes,
           (unsigned long long)r.stims, r.score.recall, r.score.precision, r.lat.p50_us);
    uint64_t sum = 0;
    for (int c = 0; c < ONIGPU_STAGE_MAXCHAN; c++)
        sum += counts[c];
    printf("counter stage: %llu spikes counted\n", (unsigned long long)sum);
    for (int k = 0; k < 3; k++) { /* the three busiest channels */
        int best = 0;
        for (int c = 1; c < ONIGPU_STAGE_MAXCHAN; c++)
            if (counts[c] > counts[best])
                best = c;
        if (!counts[best])
            break;
        printf("  channel %3d: %llu spikes\n", best, (unsigned long long)counts[best]);
        counts[best] = 0;
    }
    int want_stims = argc > 3 && !strcmp(argv[3], "--stimulated");
    int ok = !rc && r.frames > 0 && sum == r.spikes + r.spikes_unkept && (!want_stims || r.stims > 0);
    loop_run_result_free(&r);
    return ok ? 0 : 1;
}
