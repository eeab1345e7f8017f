//===- SafeFile.cpp - Reading untrusted files, writing durable ones -------===//
#include "plan/SafeFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace shardc::plan {

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

bool isPlainFileName(StringRef name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255)
    return false;
  if (name.contains("..") || name.starts_with("."))
    return false;
  // Printable ASCII without separators or spaces: a manifest is a list of
  // space-separated fields.
  return llvm::all_of(name, [](char c) {
    return c > 0x20 && c < 0x7f && c != '/' && c != '\\';
  });
}

static StringRef describeFileType(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd >= 0)
    ::close(fd);
}

Expected<std::unique_ptr<ReadOnlyFile>>
ReadOnlyFile::open(StringRef dir, StringRef name, StringRef container) {
  if (!isPlainFileName(name))
    return makeError("'" + name + "' is not a plain file name inside the " +
                     container + " directory");
  std::unique_ptr<ReadOnlyFile> file(new ReadOnlyFile());
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  file->filePath = std::string(path);
  // O_NONBLOCK keeps a FIFO from blocking the open; the type is checked on
  // the open descriptor, so the file checked is the file read.
  int fd;
  do {
    fd = ::open(file->filePath.c_str(),
                O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP)
      return makeError(
          file->filePath + " is a symbolic link; every file of a " + container +
          " must be a regular file inside the " + container + " directory");
    return llvm::createStringError(std::error_code(e, std::generic_category()),
                                   "cannot open " + file->filePath + ": " +
                                       std::strerror(e));
  }
  file->fd = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return makeError("cannot stat " + file->filePath + ": " +
                     std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return makeError(file->filePath + " is " + describeFileType(st.st_mode) +
                     ", not a regular file; every file of a " + container +
                     " must be a regular file inside the " + container +
                     " directory");
  // A regular file never blocks; reads below are ordinary ones.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file->bytes = static_cast<uint64_t>(st.st_size);
  return std::move(file);
}

Error ReadOnlyFile::read(uint64_t offset,
                         llvm::MutableArrayRef<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    size_t want = std::min<size_t>(out.size() - done, size_t(1) << 30);
    ssize_t got =
        ::pread(fd, out.data() + done, want, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return makeError("cannot read " + filePath + ": " + std::strerror(errno));
    if (got == 0)
      return makeError("unexpected end of " + filePath + " after " +
                       Twine(offset + done) +
                       " bytes (the file shrank while being read)");
    done += static_cast<size_t>(got);
  }
  return Error::success();
}

Error ReadOnlyFile::checkEndsAt(uint64_t end) const {
  uint8_t extra;
  ssize_t got;
  do {
    got = ::pread(fd, &extra, 1, static_cast<off_t>(end));
  } while (got < 0 && errno == EINTR);
  if (got > 0)
    return makeError(filePath + " grew while being read");
  return Error::success();
}

static std::string toHex(const std::array<uint8_t, 32> &digest) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string sha256Hex(llvm::ArrayRef<uint8_t> data) {
  return toHex(llvm::SHA256::hash(data));
}

Expected<std::string> ReadOnlyFile::sha256(uint64_t length) const {
  llvm::SHA256 hasher;
  std::vector<uint8_t> chunk(std::min<uint64_t>(length, uint64_t(4) << 20));
  for (uint64_t done = 0; done < length;) {
    size_t n =
        static_cast<size_t>(std::min<uint64_t>(chunk.size(), length - done));
    if (Error err = read(done, llvm::MutableArrayRef<uint8_t>(chunk.data(), n)))
      return std::move(err);
    hasher.update(llvm::ArrayRef<uint8_t>(chunk.data(), n));
    done += n;
  }
  if (Error err = checkEndsAt(length))
    return std::move(err);
  return toHex(hasher.final());
}

Expected<std::vector<uint8_t>> ReadOnlyFile::readAll(uint64_t maxBytes) const {
  if (bytes > maxBytes)
    return makeError(filePath + " is " + Twine(bytes) + " bytes, more than " +
                     Twine(maxBytes) +
                     " (it is not what it should be, or "
                     "damaged)");
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  if (Error err = read(0, data))
    return std::move(err);
  if (Error err = checkEndsAt(bytes))
    return std::move(err);
  return std::move(data);
}

/// write(2) of all of `bytes`, retried on EINTR and short writes.
static Error writeAll(int fd, llvm::ArrayRef<uint8_t> bytes, StringRef path) {
  size_t done = 0;
  while (done < bytes.size()) {
    size_t want = std::min<size_t>(bytes.size() - done, size_t(1) << 30);
    ssize_t put = ::write(fd, bytes.data() + done, want);
    if (put < 0 && errno == EINTR)
      continue;
    if (put < 0)
      return makeError("cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(put);
  }
  return Error::success();
}

Expected<std::string> writeTemporary(StringRef finalPath,
                                     llvm::ArrayRef<uint8_t> bytes) {
  int fd = -1;
  llvm::SmallString<256> tmpPath;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          finalPath + ".tmp-%%%%%%%%", fd, tmpPath))
    return makeError("cannot create a temporary file for " + finalPath + ": " +
                     ec.message());
  Error err = writeAll(fd, bytes, tmpPath);
  if (!err && ::fsync(fd) != 0)
    err = makeError("cannot write " + tmpPath +
                    " to disk (fsync): " + std::strerror(errno));
  if (::close(fd) != 0 && !err)
    err = makeError("cannot write " + tmpPath + ": " + std::strerror(errno));
  if (err) {
    llvm::sys::fs::remove(tmpPath);
    return std::move(err);
  }
  return std::string(tmpPath);
}

Error syncDirectory(StringRef dir) {
  std::string path = dir.empty() ? std::string(".") : dir.str();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return makeError("cannot open directory " + path + ": " +
                     std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; their renames are as
  // durable as they get.
  if (rc != 0 && e != EINVAL && e != ENOTSUP)
    return makeError("cannot write directory " + path +
                     " to disk (fsync): " + std::strerror(e));
  return Error::success();
}

Error writeFileDurably(StringRef path, llvm::ArrayRef<uint8_t> bytes) {
  Expected<std::string> tmp = writeTemporary(path, bytes);
  if (!tmp)
    return tmp.takeError();
  if (std::error_code ec = llvm::sys::fs::rename(*tmp, path)) {
    llvm::sys::fs::remove(*tmp);
    return makeError("cannot rename " + *tmp + " to " + path + ": " +
                     ec.message());
  }
  return syncDirectory(llvm::sys::path::parent_path(path));
}

} // namespace shardc::plan
