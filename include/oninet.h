/* oninet.h - options of the `net` driver: hardware in another process or on
 * another machine.
 *
 * oni_create_ctx("net") opens a context whose driver calls travel over UCX
 * (shared memory on one machine, TCP or RDMA verbs across machines, as UCX
 * finds them and UCX_TLS allows) to `onigpu serve`, which holds the hardware
 * through any ONI driver there
 * (emu, test, a real card's driver). The program sees the served driver's
 * device table, registers, frames and options as if it were local, and the
 * GPU streams' blocks (onigpu.h's ONI_DRV_READ and ONI_DRV_WRITE, into and
 * out of host or GPU memory of this process). The options that pin or start
 * transfers on this process's memory (PIN, UNPIN, READ_ASYNC, WRITE_ASYNC)
 * are refused with ONI_EUNIMPL. docs/net.md says how it behaves when the
 * server or the network fails.
 *
 * The server's address comes from ONI_DRV_NET_ADDR, else from the
 * environment variable ONIGPU_NET, else it is 127.0.0.1:9455. The driver
 * connects at oni_init_ctx, or before it at the first driver option that goes
 * to the server (ONI_DRV_EMU_SPEC, say, which the served driver wants before
 * its init). */
#ifndef ONINET_H
#define ONINET_H

#ifdef __cplusplus
extern "C" {
#endif

#define ONIGPU_NET_ENV "ONIGPU_NET"
#define ONIGPU_NET_SECRET_ENV "ONIGPU_NET_SECRET" /* the shared secret, when ONI_DRV_NET_SECRET is not set */

enum {
    ONI_DRV_NET_ADDR = 0x4F470500, /* set (before the driver connects, else ONI_EINVALSTATE): "host:port",
                                      "[v6addr]:port"; size = strlen + 1. get: the address in use */
    ONI_DRV_NET_REMOTE,            /* get (once connected): the served driver, "name major.minor.patch" */
    ONI_DRV_NET_SECRET,            /* set (before the driver connects): the server's shared secret, at most
                                      256 bytes; write-only */
    ONI_DRV_NET_TRANSPORT,         /* get (once connected): the UCX transports the data link uses, as UCX
                                      names them ("posix", "sysv", "tcp", "rc_mlx5"...), comma-separated */
    ONI_DRV_NET_GPU_IPC            /* get (once connected): uint32_t, the GPU-stream blocks of GPU memory
                                      that the server's card moved straight into (out of) this process's
                                      memory through CUDA IPC in this session (a server on this machine,
                                      sharing the GPU); the others were staged through host memory */
};

#ifdef __cplusplus
}
#endif
#endif
