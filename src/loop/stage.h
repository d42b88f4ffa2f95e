/* stage.h - private to src/loop: the EPHYS processing chain of
 * include/onigpu_stage.h stages (docs/stages.md), and the built-in stages. */
#ifndef LOOP_STAGE_H
#define LOOP_STAGE_H

#include "loop/loop.h"
#include "onigpu_stage.h"

#define LOOP_MAXSTAGES (LOOP_MAXCHAIN + 1)

struct loop_chain;

/* Build the chain of cfg->stages (the built-in one for none), each stage
 * loaded, checked and configured for blocks of nframes frames laid out as
 * init->lay; init is the built-in stages' initial state. 0, or
 * ONI_EINVALARG / ONI_EBADALLOC / a stage's own error with why filled;
 * nothing is left allocated or loaded then. */
int loop_chain_create(const struct loop_config *cfg, const struct loop_ephys_state *init, uint32_t nframes,
                      struct loop_chain **out, char *why, size_t cap);
/* Free the chain, its states, and unload its shared objects (NULL ok). */
void loop_chain_destroy(struct loop_chain *ch);
/* 1 when the chain is the built-in pipeline in its order (filter, reference,
 * detect, decide: what the GPU backends run as one kernel), else 0. */
int loop_chain_is_builtin(const struct loop_chain *ch);
/* The built-in stages' state (filter: b, a, z; decide: lockout, stim_last;
 * detect: the rest, its exclusive rule's radius, sweep and excl too) into st,
 * whose layout is kept; a part whose stage is not in the chain is left. */
void loop_chain_state(const struct loop_chain *ch, struct loop_ephys_state *st);
/* Tell every stage the loop starts / stopped. */
void loop_chain_start(struct loop_chain *ch);
void loop_chain_stop(struct loop_chain *ch);
/* Run block seq (nframes frames at blk) through the chain into out. 0, or
 * the failing stage's error, ONI_ETIMEOUT (a stage over its budget) or
 * ONI_EINVALSTATE (a stage left out inconsistent), why saying which stage. */
int loop_chain_process(struct loop_chain *ch, const uint8_t *blk, uint64_t seq, struct onigpu_out *out, char *why,
                       size_t cap);
/* From another thread while loop_chain_process runs: ONI_ETIMEOUT with why
 * when the stage running now has used more processor time than its budget
 * plus a grace (the budget, at least 100 ms), or held the thread longer than
 * wall_limit_ns, without returning; else 0
 * (no stage running, or within both). Needs loop_chain_start first. */
int loop_chain_overrun(struct loop_chain *ch, uint64_t wall_limit_ns, char *why, size_t cap);
/* Stage i's reconfigure hook with options (loop_stage_reconfigure). */
int loop_chain_reconfigure(struct loop_chain *ch, uint32_t i, const char *options, char *why, size_t cap);
/* Stages in the chain (decide included when appended). */
uint32_t loop_chain_count(const struct loop_chain *ch);
/* Stage i's descriptor (NULL past the end), its state and state size, and
 * whether the chain decodes the frames before it. */
const struct onigpu_stage *loop_chain_stage(const struct loop_chain *ch, uint32_t i, void **state, int *decode_first);
/* The chain's block shape: frames per block, the layout, the frame rate. */
uint32_t loop_chain_nframes(const struct loop_chain *ch);
const struct loop_ephys_layout *loop_chain_layout(const struct loop_chain *ch);
double loop_chain_fs_hz(const struct loop_chain *ch);

/* Parse "key=value,key=value" options into vals[] of keys[] (given[k] set to
 * 1 for each found). 0, or ONI_EINVALARG with err naming the stage, the key
 * or value and what is allowed. */
int loop_stage_opts(const char *stage, const char *options, const char *const *keys, int nkeys, double *vals,
                    int *given, char *err, size_t cap);

/* The built-in stages (stage_builtin.c). */
extern const struct onigpu_stage loop_stage_filter, loop_stage_reference, loop_stage_detect, loop_stage_decide;
/* Template matching (stage_tmatch.c, tmatch.h): samples -> spikes labelled with their template. */
extern const struct onigpu_stage loop_stage_tmatch;
/* The built-in stage of that name, or NULL. */
const struct onigpu_stage *loop_stage_builtin(const char *name, size_t len);

#endif
