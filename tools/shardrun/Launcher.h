//===- Launcher.h - Runs a plan's ranks as local MPI processes --*- C++ -*-===//
#ifndef SHARDC_TOOLS_SHARDRUN_LAUNCHER_H
#define SHARDC_TOOLS_SHARDRUN_LAUNCHER_H

namespace shardc {

/// Re-runs this command (argv, without --nproc) as `ranks` local processes
/// under mpirun, and returns shardrun's exit code: mpirun's, or 1 when mpirun
/// cannot be run. When SIGINT, SIGTERM or SIGHUP ends the job, the launcher
/// dies of that signal after the ranks are gone (Launcher.cpp).
int launchRanks(int ranks, int argc, char **argv);

} // namespace shardc

#endif // SHARDC_TOOLS_SHARDRUN_LAUNCHER_H
