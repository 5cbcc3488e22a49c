// Between fork and exec of a child levers supervises (a rank, a sweep cell, a
// benchmark run): it dies with its parent, and takes none of the parent's
// descriptors beyond stdin, stdout and stderr along. Boost.Process v1 only;
// include it where boost/process.hpp already is.
#pragma once

#include <boost/process/extend.hpp>

#include <csignal>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace levers::launch {

// Marks every descriptor from 3 up close-on-exec (in the child, after fork).
inline void close_inherited_on_exec() {
    if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
    for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);  // kernels before 5.11
}

struct DieWithParent : boost::process::extend::handler {
    pid_t parent;
    int signal;  // what the child gets when the parent dies
    template <class Executor> void on_exec_setup(Executor&) const {
        prctl(PR_SET_PDEATHSIG, signal);
        if (getppid() != parent) _exit(1);  // the parent died before prctl took effect
        close_inherited_on_exec();
    }
};

}  // namespace levers::launch
