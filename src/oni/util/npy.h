/* npy.h - NumPy's .npy files, version 1.0, one to three dimensions: the
 * header onigpu writes and the header a reader of the format finds. In
 * src/oni/util because the recording (src/record), the emulator's truth
 * templates (src/emu) and the loop's template reader (src/loop) share it.
 *
 * Facts (no code taken): the NEP 1 / numpy.lib.format description of the
 * format (numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
 * magic "\x93NUMPY", major 1, minor 0, a little-endian u16 header length,
 * then a Python dict literal with 'descr', 'fortran_order' and 'shape',
 * padded with spaces and ended by '\n' so that the data starts at a
 * multiple of 64 bytes (16 in older writers). onigpu writes headers of a
 * fixed length, NPY_HDR bytes, so that the shape can be rewritten in place
 * as a file grows (and by `onigpu recover`). */
#ifndef ONI_UTIL_NPY_H
#define ONI_UTIL_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_HDR 128 /* bytes of every header onigpu writes: data starts here */
#define NPY_MAXDIM 3

struct npy_info {
    char descr[8];     /* e.g. "<i8", "<f8", "<i2", "<u8" */
    int fortran;       /* fortran_order */
    int ndim;                   /* 1 to NPY_MAXDIM */
    uint64_t shape[NPY_MAXDIM]; /* dimensions past ndim are 1 */
    size_t data_off;   /* bytes before the data */
    size_t item;       /* bytes of one element */
};

/* Write the header of a C-order array of ndim (1..NPY_MAXDIM) dimensions
 * shape[0] x ... x shape[ndim-1] of descr into buf[NPY_HDR]. 0, or -1 for a
 * descr that is not a little-endian integer or float of 1, 2, 4 or 8 bytes,
 * or a bad ndim. */
int npy_header(char buf[NPY_HDR], const char *descr, int ndim, const uint64_t *shape);

/* Parse the header at the start of buf[0..len) (any length the format
 * allows, not only NPY_HDR) into *out. 0, or -1 when it is no .npy
 * version 1 or 2 header of a little-endian array of 1..NPY_MAXDIM dimensions
 * of a type npy_header knows (the file is then not one onigpu can recover). */
int npy_parse(const uint8_t *buf, size_t len, struct npy_info *out);

#endif
