"""launch/diagnose.py: the doctor is handed the launch as the engine ran it, its environment
(env.json, what servefit set for the engine) in front of the command."""

from __future__ import annotations

import json
import shlex

from servefit.engines.command import parse_launch_command
from servefit.launch.diagnose import _with_env
from servefit.launch.rundir import RunDir

COMMAND = "vllm serve /models/qwen3-tiny --max-model-len 4096"


def test_the_environment_servefit_set_goes_in_front_of_the_command(tmp_path):
    run = RunDir(tmp_path)
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "***a1b2", "NOTE": "two words"}
    run.env_path.write_text(json.dumps(env), encoding="utf-8")
    command = _with_env(run, COMMAND)
    parsed = parse_launch_command(command)
    assert parsed.env == env  # read back by the doctor's own command reader
    assert parsed.argv == shlex.split(COMMAND)[2:]


def test_without_a_readable_env_json_the_command_is_unchanged(tmp_path):
    run = RunDir(tmp_path)
    assert _with_env(run, COMMAND) == COMMAND  # no env.json
    run.env_path.write_text("{torn", encoding="utf-8")
    assert _with_env(run, COMMAND) == COMMAND
    run.env_path.write_text("[1, 2]", encoding="utf-8")
    assert _with_env(run, COMMAND) == COMMAND
