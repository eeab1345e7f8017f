//===- SafeFile.h - Reading untrusted files, writing durable ones -*- C++
//-*-===//
//
// The file I/O of plan and checkpoint directories. Reading trusts nothing:
// only a regular file inside the directory is opened (no symbolic link,
// FIFO or device; a FIFO never blocks the open), reads are bounded by the
// size seen at open, and a file that shrinks or grows while being read is an
// error. Writing is durable and atomic: bytes go to a temporary name, are
// fsynced, and the rename that publishes them is fsynced with its directory,
// so a crash at any moment leaves the old file or the new one, never a torn
// one.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_SAFEFILE_H
#define SHARDC_PLAN_SAFEFILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardc::plan {

/// Whether `name` is a plain file name that stays inside a directory: not
/// empty, no '/', '\', NUL, "..", leading dot, whitespace or control
/// characters.
bool isPlainFileName(llvm::StringRef name);

/// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256Hex(llvm::ArrayRef<uint8_t> data);

/// An open regular file of a directory; closed on destruction.
class ReadOnlyFile {
public:
  /// Opens file `name` of directory `dir`: a plain name (isPlainFileName),
  /// no symbolic link, nothing but a regular file. `container` names what
  /// the directory is in messages ("plan", "checkpoint"). An error for a
  /// missing file carries ENOENT.
  static llvm::Expected<std::unique_ptr<ReadOnlyFile>>
  open(llvm::StringRef dir, llvm::StringRef name,
       llvm::StringRef container = "plan");
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile &) = delete;
  ReadOnlyFile &operator=(const ReadOnlyFile &) = delete;

  /// The size when opened.
  uint64_t size() const { return bytes; }
  const std::string &path() const { return filePath; }

  /// Reads `out.size()` bytes at `offset`.
  llvm::Error read(uint64_t offset, llvm::MutableArrayRef<uint8_t> out) const;
  /// Fails when the file holds bytes past `end` (it grew since it was
  /// opened): nothing past what was checked is ever used.
  llvm::Error checkEndsAt(uint64_t end) const;
  /// SHA-256 of the first `length` bytes, as 64 lowercase hex digits, read
  /// in chunks; the file must end there.
  llvm::Expected<std::string> sha256(uint64_t length) const;
  /// The whole file (at most `maxBytes`, else an error).
  llvm::Expected<std::vector<uint8_t>> readAll(uint64_t maxBytes) const;

private:
  ReadOnlyFile() = default;
  int fd = -1;
  uint64_t bytes = 0;
  std::string filePath;
};

/// Writes `bytes` to a new temporary file next to `finalPath` (same
/// directory, a unique name starting with the final one), fsynced, and
/// returns the temporary's path. The caller renames or removes it.
llvm::Expected<std::string> writeTemporary(llvm::StringRef finalPath,
                                           llvm::ArrayRef<uint8_t> bytes);

/// fsyncs directory `dir`, making the renames and creations in it durable.
llvm::Error syncDirectory(llvm::StringRef dir);

/// Writes `bytes` to `path` atomically and durably: a temporary, fsynced,
/// renamed over `path`, and the directory fsynced.
llvm::Error writeFileDurably(llvm::StringRef path,
                             llvm::ArrayRef<uint8_t> bytes);

} // namespace shardc::plan

#endif // SHARDC_PLAN_SAFEFILE_H
