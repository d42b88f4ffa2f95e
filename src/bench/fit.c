/* fit.c - weighted least-squares fit of the transfer model t = l + s/b. */
#include <math.h>
#include "bench.h"

int bench_fit_model(const double *size, const double *t_ns, size_t n, int weighting,
                    struct bench_fit *out)
{
    if (!size || !t_ns || !out || n < 2)
        return ONI_EINVALARG;
    if (weighting != BENCH_FIT_ABSOLUTE && weighting != BENCH_FIT_RELATIVE)
        return ONI_EINVALARG;

    double sw = 0, swx = 0, swy = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(size[i]) || !isfinite(t_ns[i]))
            return ONI_EINVALARG;
        if (weighting == BENCH_FIT_RELATIVE && t_ns[i] <= 0)
            return ONI_EINVALARG;
        double w = weighting == BENCH_FIT_RELATIVE ? 1 / (t_ns[i] * t_ns[i]) : 1;
        sw += w;
        swx += w * size[i];
        swy += w * t_ns[i];
    }
    double xm = swx / sw, ym = swy / sw;
    int flat = 1; /* every time equal: slope 0 exactly (the weighted mean may
                   * differ from that time in its last bit, and the tiny slope
                   * that leaves would read as a bandwidth of 1e39 B/s) */
    for (size_t i = 1; i < n; i++)
        flat &= t_ns[i] == t_ns[0];

    /* Centred sums: sizes reach 1e7 and more, so raw sums of squares would
     * lose the small sizes' contribution to rounding. */
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double w = weighting == BENCH_FIT_RELATIVE ? 1 / (t_ns[i] * t_ns[i]) : 1;
        double dx = size[i] - xm, dy = t_ns[i] - ym;
        sxx += w * dx * dx;
        sxy += w * dx * dy;
        syy += w * dy * dy;
    }
    if (!(sxx > 0))
        return ONI_EINVALARG; /* all sizes equal: the slope is undefined */

    double slope = flat ? 0 : sxy / sxx, icpt = flat ? t_ns[0] : ym - slope * xm;
    double ssres = 0;
    for (size_t i = 0; i < n; i++) {
        double w = weighting == BENCH_FIT_RELATIVE ? 1 / (t_ns[i] * t_ns[i]) : 1;
        double r = t_ns[i] - (icpt + slope * size[i]);
        ssres += w * r * r;
    }
    out->n = n;
    out->lat_ns = icpt;
    out->ns_per_byte = slope;
    out->bw_Bps = slope > 0 ? 1e9 / slope : 0;
    /* Identical times at every size leave nothing to explain: the model
     * (slope 0) reproduces them exactly, so R^2 is 1, not 0/0. */
    out->r2 = syy > 0 && !flat ? 1 - ssres / syy : 1;
    return ONI_ESUCCESS;
}
