/* tmatch_files.h - the template file set the template-matching stage reads:
 * Kilosort's output as phy reads it, one directory (docs/stages.md
 * "Template matching"; facts, no code taken: Kilosort4's "Files exported for
 * Phy", kilosort.readthedocs.io export_files.rst; unwhitening as
 * `templates @ whitening_mat_inv`, MouseLand/Kilosort issue 804):
 *   templates.npy          float32 [n_templates][n_samples][n_channels]
 *   channel_map.npy        int32 (or int64) [n_channels]: the data channel of each
 *   whitening_mat_inv.npy  float32/64 [n_channels][n_channels], optional: the
 *                          templates are unwhitened with it (templates @ inv)
 *   channel_positions.npy  float32/64 [n_channels][2], optional: checked, not used
 *   params.py              optional: sample_rate, hp_filtered (the rest ignored)
 * A file that is there but of another shape or dtype is refused, naming it. */
#ifndef LOOP_TMATCH_FILES_H
#define LOOP_TMATCH_FILES_H

#include <stddef.h>
#include <stdint.h>

struct tm_files {
    uint32_t ntpl, nsamp, nch; /* templates.npy's shape */
    float *templates;          /* [ntpl][nsamp][nch], unwhitened when whitening_mat_inv.npy is there */
    uint32_t *chan_map;        /* [nch]: the data channel of template channel i */
    double fs_hz;              /* params.py sample_rate; 0 when not given */
    int hp_filtered;           /* params.py hp_filtered: 1, 0; -1 when not given */
    int unwhitened;            /* a whitening_mat_inv.npy other than the identity was applied */
};

/* Read the set in dir into *f (freed by tm_files_free, also after an error).
 * 0, or ONI_EINVALARG (a file missing, of a bad shape or dtype, or empty;
 * why names the file and what), ONI_EREADFAILURE, ONI_EBADALLOC. */
int tm_files_load(const char *dir, struct tm_files *f, char *why, size_t cap);
/* Free what tm_files_load allocated (f zeroed; NULL-safe members). */
void tm_files_free(struct tm_files *f);
/* params.py's text[0..len) (file name `name` for messages): *fs_hz from
 * `sample_rate = NUMBER` (0 when absent), *hp from `hp_filtered = True|False`
 * (-1 when absent); other lines are not read. 0, or ONI_EINVALARG with why
 * for a value of those two keys that is not one. */
int tm_params_parse(const char *text, size_t len, const char *name, double *fs_hz, int *hp, char *why, size_t cap);

#endif
