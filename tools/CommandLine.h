//===- CommandLine.h - Command-line checks shared by the tools --*- C++ -*-===//
//
// Header-only: shardc links MLIR, shardrun must not, and both use this.
//
//===----------------------------------------------------------------------===//
#ifndef SHARD_TOOLS_COMMANDLINE_H
#define SHARD_TOOLS_COMMANDLINE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <cstdint>

namespace shardc::tools {

/// A flag whose value is optional (a boolean like --report-memory,
/// shardc's --reshard-after-forward) takes it only after '=': in `--flag
/// VALUE`, VALUE is another positional argument, which llvm::cl reports as
/// "too many positional arguments". Call after the flags are registered and
/// before parsing: names the flag and the spelling that was meant when the
/// word after such a flag is true, false or an integer that names no file.
inline llvm::Error checkSeparatedValues(int argc, char **argv) {
  auto &flags = llvm::cl::getRegisteredOptions();
  for (int i = 1; i + 1 < argc; ++i) {
    llvm::StringRef arg(argv[i]), next(argv[i + 1]);
    if (arg == "--")
      break;
    if (!arg.consume_front("--") && !arg.consume_front("-"))
      continue;
    llvm::cl::Option *flag = flags.lookup(arg);
    int64_t number;
    // A word that names a file or directory is the positional it looks
    // like (`shardrun --report-memory 7` runs the plan in ./7).
    bool looksLikeValue =
        (next.equals_insensitive("true") || next.equals_insensitive("false") ||
         !next.getAsInteger(10, number)) &&
        !llvm::sys::fs::exists(next);
    if (flag && looksLikeValue &&
        flag->getValueExpectedFlag() == llvm::cl::ValueOptional)
      return llvm::createStringError(
          "--%s takes its value after '=': write --%s=%s", arg.str().c_str(),
          arg.str().c_str(), next.str().c_str());
  }
  return llvm::Error::success();
}

} // namespace shardc::tools

#endif // SHARD_TOOLS_COMMANDLINE_H
