/* npy.h - NumPy's .npy files, version 1.0, of one to three dimensions:
 * the header onigpu writes, the header a reader of the format finds, and a
 * whole file read and checked (Kilosort's templates, src/loop/stage_tmatch.c).
 *
 * Facts (no code taken): the NEP 1 / numpy.lib.format description of the
 * format (numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
 * magic "\x93NUMPY", major 1, minor 0, a little-endian u16 header length,
 * then a Python dict literal with 'descr', 'fortran_order' and 'shape',
 * padded with spaces and ended by '\n' so that the data starts at a
 * multiple of 64 bytes (16 in older writers). onigpu writes headers of a
 * fixed length, NPY_HDR bytes, so that the shape can be rewritten in place
 * as a file grows (and by `onigpu recover`). */
#ifndef RECORD_NPY_H
#define RECORD_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_HDR 128  /* bytes of every header onigpu writes: data starts here */
#define NPY_MAXDIM 3 /* dimensions onigpu writes and reads */
#define NPY_MAX_STR 4096 /* bytes of a "|S<n>" string element at most */

struct npy_info {
    char descr[8];              /* e.g. "<i8", "<f8", "<i2", "<u8", "|S128" */
    int fortran;                /* fortran_order */
    int ndim;                   /* 1 .. NPY_MAXDIM */
    uint64_t shape[NPY_MAXDIM]; /* the dimensions past ndim are 1 */
    size_t data_off;            /* bytes before the data */
    size_t item;                /* bytes of one element */
};

/* Write the header of a C-order array of ndim (1 .. NPY_MAXDIM) dimensions
 * shape[0 .. ndim) of descr elements into buf[NPY_HDR]. 0, or -1 for a
 * descr that is not a little-endian integer or float of 1, 2, 4 or 8 bytes
 * nor "|S<n>" (fixed-width byte strings, n 1..NPY_MAX_STR), or a shape
 * whose text does not fit. */
int npy_header(char buf[NPY_HDR], const char *descr, int ndim, const uint64_t *shape);

/* Parse the header at the start of buf[0..len) (any length the format
 * allows, not only NPY_HDR) into *out. 0, or -1 when it is no .npy
 * version 1 or 2 header of a little-endian array of 1 .. NPY_MAXDIM
 * dimensions, of a type npy_header knows, whose data fits in 2^63 bytes. */
int npy_parse(const uint8_t *buf, size_t len, struct npy_info *out);

/* Check buf[0..len), the bytes of the .npy file `name` (for messages), as a
 * C-order array of ndim dimensions whose descr is one of the comma-separated
 * `descrs` ("<f4", "<i4,<i8"), its data exactly the rest of the bytes. 0
 * with *out (the data at buf + out->data_off), or ONI_EINVALARG with why
 * naming the file and what is wrong (header, dtype, order, shape, size). */
int npy_check(const uint8_t *buf, size_t len, const char *name, const char *descrs, int ndim, struct npy_info *out,
              char *why, size_t cap);

/* Read the file at path whole and npy_check it. 0 with *out and *data (the
 * elements, malloc'd: the caller frees it), or ONI_EINVALARG (npy_check's),
 * ONI_EREADFAILURE (cannot open or read: why says so with the system's
 * reason) or ONI_EBADALLOC; *data is NULL then. Files over 1 GiB are refused
 * (ONI_EINVALARG). */
int npy_load(const char *path, const char *descrs, int ndim, struct npy_info *out, void **data, char *why, size_t cap);

#endif
