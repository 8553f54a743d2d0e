#!/usr/bin/env python3
"""Runs a test command so that nothing it starts outlives it, and a hang ends.

Usage: scripts/test/reap.py [--timeout SECONDS] [--grace SECONDS] -- COMMAND [ARG...]

This process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the
command starts and leaves (a relay, a PostgreSQL server that pg_ctl detached, a sandbox) is handed
to it when its parent dies, crashed test processes included. When the command exits, what it left
has `--grace` seconds (default 15) to end by itself (a test process's clusters get an immediate
shutdown at exit); whatever is still running then is named, killed, and fails the run. After
`--timeout` seconds (default 1800, a bound on a hang, not on a slow run) the command and everything
under it are killed and the run fails with status 124. The command gets a temporary directory of its
own (TMPDIR), removed when it and what it left have ended: the keys, configuration files and logs
its tests write there go with the batch instead of piling up in /tmp.

Exit status: the command's; 1 when it passed but left a process behind; 124 after the timeout.
"""
import argparse
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36
name = "reap.py"


def say(text):
    print(f"{name}: {text}", file=sys.stderr, flush=True)


def descendants(root):
    """The live processes under `root` (zombies left out), by walking /proc's parent links."""
    children = {}
    states = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, state, ppid = int(entry), fields[0], int(fields[1])
        states[pid] = state
        children.setdefault(ppid, []).append(pid)
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop()
        queue.extend(children.get(pid, []))
        if states.get(pid) != "Z":
            found.append(pid)
    return found


def describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            text = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        text = "?"
    return f"{pid} {text[:200]}"


def reap_zombies(command_pid):
    """Reaps every exited child; returns the command's exit status once it is among them."""
    status = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == command_pid:
            status = os.waitstatus_to_exitcode(raw)
            status = 128 - status if status < 0 else status


def kill_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main():
    parser = argparse.ArgumentParser(prog=name, description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--grace", type=float, default=15)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command given")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        say(f"cannot become a child subreaper: {os.strerror(ctypes.get_errno())}")
        return 1
    me = os.getpid()
    scratch = tempfile.mkdtemp(prefix="push-relay-batch-")
    os.chmod(scratch, 0o1777)  # as /tmp: tests run commands as another user (nobody) on files in it
    command_pid = os.fork()
    if command_pid == 0:
        try:
            os.environ["TMPDIR"] = scratch
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    forward = lambda sig, _frame: kill_all([command_pid], sig)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    deadline = time.monotonic() + options.timeout
    status = None
    while status is None:
        status = reap_zombies(command_pid)
        if status is None and time.monotonic() > deadline:
            hung = descendants(me)
            say(f"{' '.join(command)} still running after {options.timeout:.0f} s; killing it and {len(hung) - 1} more:")
            for pid in hung:
                say(f"    {describe(pid)}")
            kill_all(hung, signal.SIGKILL)
            status = 124
            break
        time.sleep(0.2)

    # What the command left: the time to end by itself, then named and killed.
    grace_end = time.monotonic() + options.grace
    while descendants(me) and time.monotonic() < grace_end:
        reap_zombies(command_pid)
        time.sleep(0.2)
    left = descendants(me)
    if left:
        say(f"{' '.join(command)} left {len(left)} process(es) running {options.grace:.0f} s after it ended:")
        for pid in left:
            say(f"    {describe(pid)}")
        kill_all(left, signal.SIGTERM)
        end = time.monotonic() + 5
        while descendants(me) and time.monotonic() < end:
            reap_zombies(command_pid)
            time.sleep(0.2)
        kill_all(descendants(me), signal.SIGKILL)
        time.sleep(0.2)
        reap_zombies(command_pid)
        if status == 0:
            status = 1
    shutil.rmtree(scratch, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
