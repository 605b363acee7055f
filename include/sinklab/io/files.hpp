// Whole-file reads and crash-safe whole-file writes.
//
// write_file_atomically writes to a temporary file in the target's directory, fsyncs it,
// renames it over the target and fsyncs the directory: a crash or a failed write leaves
// either the old file or the new one, never a half-written mix.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab::io {

// The whole file as bytes; throws sinklab::Error naming the file when it cannot be read.
inline std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path) {
  // A directory opens as a stream whose size reads as 2^63-1 (and a FIFO or device has none):
  // refuse anything but a regular file before sizing a buffer by it.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  SINKLAB_CHECK(!ec && std::filesystem::exists(st), "io::read_file_bytes: cannot open '", path.string(),
                "': no such file");
  SINKLAB_CHECK(std::filesystem::is_regular_file(st), "io::read_file_bytes: '", path.string(), "' is ",
                std::filesystem::is_directory(st) ? "a directory" : "not a regular file", ", expected a file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  SINKLAB_CHECK(in.good(), "io::read_file_bytes: cannot open '", path.string(), "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  SINKLAB_CHECK(size >= 0, "io::read_file_bytes: cannot determine the size of '", path.string(), "'");
  std::vector<uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), size);
  SINKLAB_CHECK(in.good() || (size == 0), "io::read_file_bytes: short read from '", path.string(), "' (",
                in.gcount(), " of ", size, " bytes)");
  return bytes;
}

inline std::string read_file_text(const std::filesystem::path& path) {
  auto b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

namespace detail {
inline std::string errno_text() { return std::strerror(errno); }

// Writes all of [p, p+n) to fd, retrying short writes and EINTR.
inline bool write_all(int fd, const uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
}  // namespace detail

// Replaces `path` with the concatenation of `parts`, atomically (see the top of this file).
inline void write_file_atomically(const std::filesystem::path& path, const std::vector<std::string_view>& parts) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                              std::to_string(counter.fetch_add(1)));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  SINKLAB_CHECK(fd >= 0, "io::write_file_atomically: cannot create temporary file '", tmp.string(), "' for '",
                path.string(), "': ", detail::errno_text());
  auto fail = [&](const char* what) {
    const std::string reason = detail::errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    sinklab::detail::fail("io::write_file_atomically: ", what, " '", tmp.string(), "' (for '", path.string(), "'): ", reason,
                 "; the previous contents of '", path.string(), "' are unchanged");
  };
  for (std::string_view part : parts)
    if (!detail::write_all(fd, reinterpret_cast<const uint8_t*>(part.data()), part.size())) fail("write to");
  if (::fsync(fd) != 0) fail("fsync of");
  if (::close(fd) != 0) {
    const std::string reason = detail::errno_text();
    ::unlink(tmp.c_str());
    sinklab::detail::fail("io::write_file_atomically: close of '", tmp.string(), "' failed: ", reason);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = detail::errno_text();
    ::unlink(tmp.c_str());
    sinklab::detail::fail("io::write_file_atomically: cannot rename '", tmp.string(), "' to '", path.string(), "': ", reason);
  }
  // Make the rename itself durable; failure here does not undo a completed rename.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

inline void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  write_file_atomically(path, std::vector<std::string_view>{contents});
}

}  // namespace sinklab::io
