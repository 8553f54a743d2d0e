#ifndef PUSH_RELAY_THREAD_NICE_H
#define PUSH_RELAY_THREAD_NICE_H

/// Linked into push-relay: its setpriority (thread_nice.c) answers a thread's refused request to
/// lower its own nice value as done, leaving the value as it is, so libdispatch prints nothing when
/// push-relay runs unprivileged. This function only ties the module to the executable.
int push_relay_thread_nice_linked(void);

#endif
