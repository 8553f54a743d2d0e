#include "journal_stream.h"

#include <sys/stat.h>

// In C: Swift's view of struct stat differs between the toolchain's build configurations (a
// static-stdlib build finds it only through CoreFoundation), and this needs two fields of it.
int push_relay_is_stream(int descriptor, unsigned long long device, unsigned long long inode) {
    struct stat status;
    if (fstat(descriptor, &status) != 0) {
        return 0;
    }
    return (unsigned long long)status.st_dev == device && (unsigned long long)status.st_ino == inode;
}
