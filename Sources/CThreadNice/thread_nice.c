#define _GNU_SOURCE
#include "thread_nice.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// push-relay's setpriority, ahead of the C library's (a definition in the executable wins over a
// shared library's, for the statically linked libdispatch of a release build and for the shared
// one of a debug build alike).
//
// libdispatch on Linux imitates quality-of-service classes with nice values: each worker thread
// sets its own nice value for its queue's class, and its event manager thread runs at the
// user-interactive class, nice -4. Lowering a nice value needs CAP_SYS_NICE or a RLIMIT_NICE above
// the default, so for push-relay running as an unprivileged user (the packaged units, the image)
// the kernel answers EACCES, and libdispatch writes "Failed to set thread priority for worker
// thread: ... errno=13" to syslog, which under systemd is the unit's journal, outside log.format.
// Here a thread's own request to lower its nice value beyond what it may is left at the value it
// has, and answered as done: a scheduling hint this process is not entitled to is not an error.
// Every other call, and every other failure, is the C library's.
int setpriority(__priority_which_t which, id_t who, int prio) {
    long result = syscall(SYS_setpriority, (int)which, who, prio);
    if (result == 0) {
        return 0;
    }
    if (errno == EACCES && which == PRIO_PROCESS && who == 0) {
        errno = 0;
        return 0;
    }
    return -1;
}

int push_relay_thread_nice_linked(void) { return 1; }
