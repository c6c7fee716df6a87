# minicoder command supervisor: PID 1 of a run's command container.
#
# The host sends one JSON request per line on stdin:
#   {"id": N, "argv": [...], "cwd": "/workspace/...", "env": {...},
#    "timeout_ms": N, "spool_limit": N}
# and reads frames on stdout: 1 byte kind, 4 bytes big-endian length, payload.
#   R  ready (payload: supervisor version)
#   O  stdout bytes of the running command
#   E  stderr bytes of the running command
#   X  exit (payload: JSON)
# While a command runs, the host may send {"stop": N, "reason": "..."}: the
# command is killed at once and its exit frame says "stopped" with the reason.
# If stdin closes at any time (the host process is gone, even killed with
# SIGKILL), every process is killed and the supervisor exits, which stops the
# container: nothing keeps running for an owner that is not there.
# After every command, whatever the outcome, every other process in the
# container is killed (kill(-1, SIGKILL) spares only PID 1) and reaped, and
# /tmp, the home directory and /dev/shm are emptied, so nothing a command
# started or wrote outside /workspace is seen by the next one.
# It is passed on the command line by the host binary, so the image needs only
# python3; it runs as the unprivileged sandbox user like the commands.
import json, os, select, signal, struct, sys, time

VERSION = b"minicoder-supervisor 1"
SCRUB = ("/tmp", os.environ.get("HOME", "/home/sandbox"), "/dev/shm")


def frame(kind, payload):
    data = kind + struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def undumpable():
    # No process of the same uid may ptrace PID 1 or read its memory.
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass


def kill_all():
    """Kill and reap every process but this one; repeat until none is left.

    Returns False if some process could not be removed within 5 s (the host
    then replaces the whole container)."""
    give_up = time.monotonic() + 5
    while time.monotonic() < give_up:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        reaped = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if time.monotonic() > give_up:
                    return False
                time.sleep(0.0005)
                continue
            reaped = True
        if not reaped and not others_alive():
            return True
    return False


def others_alive():
    me = str(os.getpid())
    for name in os.listdir("/proc"):
        if name.isdigit() and name != me:
            return True
    return False


def scrub(path):
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                scrub(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def spawn(req, out_w, err_w):
    argv = req["argv"]
    env = req.get("env") or {}
    cwd = req.get("cwd") or "/workspace"
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")  # the command, never PID 1, dies first
            except OSError:
                pass
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 65536)
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        except BaseException as e:
            try:
                os.write(2, ("minicoder: cannot start command: %s\n" % e).encode())
            finally:
                os._exit(127)
    return pid


PENDING = [b""]


def owner_gone():
    kill_all()
    os._exit(0)


def read_stdin():
    """Reads what the host sent while a command runs; a stop request for
    it returns its reason. End of input means the owner is gone."""
    try:
        chunk = os.read(0, 65536)
    except InterruptedError:
        return None
    except OSError:
        chunk = b""
    if not chunk:
        owner_gone()
    PENDING[0] += chunk
    stop = None
    keep = []
    for line in PENDING[0].split(b"\n")[:-1]:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and "stop" in msg:
            stop = str(msg.get("reason") or "stopped by the host")
        elif line.strip():
            keep.append(line)
    rest = PENDING[0].split(b"\n")[-1]
    PENDING[0] = b"".join(l + b"\n" for l in keep) + rest
    return stop


def run(req, wake_r):
    started = time.monotonic()
    deadline = started + req.get("timeout_ms", 60000) / 1000.0
    limit = req.get("spool_limit", 64 << 20)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = spawn(req, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    streams = {out_r: b"O", err_r: b"E"}
    totals = {b"O": 0, b"E": 0}
    status = None
    timed_out = False
    stopped = None

    def pump(fd):
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            del streams[fd]
            os.close(fd)
            return
        kind = streams[fd]
        sent = totals[kind]
        totals[kind] = sent + len(chunk)
        if sent < limit:
            frame(kind, chunk[: limit - sent])

    while status is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(list(streams) + [wake_r, 0], [], [], remaining)
        for fd in ready:
            if fd == 0:
                stopped = read_stdin()
            elif fd == wake_r:
                try:
                    os.read(wake_r, 512)
                except OSError:
                    pass
            else:
                pump(fd)
        if stopped is not None:
            break
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
    # The command is over: nothing it started may outlive it.
    clean = kill_all()
    if status is None:
        status = 9  # killed by SIGKILL on timeout or stop
    for fd in list(streams):
        while fd in streams:
            pump(fd)
    for path in SCRUB:
        scrub(path)
    result = {
        "id": req.get("id"),
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "stopped": stopped,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "stdout_bytes": totals[b"O"],
        "stderr_bytes": totals[b"E"],
        "clean": clean,
    }
    return result


def main():
    undumpable()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    frame(b"R", VERSION)
    while True:
        while b"\n" not in PENDING[0]:
            try:
                chunk = os.read(0, 65536)
            except InterruptedError:
                continue
            if not chunk:
                kill_all()
                return
            PENDING[0] += chunk
        line, PENDING[0] = PENDING[0].split(b"\n", 1)
        if not line.strip():
            continue
        try:
            if "stop" in json.loads(line):
                continue  # for a command already over
        except (ValueError, TypeError):
            pass
        try:
            req = json.loads(line)
            result = run(req, wake_r)
        except Exception as e:
            kill_all()
            result = {"id": None, "error": "%s: %s" % (type(e).__name__, e)}
        frame(b"X", json.dumps(result).encode())


if __name__ == "__main__":
    main()
