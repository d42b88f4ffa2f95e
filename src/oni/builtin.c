/* builtin.c - the drivers linked into liboni; oni_create_ctx tries them
 * before looking for libonidriver_<name>.so. */
#include "ctx.h"

const struct oni_driver *const oni_builtin_drivers[] = {&onidrv_test, &onidrv_emu, &onidrv_net, NULL};
