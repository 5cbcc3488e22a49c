#include "levers/core/output_tee.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/live_progress.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <iostream>
#include <poll.h>
#include <unistd.h>

namespace levers {

namespace {

void write_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, static_cast<std::size_t>(n));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;  // a closed console must not stop the log
        data += w;
        n -= w;
    }
}

// Redirects `fd` into a new pipe; returns the pipe's read end.
int redirect_to_pipe(int fd) {
    int p[2];
    LEVERS_CHECK(::pipe2(p, O_CLOEXEC) == 0, "cannot create a pipe for the run log: {}", std::strerror(errno));
    ::dup2(p[1], fd);  // the duplicate is inherited by children; the originals are not
    ::close(p[1]);
    return p[0];
}

}  // namespace

LiveProgress live_progress_mode() {
    if (console_is_terminal()) return LiveProgress::terminal;
    const char* asked = env::get("LEVERS_LIVE_PROGRESS");
    return asked && std::string(asked) == "1" ? LiveProgress::launcher : LiveProgress::off;
}

bool console_is_terminal() {
    static const bool terminal = ::isatty(1) == 1;  // first asked before stdout is redirected
    return terminal;
}

OutputTee::OutputTee(const std::filesystem::path& log) {
    console_is_terminal();
    log_fd_ = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    LEVERS_CHECK(log_fd_ >= 0, "cannot open the log {}: {}", log.string(), std::strerror(errno));
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    saved_err_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    out_read_ = redirect_to_pipe(1);
    err_read_ = redirect_to_pipe(2);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a pipe would otherwise make stdout block-buffered
    copier_ = std::thread([this] {
        pollfd fds[2] = {{out_read_, POLLIN, 0}, {err_read_, POLLIN, 0}};
        const int to[2] = {saved_out_, saved_err_};
        int open_ends = 2;
        char buf[1 << 14];
        while (open_ends > 0) {
            if (::poll(fds, 2, -1) < 0) {
                if (errno == EINTR) continue;
                return;
            }
            for (int i = 0; i < 2; ++i) {
                if (fds[i].fd < 0 || fds[i].revents == 0) continue;
                const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
                if (got < 0 && errno == EINTR) continue;
                if (got <= 0) {
                    fds[i].fd = -1;  // poll ignores negative descriptors
                    --open_ends;
                    continue;
                }
                write_all(to[i], buf, got);
                write_all(log_fd_, buf, got);
            }
        }
    });
}

OutputTee::~OutputTee() {
    std::cout.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out_, 1);  // closes the pipes' last write ends: the copier sees the end
    ::dup2(saved_err_, 2);
    copier_.join();
    for (int fd : {out_read_, err_read_, saved_out_, saved_err_, log_fd_}) ::close(fd);
}

}  // namespace levers
