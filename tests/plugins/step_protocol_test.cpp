// The frames between the daemon and its step processes, over real socket
// pairs: a frame crosses whole whatever its size, goes in one send, and a
// frame that is not one is told apart from a peer that is gone or late.
#include "step_protocol.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace cairn::plugins {
namespace {

class SocketPair {
 public:
  explicit SocketPair(int type = SOCK_STREAM) {
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds_.data()) != 0) {
      throw std::runtime_error("socketpair failed");
    }
  }
  ~SocketPair() {
    Close(0);
    Close(1);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;

  int writer() const { return fds_[0]; }
  int reader() const { return fds_[1]; }
  void CloseWriter() { Close(0); }
  void CloseReader() { Close(1); }

 private:
  void Close(size_t end) {
    if (fds_[end] >= 0) ::close(fds_[end]);
    fds_[end] = -1;
  }

  std::array<int, 2> fds_{-1, -1};
};

void WriteRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string LengthHeader(uint32_t size) {
  return {static_cast<char>(size & 0xff), static_cast<char>((size >> 8) & 0xff),
          static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 24) & 0xff)};
}

TEST(StepProtocol, AFrameManyTimesTheSocketBufferCrossesWhole) {
  SocketPair pair;
  // Several megabytes: the kernel takes them in many partial sends.
  const Json message = {{"type", "outcome"}, {"context", std::string(8 * 1024 * 1024, 'x')}};
  bool written = false;
  std::thread writer([&] { written = WriteFrame(pair.writer(), message); });
  const ReadResult read =
      ReadFrame(pair.reader(), std::chrono::steady_clock::now() + std::chrono::seconds(30));
  // A read that stopped early would leave the writer blocked on a full
  // socket: closing the reader lets its send fail.
  if (read.status != ReadStatus::kMessage) pair.CloseReader();
  writer.join();
  EXPECT_TRUE(written);
  ASSERT_EQ(read.status, ReadStatus::kMessage);
  EXPECT_EQ(read.message, message);
}

TEST(StepProtocol, AFrameGoesInOneSend) {
  // A packet socket keeps each send a record of its own, so the first
  // receive shows whether the header and the body went together: a frame
  // sent in two wakes its reader twice.
  SocketPair pair(SOCK_SEQPACKET);
  const Json message = {{"type", "invoke"}, {"step", "noop"}};
  ASSERT_TRUE(WriteFrame(pair.writer(), message));
  std::array<char, 4096> buffer{};
  const ssize_t n = ::recv(pair.reader(), buffer.data(), buffer.size(), MSG_DONTWAIT);
  const std::string body = message.dump();
  ASSERT_EQ(n, static_cast<ssize_t>(4 + body.size()));
  EXPECT_EQ(std::string(buffer.data(), 4), LengthHeader(static_cast<uint32_t>(body.size())));
  EXPECT_EQ(std::string(buffer.data() + 4, body.size()), body);
}

TEST(StepProtocol, FramesFollowEachOtherInOrder) {
  SocketPair pair;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WriteFrame(pair.writer(), {{"n", i}}));
  for (int i = 0; i < 3; ++i) {
    const ReadResult read = ReadFrame(pair.reader());
    ASSERT_EQ(read.status, ReadStatus::kMessage);
    EXPECT_EQ(read.message.at("n"), i);
  }
}

TEST(StepProtocol, AHeaderLongerThanTheLimitIsMalformed) {
  SocketPair pair;
  WriteRaw(pair.writer(), LengthHeader(static_cast<uint32_t>(kMaxFrameBytes + 1)));
  EXPECT_EQ(ReadFrame(pair.reader()).status, ReadStatus::kMalformed);
}

TEST(StepProtocol, ABodyThatIsNotAJsonObjectIsMalformed) {
  SocketPair pair;
  for (const std::string body : {"[1, 2]", "{\"type\": "}) {
    WriteRaw(pair.writer(), LengthHeader(static_cast<uint32_t>(body.size())) + body);
    EXPECT_EQ(ReadFrame(pair.reader()).status, ReadStatus::kMalformed) << body;
  }
}

TEST(StepProtocol, APeerGoneMidFrameIsClosedAndASilentOneTimesOut) {
  {
    SocketPair pair;
    WriteRaw(pair.writer(), LengthHeader(100) + "{\"type\"");
    pair.CloseWriter();
    EXPECT_EQ(ReadFrame(pair.reader()).status, ReadStatus::kClosed);
  }
  {
    SocketPair pair;
    EXPECT_EQ(
        ReadFrame(pair.reader(), std::chrono::steady_clock::now() + std::chrono::milliseconds(50))
            .status,
        ReadStatus::kTimeout);
  }
}

TEST(StepProtocol, WritingToAPeerThatIsGoneFailsWithoutASignal) {
  SocketPair pair;
  pair.CloseReader();
  EXPECT_FALSE(WriteFrame(pair.writer(), {{"type", "outcome"}}));
}

}  // namespace
}  // namespace cairn::plugins
