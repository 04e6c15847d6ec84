"""The plugin contract: registration, duplicates, unknown names, entry points, and cheap imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.hookspecs import hookimpl
from harness.plugins import get_plugin_manager
from harness.plugins.registry import PluginError, Registry


def test_builtins_register_through_hooks():
    plugins = get_plugin_manager(autoload=False)
    assert "math" in plugins["task"]
    assert "grpo" in plugins["trainer"]
    assert "best-of-k" in plugins["searcher"]
    assert {"grpo", "dr_grpo"} <= set(plugins["advantage"].names())
    assert {"smollm2-135m", "tiny-random"} <= set(plugins["model"].names())
    assert plugins["task"].get("math").plugin == "builtin:harness.tasks"
    assert "vspo" in plugins["trainer"]
    assert set(plugins["behaviour"].names()) >= {"expertise", "confidence", "conciseness", "robustness"}
    assert plugins["behaviour"].get("expertise").plugin == "builtin:harness.tasks"


def test_unknown_name_lists_available():
    plugins = get_plugin_manager(autoload=False)
    with pytest.raises(PluginError) as err:
        plugins["trainer"].get("ppo")
    message = str(err.value)
    assert "unknown trainer 'ppo'" in message and "grpo" in message and "\n" not in message


class _Duplicate:
    @hookimpl
    def harness_register_tasks(self, registry):
        registry.add("math", "nowhere:Nothing", "a second math")


def test_duplicate_name_names_both_plugins():
    with pytest.raises(PluginError) as err:
        get_plugin_manager(extra_plugins=(_Duplicate(),), autoload=False)
    message = str(err.value)
    assert "duplicate task 'math'" in message and "builtin:harness.tasks" in message


def test_registry_lazy_factory_error_is_one_line():
    registry = Registry("task")
    registry.current_plugin = "someplugin"
    registry.add("broken", "no_such_module_xyz:Task")
    with pytest.raises(PluginError) as err:
        registry.get("broken").create()
    assert "someplugin" in str(err.value) and "\n" not in str(err.value)


def test_misspelt_hook_fails_loudly():
    class Misspelt:
        @hookimpl
        def harness_register_taskz(self, registry):
            pass

    with pytest.raises(Exception, match="harness_register_taskz"):
        get_plugin_manager(extra_plugins=(Misspelt(),), autoload=False)


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["run", "--help"]])
def test_cli_listing_does_not_import_torch(argv):
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'math_verify') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_cli_unknown_task_is_one_line_error():
    result = subprocess.run([sys.executable, "-m", "harness", "run", "--task", "nope", "--model", "tiny-random"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("harness: error: unknown task 'nope'; available:") and "math" in lines[-1]
    assert "torch" not in result.stderr  # failed before anything heavy was loaded


def test_cli_bad_option_is_one_line_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "tiny-random", "--out", str(tmp_path),
                             "--set", "trainer.lrr=1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown option(s) lrr" in result.stderr.strip().splitlines()[-1]
    assert not any(tmp_path.iterdir())  # refused before a run folder was made


def test_a_family_name_resolves_members():
    registry = Registry("task")
    registry.current_plugin = "bridge"
    registry.add("rg:", lambda member, **options: (member, options), "a bridge")
    entry = registry.get("rg:maze")
    assert entry.name == "rg:maze" and entry.plugin == "bridge"
    assert entry.create(size=3) == ("maze", {"size": 3})
    with pytest.raises(PluginError, match=r"available: rg:<name>"):
        registry.get("rg")


def test_cli_unknown_task_option_is_one_line_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "tiny-random", "--out", str(tmp_path),
                             "--set", "task.bogus=1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("harness: error: task 'math': ")
    assert "bogus" in result.stderr and not any(tmp_path.iterdir())
