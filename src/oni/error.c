/* error.c - error texts and the library version. */
#include "ctx.h"

const char *oni_error_str(int err)
{
    switch (err) {
    case ONI_ESUCCESS: return "Success";
    case ONI_EPATHINVALID: return "Invalid stream path, fail on open";
    case ONI_EDEVID: return "Invalid device ID";
    case ONI_EDEVIDX: return "Invalid device index";
    case ONI_EWRITESIZE: return "Data size is not a non-zero multiple of the device's write size";
    case ONI_EREADFAILURE: return "Failure to read from a stream or register";
    case ONI_EWRITEFAILURE: return "Failure to write to a stream or register";
    case ONI_ENULLCTX: return "Attempt to use a NULL context";
    case ONI_ESEEKFAILURE: return "Failure to seek on a stream";
    case ONI_EINVALSTATE: return "Invalid operation for the current context state";
    case ONI_EINVALOPT: return "Invalid context option";
    case ONI_EINVALARG: return "Invalid function argument";
    case ONI_ECOBSPACK: return "Invalid COBS packet";
    case ONI_ERETRIG: return "Attempt to trigger an already triggered operation";
    case ONI_EBUFFERSIZE: return "Supplied buffer is too small";
    case ONI_EBADDEVTABLE: return "Badly formatted device table supplied by firmware";
    case ONI_EBADALLOC: return "Memory allocation failed";
    case ONI_ECLOSEFAIL: return "File descriptor close failure";
    case ONI_EREADONLY: return "Attempt to write to a read-only object";
    case ONI_EUNIMPL: return "Specified, but unimplemented, feature";
    case ONI_EINVALREADSIZE: return "Block read size is smaller than the maximal read frame size, not a multiple of 4, or above 1 GiB";
    case ONI_ENOREADDEV: return "Frame read attempted when there are no readable devices";
    case ONI_EINIT: return "Hardware initialization failed";
    case ONI_EWRITEONLY: return "Attempt to read from a write-only object";
    case ONI_EINVALWRITESIZE: return "Block write size is smaller than the maximal write frame size, not a multiple of 4, or above 1 GiB";
    case ONI_ENOTWRITEDEV: return "Frame allocation attempted for a non-writable device";
    case ONI_EDEVIDXREPEAT: return "Device table contains a repeated device index";
    case ONI_EPROTCONFIG: return "Attempt to directly read or write a protected configuration option";
    case ONI_EBADFRAME: return "Received a malformed frame";
    case ONI_EBADCONTROLLER: return "Hardware controller does not fit this API";
    case ONI_ETIMEOUT: return "Operation timed out (see ONI_OPT_TIMEOUTMS)";
    case ONI_EDISCONNECTED: return "Hardware or its server disconnected";
    case ONI_ENOGPU: return "No usable GPU, or library built without CUDA";
    case ONI_ENOTPINNED: return "Buffer is not pinned";
    case ONI_EPINNED: return "Buffer is already pinned, or was freed while pinned";
    case ONI_EOVERFLOW: return "Hardware FIFO overflowed: data was dropped (and counted)";
    case ONI_EBUSY: return "Resource is in use";
    case ONI_EBADADDR: return "Bad address: not HOST:PORT with a port 1-65535, or a socket path too long";
    case ONI_ENOHOST: return "Unknown host: the name does not resolve";
    case ONI_ECONNREFUSED: return "Connection refused: nobody listens at the address";
    case ONI_ENOSOCKET: return "No socket at the path";
    case ONI_ENOTSOCKET: return "The path is not a socket";
    case ONI_EACCESS: return "Permission denied to the socket or its directory";
    default: return "Unknown error";
    }
}

void oni_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = ONI_VERSION_MAJOR;
    if (minor)
        *minor = ONI_VERSION_MINOR;
    if (patch)
        *patch = ONI_VERSION_PATCH;
}
