//===- RankGuard.h - A rank that says how it ended and never outlives its job //
//
// What a rank process installs once it knows its rank (shardrun does it right
// after creating its communicator):
//
//   Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): an
//     async-signal-safe handler writes one line
//       "<program>: error: rank R died of SIGSEGV at step S, op K (TYPE)"
//     with the position from runtime/comm/Progress.h, records the ending,
//     then hands the signal to the handler installed before it (Open MPI's
//     or LLVM's backtrace) and dies of the signal, so the exit status still
//     says which one.
//   SIGTERM, SIGINT, SIGHUP: the record says Terminated (the launcher reads
//     it to tell the ranks that were told to stop from one that was killed),
//     then the previous handler runs and the rank dies of the signal. No
//     line: mpirun ends every rank with SIGTERM once one has failed, and the
//     failing one has already spoken.
//   exit(): a library that ends the process itself (LLVM's fatal errors,
//     MPI) leaves the record saying Exited, not Running, so the launcher
//     does not take it for a SIGKILL.
//   A lifeline (multi-rank jobs): a thread that every 200 ms checks that the
//     process that started this rank (mpirun, Open MPI's orted, srun's
//     slurmstepd, hydra's proxy) is still its parent, and that the local
//     launcher named by $SHARD_LAUNCHER (if any) still runs. If either is
//     gone the rank prints one line and ends itself (exit code 1): a rank
//     never outlives its job, whoever started it, on whichever host. (A
//     parent-death signal, PR_SET_PDEATHSIG, would fire when the *thread*
//     that forked the rank ends, which in a multi-threaded launcher can be
//     any time; polling getppid() has no such trap.)
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_RANKGUARD_H
#define SHARDC_RUNTIME_COMM_RANKGUARD_H

namespace shardc::rt {

/// Installs the signal handlers above for rank `rank`, and the lifeline when
/// `lifeline` is set. Call once, after MPI is initialized (Open MPI installs
/// backtrace handlers of its own there; ours run first and chain to them).
void installRankGuards(int rank, bool lifeline);

/// "SIGSEGV" for SIGSEGV; "signal N" for a signal without a name here.
/// Async-signal-safe (static strings only).
const char *signalName(int signal, char (&buffer)[16]);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_COMM_RANKGUARD_H
