/* builtin.c - the drivers linked into this library; oni_create_ctx tries
 * them before looking for libonidriver_<name>.so. liboni.so has the test
 * driver only; the static library of the tools and tests (ONI_BUILTIN_ALL,
 * DEVELOPERS.md) has every driver of src/drivers. */
#include "ctx.h"

const struct oni_driver *const oni_builtin_drivers[] = {
    &onidrv_test,
#ifdef ONI_BUILTIN_ALL
    &onidrv_emu,
    &onidrv_net,
#endif
    NULL,
};
