// A file descriptor that becomes readable when another thread raises it:
// wakes a thread that waits in poll() on a socket besides.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace cairn {

class EventSignal {
 public:
  EventSignal() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~EventSignal() { ::close(fd_); }
  EventSignal(const EventSignal&) = delete;
  EventSignal& operator=(const EventSignal&) = delete;

  int fd() const { return fd_; }
  // Safe from any thread; raising a raised signal changes nothing.
  void Raise() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof one);
  }
  void Clear() {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t read = ::read(fd_, &count, sizeof count);
  }

 private:
  int fd_;
};

}  // namespace cairn
