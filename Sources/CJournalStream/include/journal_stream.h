#ifndef PUSH_RELAY_JOURNAL_STREAM_H
#define PUSH_RELAY_JOURNAL_STREAM_H

/// 1 when `descriptor` is open on the file with this device and inode number (what systemd's
/// JOURNAL_STREAM names, `device:inode`), 0 otherwise or when it is not open.
int push_relay_is_stream(int descriptor, unsigned long long device, unsigned long long inode);

#endif
