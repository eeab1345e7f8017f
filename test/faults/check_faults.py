#!/usr/bin/python3
"""Faults in a running 2-rank training job, with real signals and real mpirun
jobs: the job ends within a bound, says which rank failed where, and leaves no
process behind. One case per run (--case); each prints what it measured.

  launcher-sigterm, launcher-sigint  the signal to the shardrun launcher alone
  launcher-sigkill                   SIGKILL to the launcher alone
  launcher-sigkill-mpirun-stopped    SIGKILL to the launcher while mpirun is
                                     stopped: the ranks end themselves
  launcher-mpirun-stopped            SIGTERM to the launcher while mpirun is
                                     stopped: after 10 s it kills everything
  launcher-second-signal             the same, but a second SIGTERM kills at once
  mpirun-sigkill                     SIGKILL to mpirun under the launcher
  rank-parent-sigkill                ranks started by a shell under mpirun, and
                                     the shell killed: the ranks end themselves
  rank-sigstop                       SIGSTOP of rank 1, --collective-timeout 3;
                                     also measures rank 0's CPU while it waits
  rank-sigkill, rank-sigsegv         the signal to rank 1 (mid-step)
  rank-sigkill-collective            SIGKILL to rank 1 while it waits in a
                                     collective (rank 0 stopped meanwhile)
  rank-sigkill-save                  SIGKILL to rank 1 while it writes a
                                     checkpoint: the earlier one stays
                                     loadable and resuming from it is exact
  direct-sigstop                     rank 1 stopped under a direct mpirun launch
  job-pause                          every rank stopped for 6 s, then resumed
                                     (Ctrl-Z and fg): the job goes on

The plan is examples/cnn compiled for 2 ranks. Needs no Python packages."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def processes_with(token):
    """PIDs of the processes whose command line holds `token`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state not in ("Z", "X"):
            pids.append(int(entry))
    return pids


def rank_pids(token):
    """{rank: pid} of the job's rank processes (shardrun processes that carry
    Open MPI's rank variable)."""
    ranks = {}
    for pid in processes_with(token):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "shardrun":
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for var in env:
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                ranks[int(var.split(b"=", 1)[1])] = pid
    return ranks


def cpu_seconds(pid):
    """User + system CPU seconds of all threads of `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def log_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def mpirun_pid(token):
    for pid in processes_with(token):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith(("mpirun", "orterun")):
                return pid
        except OSError:
            continue
    fail("no mpirun found")


def environment(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(v.decode(errors="replace").split("=", 1)
                    for v in f.read().split(b"\0") if b"=" in v)


class Job:
    def __init__(self, args, tmp, timeout, direct=False, steps=1000000, shell=False,
                 extra=(), env=None):
        self.log = os.path.join(tmp, "run.jsonl")
        self.token = tmp
        self.out_path = os.path.join(tmp, "out.txt")
        cmd = [args.shardrun, args.plan, "--data", args.data, "--steps", str(steps),
               "--progress", "off", "--log", self.log, "--collective-timeout", str(timeout)]
        cmd += list(extra)
        if shell:
            # Each rank is a child of a shell that mpirun started.
            cmd = ["/bin/sh", "-c", " ".join(cmd) + " & wait"]
        if direct or shell:
            mpirun = [shutil.which("mpirun"), "-np", "2", "--oversubscribe", "--bind-to", "none"]
            if os.geteuid() == 0:
                mpirun.append("--allow-run-as-root")
            cmd = mpirun + cmd
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env)
        self.start = time.monotonic()

    def wait_training(self, lines=3, limit=60):
        """Until rank 0 has logged `lines` steps; returns the {rank: pid}."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail(f"the job ended before training (exit {self.proc.returncode}):\n"
                     + self.output())
            ranks = rank_pids(self.token)
            if log_lines(self.log) >= lines and len(ranks) == 2:
                return ranks
            time.sleep(0.05)
        fail(f"the job did not log {lines} steps within {limit} s:\n" + self.output())

    def wait_end(self, limit):
        """Seconds until the launched process ended, or failure after `limit`."""
        t0 = time.monotonic()
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.cleanup()
            fail(f"the job did not end within {limit} s:\n" + self.output())
        return time.monotonic() - t0

    def output(self):
        self.out.flush()
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def cleanup(self):
        """Kills whatever of this job is left (by PID) and returns the PIDs."""
        left = processes_with(self.token)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return left


def expect_no_process_left(job, limit=5.0):
    """Every process of the job is gone within `limit` seconds; returns the
    seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if not processes_with(job.token):
            return time.monotonic() - t0
        time.sleep(0.05)
    left = job.cleanup()
    fail(f"processes left behind after {limit} s: {left}\n" + job.output())


def expect_output(job, pattern):
    text = job.output()
    if not re.search(pattern, text):
        fail(f"the output does not match '{pattern}':\n{text}")
    for line in text.splitlines():
        if re.search(pattern, line):
            return line
    return ""


def case_launcher_signal(args, tmp, sig):
    job = Job(args, tmp, timeout=600)
    ranks = job.wait_training()
    # Every rank has mapped the board: its file is gone already.
    board = environment(ranks[0]).get("SHARD_PROGRESS_BOARD")
    if not board:
        fail("the ranks' environment names no progress board")
    t0 = time.monotonic()
    while os.path.exists(board):
        if time.monotonic() - t0 > 1:
            fail(f"the progress board {board} still exists after every rank attached")
        time.sleep(0.02)
    os.kill(job.proc.pid, sig)
    took = job.wait_end(limit=20)
    name = signal.Signals(sig).name
    if job.proc.returncode != -sig:
        fail(f"the launcher did not die of {name}: status {job.proc.returncode}")
    line = expect_output(job, rf"shardrun: error: received {name}; ending the job's 2 ranks "
                              rf"\(rank 0 is at step \d+")
    gone = expect_no_process_left(job)
    print(line)
    print(f"{name} to the launcher: it ended after {took:.2f} s "
          f"(status {job.proc.returncode}); every process gone {gone:.2f} s later")


def case_launcher_sigkill(args, tmp):
    job = Job(args, tmp, timeout=600)
    ranks = job.wait_training()
    board = environment(ranks[0]).get("SHARD_PROGRESS_BOARD")
    t0 = time.monotonic()
    os.kill(job.proc.pid, signal.SIGKILL)
    job.proc.wait()
    expect_no_process_left(job, limit=10)
    print(f"SIGKILL to the launcher: mpirun and both ranks gone {time.monotonic() - t0:.2f} s "
          f"later")
    if not board or os.path.exists(board):
        fail(f"the progress board {board} was left behind")


def case_launcher_sigkill_mpirun_stopped(args, tmp):
    job = Job(args, tmp, timeout=600)
    ranks = job.wait_training()
    mpirun = mpirun_pid(job.token)
    os.kill(mpirun, signal.SIGSTOP)
    t0 = time.monotonic()
    os.kill(job.proc.pid, signal.SIGKILL)
    job.proc.wait()
    # mpirun cannot act on its parent-death SIGTERM while stopped: the ranks
    # must notice the launcher is gone themselves.
    while any(p in processes_with(job.token) for p in ranks.values()):
        if time.monotonic() - t0 > 5:
            os.kill(mpirun, signal.SIGCONT)
            job.cleanup()
            fail("the ranks outlived their launcher by 5 s:\n" + job.output())
        time.sleep(0.02)
    took = time.monotonic() - t0
    os.kill(mpirun, signal.SIGCONT)
    gone = expect_no_process_left(job)
    # mpirun passes the ranks' last lines on once it runs again.
    print(expect_output(job, r"shardrun: error: rank [01]: its launcher \(shardrun, pid \d+\) "
                             r"has exited; ending this rank, which was at step \d+"))
    print(f"SIGKILL to the launcher with mpirun stopped: both ranks ended themselves "
          f"{took:.2f} s later; mpirun, resumed, was gone {gone:.2f} s after")


def case_launcher_mpirun_stopped(args, tmp, second_signal):
    job = Job(args, tmp, timeout=600)
    job.wait_training()
    mpirun = mpirun_pid(job.token)
    os.kill(mpirun, signal.SIGSTOP)
    os.kill(job.proc.pid, signal.SIGTERM)
    t0 = time.monotonic()
    if second_signal:
        # Signals do not queue: the second SIGTERM goes only after the
        # launcher has taken the first (on a busy machine it may take a while).
        deadline = time.monotonic() + 10
        while "received SIGTERM; ending" not in job.output():
            if job.proc.poll() is not None or time.monotonic() > deadline:
                job.cleanup()
                fail("the launcher did not take the first SIGTERM:\n" + job.output())
            time.sleep(0.02)
        time.sleep(1)
        if job.proc.poll() is not None:
            fail("the launcher ended although mpirun, stopped, could not end the job")
        os.kill(job.proc.pid, signal.SIGTERM)
        t0 = time.monotonic()
        job.wait_end(limit=5)
        expect_output(job, r"shardrun: error: received SIGTERM again; killing mpirun and the ranks")
    else:
        job.wait_end(limit=20)
        expect_output(job, r"shardrun: error: mpirun did not end the job within 10 s; killing it "
                           r"and its ranks")
    took = time.monotonic() - t0
    if job.proc.returncode != -signal.SIGTERM:
        fail(f"the launcher did not die of SIGTERM: status {job.proc.returncode}")
    gone = expect_no_process_left(job)
    print(f"SIGTERM to the launcher with mpirun stopped"
          f"{', then a second SIGTERM' if second_signal else ''}: the launcher ended "
          f"{took:.2f} s later, every process gone {gone:.2f} s after")


def case_mpirun_sigkill(args, tmp):
    job = Job(args, tmp, timeout=600)
    job.wait_training()
    os.kill(mpirun_pid(job.token), signal.SIGKILL)
    t0 = time.monotonic()
    job.wait_end(limit=10)
    took = time.monotonic() - t0
    if job.proc.returncode == 0:
        fail("the launcher exited 0 although mpirun was killed")
    expect_output(job, r"shardrun: error: mpirun was killed by SIGKILL")
    gone = expect_no_process_left(job)
    print(f"SIGKILL to mpirun: the launcher ended {took:.2f} s later (status "
          f"{job.proc.returncode}), every process gone {gone:.2f} s after")


def case_rank_parent_sigkill(args, tmp):
    job = Job(args, tmp, timeout=600, shell=True)
    ranks = job.wait_training()
    parents = {}
    for rank, pid in ranks.items():
        with open(f"/proc/{pid}/stat") as f:
            parents[rank] = int(f.read().rsplit(")", 1)[1].split()[1])
    t0 = time.monotonic()
    for parent in parents.values():
        try:
            os.kill(parent, signal.SIGKILL)
        except ProcessLookupError:
            pass  # mpirun ended it after the first parent died
    while any(p in processes_with(job.token) for p in ranks.values()):
        if time.monotonic() - t0 > 5:
            job.cleanup()
            fail("the ranks outlived the process that started them by 5 s:\n" + job.output())
        time.sleep(0.02)
    took = time.monotonic() - t0
    job.wait_end(limit=10)
    expect_output(job, rf"shardrun: error: rank [01]: the process that started it \(pid "
                       rf"({parents[0]}|{parents[1]}), mpirun or its daemon\) has exited; ending "
                       r"this rank")
    gone = expect_no_process_left(job)
    print(f"SIGKILL to the ranks' parents: both ranks ended themselves {took:.2f} s later, "
          f"every process gone {gone:.2f} s after")


def case_rank_sigstop(args, tmp, direct=False):
    job = Job(args, tmp, timeout=3, direct=direct)
    ranks = job.wait_training()
    os.kill(ranks[1], signal.SIGSTOP)
    t0 = time.monotonic()
    # Rank 0 waits for rank 1 in a collective from within a step: measure its
    # CPU use (all threads) over 2 s, before the watchdog's 3 s are up.
    time.sleep(0.5)
    c0, w0 = cpu_seconds(ranks[0]), time.monotonic()
    time.sleep(2.0)
    c1, w1 = cpu_seconds(ranks[0]), time.monotonic()
    cpu = (c1 - c0) / (w1 - w0)
    job.wait_end(limit=30)
    took = time.monotonic() - t0
    if job.proc.returncode == 0:
        fail("the job exited 0 although rank 1 was stopped")
    line = expect_output(
        job, r"shardrun: error: rank 0: collective timeout at step \d+, (op \d+ \(\w+\)|"
             r"outside the plan's ops): \w+ #\d+ (of \d+ x \w+ )?has waited [\d.]+ s \(limit 3 s\) "
             r"for ranks that did not arrive: rank 1, which did not answer within 2 s")
    gone = expect_no_process_left(job)
    print(line)
    print(f"rank 1 stopped: rank 0 used {100 * cpu:.1f} % of a core while waiting; the job "
          f"ended {took:.2f} s after the stop (status {job.proc.returncode}), every process "
          f"gone {gone:.2f} s later")
    if cpu > 0.25:
        fail(f"rank 0 used {100 * cpu:.1f} % of a core while it waited for a stopped rank")


def case_rank_signal(args, tmp, sig):
    job = Job(args, tmp, timeout=600)
    ranks = job.wait_training()
    os.kill(ranks[1], sig)
    t0 = time.monotonic()
    job.wait_end(limit=30)
    took = time.monotonic() - t0
    if job.proc.returncode == 0:
        fail(f"the job exited 0 although rank 1 got {signal.Signals(sig).name}")
    if sig == signal.SIGKILL:
        pattern = (rf"shardrun: error: rank 1 \(pid {ranks[1]}\) died at step \d+, "
                   r"(op \d+ \(\w+\)|outside the plan's ops) without a word, which means "
                   r"signal 9 \(SIGKILL\)")
    else:
        pattern = (r"shardrun: error: rank 1 died of SIGSEGV at step \d+, "
                   r"(op \d+ \(\w+\)|outside the plan's ops)")
    line = expect_output(job, pattern)
    # Rank 0 was ended by mpirun (SIGTERM) as a consequence: not named.
    if re.search(r"rank 0 (\(pid|died)", job.output()):
        fail("rank 0, which mpirun ended after rank 1 died, is named too:\n" + job.output())
    gone = expect_no_process_left(job)
    print(line)
    print(f"{signal.Signals(sig).name} to rank 1: the job ended {took:.2f} s later "
          f"(status {job.proc.returncode}), every process gone {gone:.2f} s after that")


def expect_rank1_sigkill_ends_job(job, ranks, what, after_kill=None):
    """SIGKILL to rank 1 (then `after_kill()`, if given) ends the job within
    30 s, naming rank 1, with no process left; returns the line that names it."""
    os.kill(ranks[1], signal.SIGKILL)
    t0 = time.monotonic()
    if after_kill:
        after_kill()
    job.wait_end(limit=30)
    took = time.monotonic() - t0
    if job.proc.returncode == 0:
        fail(f"the job exited 0 although rank 1 was killed {what}")
    line = expect_output(job, rf"shardrun: error: rank 1 \(pid {ranks[1]}\) died at step \d+, "
                              r"(op \d+ \(\w+\)|outside the plan's ops) without a word, "
                              r"which means signal 9 \(SIGKILL\)")
    gone = expect_no_process_left(job)
    print(line)
    print(f"SIGKILL to rank 1 {what}: the job ended {took:.2f} s later (status "
          f"{job.proc.returncode}, bound 30 s), every process gone {gone:.2f} s after that")
    return line


def case_rank_sigkill_collective(args, tmp):
    """Rank 0 stopped, so rank 1 waits for it in a collective; rank 1 killed
    there, then rank 0 continued. Rank 0 stays stopped until rank 1 is dead:
    continued first, it could complete the collective and let rank 1 move on
    to a compute op before the kill lands."""
    job = Job(args, tmp, timeout=600)
    ranks = job.wait_training()
    os.kill(ranks[0], signal.SIGSTOP)
    # Rank 1 reaches the step's next collective within milliseconds and
    # waits there for rank 0.
    time.sleep(1.0)
    before = cpu_seconds(ranks[1])
    time.sleep(0.5)
    if cpu_seconds(ranks[1]) - before > 0.25:
        job.cleanup()
        fail("rank 1 is not waiting (it used a core while rank 0 was stopped)")
    line = expect_rank1_sigkill_ends_job(job, ranks, "while it waited in a collective",
                                         after_kill=lambda: os.kill(ranks[0], signal.SIGCONT))
    if "CollectiveWait" not in line and "outside the plan's ops" not in line:
        fail("rank 1 was not in a collective: " + line)


def case_rank_sigkill_save(args, tmp):
    """Rank 1 killed while it writes checkpoint step-8 (its writer is held
    3 s by SHARDRUN_FAULT_SAVE_DELAY_MS): step-4 stays complete and loadable,
    step-8 never exists, and resuming from the directory ends equal to a run
    that never stopped."""
    ck = os.path.join(tmp, "ck")
    env = dict(os.environ, SHARDRUN_FAULT_SAVE_DELAY_MS="3000")
    job = Job(args, tmp, timeout=600, env=env,
              extra=["--checkpoint-dir", ck, "--checkpoint-every", "4"])
    deadline = time.monotonic() + 60
    while True:
        names = os.listdir(ck) if os.path.isdir(ck) else []
        if (os.path.exists(os.path.join(ck, "step-4", "manifest")) and
                any(n.startswith(".step-8.partial-") for n in names)):
            break
        if job.proc.poll() is not None or time.monotonic() > deadline:
            job.cleanup()
            fail(f"no save of step 8 in progress after step-4 (found {names}):\n"
                 + job.output())
        time.sleep(0.02)
    ranks = rank_pids(job.token)
    if len(ranks) != 2:
        job.cleanup()
        fail(f"expected 2 ranks, found {ranks}")
    expect_rank1_sigkill_ends_job(job, ranks, "while it saved checkpoint step 8")
    complete = sorted(n for n in os.listdir(ck)
                      if os.path.exists(os.path.join(ck, n, "manifest")))
    if complete != ["step-4"]:
        fail(f"complete checkpoints after the kill: {complete}, expected ['step-4']")
    def run(*extra):
        r = subprocess.run([args.shardrun, args.plan, "--data", args.data, "--progress",
                            "off", *extra], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail("command failed: %s\n%s" % (" ".join(extra), r.stderr))
        return r
    straight_log, resumed_log = (os.path.join(tmp, n) for n in ("s.jsonl", "r.jsonl"))
    straight_onnx, resumed_onnx = (os.path.join(tmp, n) for n in ("s.onnx", "r.onnx"))
    run("--steps", "6", "--log", straight_log, "--export", straight_onnx)
    run("--steps", "6", "--resume", ck, "--log", resumed_log, "--export", resumed_onnx)
    def losses(path):
        with open(path) as f:
            return [re.search(r'"loss": ([^,]+)', l).group(1) for l in f]
    if losses(straight_log)[4:] != losses(resumed_log):
        fail(f"steps 5-6 after resuming from step-4: {losses(resumed_log)}, "
             f"a run that never stopped: {losses(straight_log)[4:]}")
    with open(straight_onnx, "rb") as a, open(resumed_onnx, "rb") as b:
        if a.read() != b.read():
            fail("resumed from step-4 to step 6, the model differs from a run that "
                 "never stopped")
    print("the earlier checkpoint step-4 was left complete; resumed from it to step 6: "
          "the losses and the model of a run that never stopped, bit for bit")


def case_job_pause(args, tmp):
    job = Job(args, tmp, timeout=3)
    ranks = job.wait_training()
    for pid in ranks.values():
        os.kill(pid, signal.SIGSTOP)
    time.sleep(6)
    for pid in ranks.values():
        os.kill(pid, signal.SIGCONT)
    before = log_lines(job.log)
    deadline = time.monotonic() + 20
    while log_lines(job.log) < before + 20:
        if job.proc.poll() is not None or time.monotonic() > deadline:
            job.cleanup()
            fail("the job did not go on after a pause longer than its collective "
                 "timeout:\n" + job.output())
        time.sleep(0.05)
    if "collective timeout" in job.output():
        fail("the watchdog fired for a pause of every rank:\n" + job.output())
    os.kill(job.proc.pid, signal.SIGTERM)
    job.wait_end(limit=20)
    expect_no_process_left(job)
    print(f"every rank stopped for 6 s with a 3 s collective timeout: training went on "
          f"({log_lines(job.log) - before} more steps logged)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--example", required=True, help="examples/cnn")
    ap.add_argument("--case", required=True)
    args = ap.parse_args()
    name = os.path.basename(os.path.normpath(args.example))
    # The directory's unique name is in every process's command line.
    with tempfile.TemporaryDirectory(prefix=f"shard-fault-{args.case}-") as tmp:
        args.plan = os.path.join(tmp, "plan")
        args.data = os.path.join(args.example, "data")
        subprocess.run([args.shardc, os.path.join(args.example, name + ".onnx"), "-o", args.plan,
                        "--optimizer", "sgd", "--lr", "0.01", "--world-size", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        cases = {
            "launcher-sigterm": lambda: case_launcher_signal(args, tmp, signal.SIGTERM),
            "launcher-sigint": lambda: case_launcher_signal(args, tmp, signal.SIGINT),
            "launcher-sigkill": lambda: case_launcher_sigkill(args, tmp),
            "launcher-sigkill-mpirun-stopped":
                lambda: case_launcher_sigkill_mpirun_stopped(args, tmp),
            "launcher-mpirun-stopped": lambda: case_launcher_mpirun_stopped(args, tmp, False),
            "launcher-second-signal": lambda: case_launcher_mpirun_stopped(args, tmp, True),
            "mpirun-sigkill": lambda: case_mpirun_sigkill(args, tmp),
            "rank-parent-sigkill": lambda: case_rank_parent_sigkill(args, tmp),
            "rank-sigstop": lambda: case_rank_sigstop(args, tmp),
            "direct-sigstop": lambda: case_rank_sigstop(args, tmp, direct=True),
            "rank-sigkill": lambda: case_rank_signal(args, tmp, signal.SIGKILL),
            "rank-sigsegv": lambda: case_rank_signal(args, tmp, signal.SIGSEGV),
            "rank-sigkill-collective": lambda: case_rank_sigkill_collective(args, tmp),
            "rank-sigkill-save": lambda: case_rank_sigkill_save(args, tmp),
            "job-pause": lambda: case_job_pause(args, tmp),
        }
        if args.case not in cases:
            fail(f"unknown case {args.case}; known: {', '.join(cases)}")
        cases[args.case]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
