#!/usr/bin/python3
"""A training job across two hosts, built on this machine: two network
namespaces joined by a veth pair, each with its own host name (a UTS
namespace), `mpirun --host` starting the second host's ranks through its
`plm_rsh_agent` (the part ssh plays on a cluster), ranks talking over TCP.
The file system is shared, as NFS would be on a cluster.

The job: examples/gpt, AdamW, ZeRO-3 over 4 ranks, 2 per host, a checkpoint
every 40 steps. Checked:

  straight  A run of S steps across the two hosts (the reference).
  ranks     Host B's two ranks SIGKILLed mid-run: mpirun ends the job within
            30 s with a non-zero exit naming a killed rank, no process is left
            on either host, and resuming across the two hosts from the newest
            complete checkpoint ends with the log and the model of the
            straight run, bit for bit.
  host      Every process of host B SIGKILLed (its mpirun daemon too: the
            host is gone): the same, the job restarted with the same command
            line (--auto-resume). Then host B stays gone: the checkpoint
            loads into 2 ranks on host A (ZeRO-1) as the same model.
  private   Host B sees another directory under --checkpoint-dir's path (its
            own file system): every rank stops before step 1 with an error
            saying the directory is not shared.

Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2's `ip` and
util-linux's `unshare`; where namespaces cannot be made it says why and exits
77 (skipped). Needs no Python packages."""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SUBNET = "10.213.7"
TIMINGS = {"step_ms", "samples_per_s", "samples_per_s_mean", "peak_rss_bytes",
           "checkpoint_ms"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def skip(reason):
    message = "SKIPPED: the two-host test needs network namespaces: " + reason
    print(message)
    print(message, file=sys.stderr)
    sys.exit(SKIP)


# The agent mpirun runs instead of ssh: `agent HOST COMMAND...` runs COMMAND
# through a shell on HOST, here inside HOST's namespaces with its host name.
# With SHARD_TEST_PRIVATE_DIR set, the second host mounts a file system of its
# own over that directory.
AGENT = """#!/bin/sh
while [ "${{1#-}}" != "$1" ]; do shift; done
host=$1; shift
case $host in
  {a_ip}) ns={a_ns}; name={a_name}; private= ;;
  {b_ip}) ns={b_ns}; name={b_name}; private=$SHARD_TEST_PRIVATE_DIR ;;
  *) echo "agent: unknown host $host" >&2; exit 255 ;;
esac
if [ -n "$private" ]; then
  exec ip netns exec "$ns" unshare --uts --mount sh -c \
    "hostname $name && mount -t tmpfs shard-test \\"$private\\" && $*"
fi
exec ip netns exec "$ns" unshare --uts sh -c "hostname $name && $*"
"""


class Hosts:
    """Two hosts: namespaces, a veth pair, addresses, the agent script."""

    def __init__(self, work):
        tag = str(os.getpid())
        self.ns = ["shard%sa" % tag, "shard%sb" % tag]
        self.ips = ["%s.1" % SUBNET, "%s.2" % SUBNET]
        self.names = ["shard-host-a", "shard-host-b"]
        self.made = []
        self.agent = os.path.join(work, "agent.sh")

    def ip(self, *args):
        r = subprocess.run(["ip", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise OSError("`ip %s`: %s" % (" ".join(args),
                                           (r.stderr or r.stdout).strip()))

    def create(self):
        if shutil.which("ip") is None:
            skip("`ip` (Debian package iproute2) is not installed")
        if shutil.which("unshare") is None:
            skip("`unshare` (Debian package util-linux) is not installed")
        veth = ["sv%sa" % os.getpid(), "sv%sb" % os.getpid()]
        try:
            for ns in self.ns:
                self.ip("netns", "add", ns)
                self.made.append(ns)
            self.ip("link", "add", veth[0], "type", "veth", "peer", "name",
                    veth[1])
            for ns, dev, addr in zip(self.ns, veth, self.ips):
                self.ip("link", "set", dev, "netns", ns)
                self.ip("-n", ns, "addr", "add", addr + "/24", "dev", dev)
                self.ip("-n", ns, "link", "set", dev, "up")
                self.ip("-n", ns, "link", "set", "lo", "up")
            r = subprocess.run(["ip", "netns", "exec", self.ns[0], "unshare",
                                "--uts", "--mount", "true"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise OSError("`unshare --uts --mount`: " + r.stderr.strip())
        except OSError as e:
            self.destroy()
            skip("%s (running as uid %d)" % (e, os.geteuid()))
        with open(self.agent, "w") as f:
            f.write(AGENT.format(a_ip=self.ips[0], a_ns=self.ns[0],
                                 a_name=self.names[0], b_ip=self.ips[1],
                                 b_ns=self.ns[1], b_name=self.names[1]))
        os.chmod(self.agent, 0o755)
        print("hosts: %s (%s, namespace %s) and %s (%s, namespace %s), "
              "joined by veth %s/%s" % (self.names[0], self.ips[0], self.ns[0],
                                        self.names[1], self.ips[1], self.ns[1],
                                        veth[0], veth[1]))

    def pids(self, host):
        r = subprocess.run(["ip", "netns", "pids", self.ns[host]],
                           capture_output=True, text=True)
        return [int(p) for p in r.stdout.split()]

    def kill_all(self, host):
        for pid in self.pids(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def destroy(self):
        for host in range(len(self.made)):
            self.kill_all(host)
        for ns in self.made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []


def rank_of(pid):
    """OMPI_COMM_WORLD_RANK of a process, or None."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(var.split(b"=", 1)[1])
    except OSError:
        pass
    return None


class Cluster:
    def __init__(self, args, hosts, work):
        self.args = args
        self.hosts = hosts
        self.work = work
        self.env = dict(os.environ)
        self.root = []
        if os.geteuid() == 0:
            self.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            self.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
            self.root = ["--allow-run-as-root"]

    def mpirun(self, shardrun_args, env=None, hosts=(0, 1)):
        """Starts `mpirun` on host a with 2 ranks on each of `hosts`;
        returns it."""
        cmd = (["mpirun", "--host",
                ",".join("%s:2" % self.hosts.ips[h] for h in hosts),
                "-np", str(2 * len(hosts))] + self.root +
               ["--mca", "plm_rsh_agent", self.hosts.agent,
                "--mca", "btl", "self,vader,tcp",
                "--mca", "btl_tcp_if_include", SUBNET + ".0/24",
                "--mca", "oob_tcp_if_include", SUBNET + ".0/24",
                "--mca", "mpi_yield_when_idle", "1",
                "--bind-to", "none",
                self.args.shardrun] + shardrun_args)
        # mpirun on host A, started the way the agent starts anything there.
        return subprocess.Popen([self.hosts.agent, self.hosts.ips[0],
                                 shlex.join(cmd)],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env=dict(self.env, **(env or {})),
                                start_new_session=True)

    def run(self, shardrun_args, env=None, expect_ok=True, timeout=300,
            hosts=(0, 1)):
        p = self.mpirun(shardrun_args, env, hosts)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.hosts.kill_all(0)
            self.hosts.kill_all(1)
            fail("the job did not end within %d s" % timeout)
        if expect_ok and p.returncode != 0:
            fail("the job failed (%d): %s\n%s" % (p.returncode,
                                                  " ".join(shardrun_args), out))
        self.expect_no_process_left("after " + " ".join(shardrun_args[:1]))
        return p.returncode, out

    def expect_no_process_left(self, when, limit=10.0):
        t0 = time.monotonic()
        while True:
            left = {h: self.hosts.pids(h) for h in (0, 1)}
            if not left[0] and not left[1]:
                return time.monotonic() - t0
            if time.monotonic() - t0 > limit:
                fail("processes left %s: host a %s, host b %s" %
                     (when, left[0], left[1]))
            time.sleep(0.05)


def read_log(path):
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMINGS}
                for line in f]


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shardc", required=True)
    parser.add_argument("--shardrun", required=True)
    parser.add_argument("--examples", required=True)
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        fail("mpirun (Debian package openmpi-bin) is not installed")
    work = tempfile.mkdtemp(prefix="shard-two-hosts-")
    hosts = Hosts(work)
    try:
        hosts.create()
        check(args, Cluster(args, hosts, work), work)
    finally:
        hosts.destroy()
        shutil.rmtree(work, ignore_errors=True)


def go_on_alone(args, cluster, work, ck, step_dir, common):
    """Host b stays gone: its checkpoint loads into 2 ranks on host a (ZeRO-1
    now) and holds the model the 4 ranks had, bit for bit."""
    step = step_dir[5:]
    ckpt = os.path.join(ck, step_dir)
    before = os.path.join(work, "at-save.onnx")
    cluster.run(common[:1] + ["--steps", step, "--resume", ckpt, "--export",
                              before, "--progress", "off"])
    plan2 = os.path.join(work, "gpt2.plan")
    r = subprocess.run([args.shardc, os.path.join(args.examples, "gpt",
                                                  "gpt.onnx"), "-o", plan2,
                        "--optimizer", "adamw", "--lr", "3e-3",
                        "--world-size", "2", "--zero-stage", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("shardc: " + r.stderr)
    alone = os.path.join(work, "alone.onnx")
    cluster.run([plan2, "--steps", step, "--resume", ckpt, "--export", alone,
                 "--progress", "off"], hosts=(0,))
    if not same_file(before, alone):
        fail("host: %s loaded by 2 ranks on host a exports another model than "
             "the 4 ranks across both hosts" % step_dir)
    print("host: %s (4 ranks, 2 hosts, ZeRO-3) loaded by 2 ranks on host a "
          "alone (ZeRO-1): the same model, bit for bit" % step_dir)


def check(args, cluster, work):
    gpt = os.path.join(args.examples, "gpt")
    data = os.path.join(gpt, "data")
    plan = os.path.join(work, "gpt4.plan")
    r = subprocess.run([args.shardc, os.path.join(gpt, "gpt.onnx"), "-o", plan,
                        "--optimizer", "adamw", "--lr", "3e-3",
                        "--world-size", "4", "--zero-stage", "3"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("shardc: " + r.stderr)
    steps, every = 400, 40
    common = [plan, "--data", data, "--steps", str(steps), "--progress", "off",
              "--seed", "3"]

    # The reference, and where each rank ran.
    straight_log = os.path.join(work, "straight.jsonl")
    straight = os.path.join(work, "straight.onnx")
    _, out = cluster.run(common + ["--log", straight_log, "--export", straight])
    log = read_log(straight_log)
    if len(log) != steps:
        fail("the straight run logged %d steps, not %d" % (len(log), steps))
    print("straight: %d steps of examples/gpt on 4 ranks across 2 hosts, "
          "final loss %s" % (steps, log[-1]["loss"]))

    for case in ("ranks", "host"):
        ck = os.path.join(work, "ck-" + case)
        run_log = os.path.join(work, case + ".jsonl")
        resumed = os.path.join(work, case + ".onnx")
        # "host" runs as a job a scheduler restarts: the same command line
        # twice, --auto-resume.
        restartable = common + ["--log", run_log, "--checkpoint-dir", ck,
                                "--checkpoint-every", str(every),
                                "--auto-resume", "--export", resumed]
        job = cluster.mpirun(restartable if case == "host" else
                             common + ["--log", run_log, "--checkpoint-dir", ck,
                                       "--checkpoint-every", str(every)])
        first = os.path.join(ck, "step-%d" % (2 * every), "manifest")
        deadline = time.monotonic() + 120
        while not os.path.exists(first):
            if job.poll() is not None or time.monotonic() > deadline:
                cluster.hosts.kill_all(0)
                cluster.hosts.kill_all(1)
                fail("%s: no checkpoint step-%d while the job ran:\n%s" %
                     (case, 2 * every, job.communicate()[0]))
            time.sleep(0.01)
        on_b = {pid: rank_of(pid) for pid in cluster.hosts.pids(1)}
        ranks_b = sorted(r for r in on_b.values() if r is not None)
        if ranks_b != [2, 3]:
            cluster.hosts.kill_all(0)
            cluster.hosts.kill_all(1)
            fail("%s: host b runs ranks %s, expected [2, 3]" % (case, ranks_b))
        victims = [p for p, r in on_b.items() if case == "host" or r is not None]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        try:
            out, _ = job.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.hosts.kill_all(0)
            cluster.hosts.kill_all(1)
            fail("%s: the job still ran 30 s after host b's %s were killed" %
                 (case, "processes" if case == "host" else "ranks"))
        took = time.monotonic() - t0
        if job.returncode == 0:
            fail("%s: the job exited 0 after host b's ranks were killed:\n%s" %
                 (case, out))
        # mpirun names a killed rank, or the host whose daemon it lost.
        if case == "ranks":
            named = [line for line in out.splitlines()
                     if re.search(r"process rank [23] with PID \d+ on node "
                                  + re.escape(cluster.hosts.ips[1]) +
                                  r" exited on signal 9", line)]
        else:
            # "ORTE has lost communication with a remote daemon ... on node
            # B", or, when mpirun first sees its agent process for host b
            # die, "ORTE was unable to reliably start one or more daemons",
            # most often next to the ranks' "Peer host: B" (one run in a
            # full suite printed it alone). Host b runs the job's only remote
            # daemon, so the latter names it too.
            named = [line for line in out.splitlines()
                     if cluster.hosts.ips[1] in line or
                     cluster.hosts.names[1] in line or
                     "unable to reliably start one or more daemons" in line]
        if not named:
            fail("%s: the job's output does not name the killed %s:\n%s" %
                 (case, "rank" if case == "ranks" else "host", out))
        if os.environ.get("SHARD_TEST_VERBOSE"):
            print(out)
        gone = cluster.expect_no_process_left("after killing host b (%s)" % case)
        done = sorted((n for n in os.listdir(ck) if n.startswith("step-") and
                       os.path.exists(os.path.join(ck, n, "manifest"))),
                      key=lambda n: int(n[5:]))
        what = ("ranks 2 and 3" if case == "ranks" else
                "%d processes (mpirun's daemon, ranks 2 and 3 among them)"
                % len(victims))
        print("%s: host b's %s SIGKILLed after checkpoint step-%d: the job "
              "ended %.2f s later (exit %d, bound 30 s), no process left on "
              "either host %.2f s after that; the output says: %s" %
              (case, what, 2 * every, took, job.returncode, gone,
               named[0].strip()))
        # Resume across the two hosts from the newest complete checkpoint.
        _, out = cluster.run(restartable if case == "host" else
                             common + ["--log", run_log, "--resume", ck,
                                       "--export", resumed])
        if "resuming from %s" % os.path.join(ck, done[-1]) not in out:
            fail("%s: the resumed run does not resume from %s:\n%s" %
                 (case, done[-1], out))
        if read_log(run_log) != log:
            fail("%s: the resumed log differs from the straight run's" % case)
        if not same_file(resumed, straight):
            fail("%s: resumed from %s, the model differs from the straight "
                 "run's" % (case, done[-1]))
        print("%s: resumed across the two hosts from %s to step %d (%s): log "
              "and model of the straight run, bit for bit" %
              (case, done[-1], steps, "the same command line again, "
               "--auto-resume" if case == "host" else "--resume"))
        if case == "host":
            go_on_alone(args, cluster, work, ck, done[-1], common)

    # A checkpoint directory that host b does not share.
    private = os.path.join(work, "ck-private")
    os.makedirs(private)
    rc, out = cluster.run(common + ["--checkpoint-dir", private,
                                    "--checkpoint-every", str(every)],
                          env={"SHARD_TEST_PRIVATE_DIR": private},
                          expect_ok=False)
    if rc == 0:
        fail("private: a run whose checkpoint directory host b does not "
             "share exited 0:\n" + out)
    lines = [line for line in out.splitlines() if "is not shared" in line]
    if not lines or "host %s" % cluster.hosts.names[1] not in out:
        fail("private: no error saying the directory is not shared and "
             "naming host b:\n" + out)
    if any(n.startswith("step-") for n in os.listdir(private)):
        fail("private: a checkpoint was written: %s" % os.listdir(private))
    print("private: host b mounts its own file system on --checkpoint-dir: "
          "exit %d before step 1; %s" % (rc, lines[0].strip()))


if __name__ == "__main__":
    main()
