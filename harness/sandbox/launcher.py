"""The sandbox's side: a lean server, ``python -I -S launcher.py``, started by harness.sandbox and never imported
by it. Standard library only.

The server warms up once (the modules below, and those programs commonly import), then forks one child per run:
forking a warm, small interpreter costs about a millisecond where starting one costs ten and more. It never runs
untrusted code itself. Its stdin is a SOCK_SEQPACKET socket to the harness, carrying two kinds of message:
  R + two descriptors  run a job: read it (marshal; the harness is the only writer) from the first, write records
                       on the second; the reply is the run's pid
  K <pid>              kill that run's process group, if it is a live child (it reaps its children itself, so the
                       pid cannot have been reused)
End of file on the socket (the harness is gone): kill every live run, exit.

Records are lines ``<nonce> <kind> [fields]``; the nonce comes with the job, so nothing the program prints can pass
for a record, and the harness counts a test as passed only on a ``T <i> 1`` record, and a run as complete only on
the ``D`` sentinel written after the last test. Kinds: W (an isolation feature is missing), S (the program is about
to start), L (the program failed to load), O (what the program printed for stdin i, in stdio mode), T (one test:
1 passed or, in stdio mode, ran to completion), D (done), X (how the namespace's init ended: exit status, 128 + n
for signal n), E (the sandbox itself failed).

A run: its own session; unshare the namespaces (as root); fork the pid namespace's init; make the filesystem
read-only except a private size-capped /tmp that becomes the working directory; set the rlimits; drop to the sandbox
uid; arm the parent-death signal; run the program and its tests. Killing the run's first process kills the init by
the parent-death signal, and with it everything in its pid namespace.
"""

import _signal  # not `signal`: that one imports enum
import ctypes
import io
import marshal
import os
import resource
import select
import socket
import sys

CLONE = {"mount": 0x00020000, "uts": 0x04000000, "ipc": 0x08000000, "pid": 0x20000000, "net": 0x40000000}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
# Per-mount flags a bind remount must restate, or it clears them.
MOUNT_FLAGS = {b"nosuid": MS_NOSUID, b"nodev": MS_NODEV, b"noexec": MS_NOEXEC, b"noatime": 1024,
               b"nodiratime": 2048, b"relatime": 1 << 21, b"strictatime": 1 << 24}
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, SIGKILL = 1, 38, 9
# Imported once here, so that runs which import them find them loaded (not `random`: every run would inherit the
# same random state).
WARM = ("typing", "re", "collections", "math", "itertools", "functools", "heapq", "bisect", "string", "copy")

# Bound now, before any untrusted code runs: a program that rebinds builtins or patches modules cannot change how
# the runner compiles, executes or reports. (Code that walks the interpreter's own frames can; see harness.sandbox.)
_compile, _exec, _dict, _enumerate, _type, _str, _open = compile, exec, dict, enumerate, type, str, open
_encode, _write, _exit, _isinstance = str.encode, os.write, os._exit, isinstance
_BaseException, _MemoryError, _SystemExit = BaseException, MemoryError, SystemExit
_settrace, _setprofile = sys.settrace, sys.setprofile


def serve() -> None:
    for name in WARM:
        __import__(name)
    escape("warm")  # loads the unicode_escape codec once, not in every run that reports an error
    libc = ctypes.CDLL(None, use_errno=True)
    control = socket.socket(fileno=0)
    live: set[int] = set()
    while True:
        ready, _, _ = select.select([control], [], [], 1.0)
        while live:  # reap finished runs; a pid stays ours (and unreusable) until reaped here
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            live.discard(pid)
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 64, 2)
        if not message:  # the harness is gone
            for pid in live:
                quietly(os.killpg, pid, SIGKILL)
            _exit(0)
        if message == b"R" and len(fds) == 2:
            server = os.getpid()
            pid = os.fork()
            if pid == 0:
                control.close()  # first: the program must never reach the server
                libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
                if os.getppid() != server:
                    _exit(71)
                run_job(libc, *fds)
            live.add(pid)
            control.send(b"%d" % pid)
        elif message.startswith(b"K ") and int(message[2:]) in live:
            quietly(os.killpg, int(message[2:]), SIGKILL)
        for fd in fds:
            os.close(fd)


def run_job(libc, job_fd: int, channel: int) -> None:
    os.setsid()  # its own session and process group: what a kill takes down
    with open(job_fd, "rb") as f:
        job = marshal.loads(f.read())
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # the program reads nothing and whatever it prints is dropped at the descriptor
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    nonce = job["nonce"]

    def send(*fields: bytes) -> None:
        _write(channel, b" ".join((nonce, *fields)) + b"\n")

    try:
        start(libc, job, channel, send)
    except _BaseException as exc:  # a failure of the sandbox, not of the program: say so and stop
        send(b"E", escape(f"{_type(exc).__name__}: {exc}"))
    _exit(70)


def start(libc, job: dict, channel: int, send) -> None:
    missing = []
    for name in job["namespaces"]:
        if libc.unshare(CLONE[name]) != 0:
            missing.append(name)
            send(b"W", name.encode(), escape(os.strerror(ctypes.get_errno())))
    alive = None
    if "pid" in job["namespaces"] and "pid" not in missing:
        alive, parent_end = os.pipe()
        pid = os.fork()  # the child is pid 1 of the new namespace: when it dies, the kernel kills the rest
        if pid:
            os.close(alive)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            send(b"X", b"%d" % (code if code >= 0 else 128 - code))
            _exit(0)
        os.close(parent_end)
    if "mount" in job["namespaces"] and "mount" not in missing:
        workdir = isolate_files(libc, job, send, "pid" not in missing)
    else:  # no private /tmp: a fresh folder of its own, removed when its tests are done
        import tempfile

        workdir = tempfile.mkdtemp(prefix="vh-sandbox-")
        if job["uid"] is not None:
            os.chown(workdir, job["uid"], job["uid"])
    os.chdir(workdir)
    set_limits(job)
    if job["uid"] is not None:
        os.setgroups([])
        os.setresgid(job["uid"], job["uid"], job["uid"])
        os.setresuid(job["uid"], job["uid"], job["uid"])
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no setuid binary can give privileges back
    if alive is not None:
        # Armed after the uid change (which clears it). If the parent died before this, the pipe says so.
        libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        os.set_blocking(alive, False)
        try:
            if os.read(alive, 1) == b"":
                _exit(71)
        except BlockingIOError:
            pass
        os.close(alive)
    send(b"S")
    if job["stdio"]:
        run_stdio(job["program"], job["tests"], job["output_cap"], send)
    else:
        run(job["program"], job["tests"], send)
    send(b"D")
    if workdir != "/tmp":
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    _exit(0)  # now: no atexit handlers, no waiting for the program's threads


def isolate_files(libc, job: dict, send, own_proc: bool) -> str:
    """Inside the new mount namespace: every mount read-only, a private tmpfs at /tmp, a fresh /proc."""

    def mount(source, target, fstype, flags, data=None) -> None:
        if libc.mount(source, target, fstype, flags, data) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), target.decode(errors="replace"))

    mount(None, b"/", None, MS_REC | MS_PRIVATE)  # first: nothing done below may propagate to the host
    with open("/proc/self/mountinfo", "rb") as f:
        lines = f.read().splitlines()
    for line in lines:
        fields = line.split(b" ")
        target = unoctal(fields[4])
        flags = sum(MOUNT_FLAGS.get(o, 0) for o in fields[5].split(b","))
        try:  # MS_BIND makes this a per-mount change: the host's mount (and the superblock) stay writable
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if target == b"/":
                send(b"W", b"readonly", escape(str(exc)))
    uid = 0 if job["uid"] is None else job["uid"]
    mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV,
          b"size=%dk,nr_inodes=4096,mode=0700,uid=%d,gid=%d" % (job["tmp_kb"], uid, uid))
    if own_proc:
        mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in job["hide"]:
        if not os.path.exists(path):  # under /tmp, say: the private tmpfs above already hides it
            continue
        try:
            mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k,mode=0555")
        except OSError as exc:
            send(b"W", b"hide", escape(str(exc)))
    return "/tmp"


def unoctal(path: bytes) -> bytes:
    """mountinfo writes a space as \\040 (and a backslash, tab, newline likewise)."""
    first, *rest = path.split(b"\\")
    return first + b"".join(bytes([int(part[:3], 8)]) + part[3:] for part in rest)


def set_limits(job: dict) -> None:
    memory = job["memory_mb"] << 20
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_DATA, memory),
                         (resource.RLIMIT_FSIZE, job["file_mb"] << 20), (resource.RLIMIT_NPROC, job["processes"]),
                         (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    # CPU seconds: SIGXCPU at the soft limit, SIGKILL a second later. The harness's wall clock usually acts first.
    resource.setrlimit(resource.RLIMIT_CPU, (job["cpu_s"], job["cpu_s"] + 1))


def run(program: str, tests: list, send) -> None:
    """The program once, then each test in a copy of its namespace with pristine builtins: rebinding a builtin
    (say ``sorted``) can change what the program computes, never what a test expects."""
    builtins = _dict(__builtins__.__dict__ if _type(__builtins__) is not _dict else __builtins__)
    namespace = {"__name__": "__program__", "__builtins__": __builtins__}  # not __main__: demo blocks stay off
    try:
        _exec(_compile(program, "<program>", "exec"), namespace)
    except _BaseException as exc:
        send(b"L", escape(describe(exc)))
        return
    for i, test in _enumerate(tests):
        scope = _dict(namespace)
        scope["__builtins__"] = _dict(builtins)
        _settrace(None)  # a trace function could skip a test's assert lines
        _setprofile(None)
        try:
            _exec(_compile(test, f"<test {i}>", "exec"), scope)
        except _BaseException as exc:
            send(b"T", b"%d" % i, b"0", escape(describe(exc)))
        else:
            send(b"T", b"%d" % i, b"1", b"")


def run_stdio(program: str, inputs: list, cap: int, send) -> None:
    """The program as a script (``__name__ == "__main__"``), once per input, with that input as its stdin (a real
    file at descriptor 0, so ``open(0)`` works too) and its stdout captured from descriptor 1, at most ``cap``
    bytes. The harness compares outputs: the expected ones never enter the sandbox."""
    builtins = _dict(__builtins__.__dict__ if _type(__builtins__) is not _dict else __builtins__)
    try:
        code = _compile(program, "<program>", "exec")
    except _BaseException as exc:
        send(b"L", escape(describe(exc)))
        return
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)  # output past RLIMIT_FSIZE fails the write, not the run
    for i, text in _enumerate(inputs):
        stdin, stdout = _anonymous_file(_encode(text, "utf-8", "surrogateescape")), _anonymous_file(b"")
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        sys.stdin = _open(0, encoding="utf-8", closefd=False)  # the program's, for this input
        # write_through, as Python's own stdout: print() and sys.stdout.buffer.write() keep their order
        sys.stdout = writer = io.TextIOWrapper(_open(1, "wb", closefd=False), "utf-8", write_through=True)
        ok, error = True, ""
        try:
            _exec(code, {"__name__": "__main__", "__builtins__": _dict(builtins)})
        except _SystemExit as exc:
            ok = exc.code is None or (_type(exc.code) is int and exc.code == 0)
            error = "" if ok else describe(exc)
        except _BaseException as exc:
            ok, error = False, describe(exc)
        flushed = quietly(writer.flush)
        send(b"O", b"%d" % i, escape(os.pread(stdout, cap, 0).decode("utf-8", "replace")))
        send(b"T", b"%d" % i, b"1" if ok and flushed else b"0", escape(error or ("" if flushed else "flush failed")))
        quietly(os.close, stdin)  # fails when the program closed descriptor 0 or 1 and the file had landed there
        quietly(os.close, stdout)


def quietly(function, *args) -> bool:
    try:
        function(*args)
    except _BaseException:
        return False
    return True


def _anonymous_file(content: bytes) -> int:
    fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)  # in the private /tmp; gone when closed
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception whose __str__ may be hostile; at most 300 characters."""
    name = _type(exc).__name__ if _type(_type(exc).__name__) is _str else "?"
    if _isinstance(exc, _MemoryError):
        return "MemoryError"
    try:
        message = _str.__str__(_str(exc))
    except _BaseException:
        message = "<unprintable>"
    return (f"{name}: {message}" if message else name)[:300]


def escape(text: str) -> bytes:
    """One line of ASCII, whatever the text: the channel is line-based."""
    return _encode(_str.__str__(text), "unicode_escape")


if __name__ == "__main__":
    serve()
