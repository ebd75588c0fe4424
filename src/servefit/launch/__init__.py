"""Supervised engine launches: preflight, one run directory per launch, live progress from the
engine's own log lines, readiness probes, crash capture, and stopping only what servefit started.

    preflight.py   plan the command, check GPUs (NVML), the port and CUDA_VISIBLE_DEVICES
    command.py     the user's launch command -> the argv servefit executes, engine, host, port
    rundir.py      runs/<UTC time>-<id>/: engine.log, argv.json, env.json, plan.json, run.json
    events.py      engine log lines -> start-up stages and the numbers they print
    probe.py       readiness: /health, /v1/models, one tiny chat completion
    supervisor.py  starts the engine in its own process group and watches it to the end
    watch.py       `python -m servefit.launch.watch RUN_DIR`: the supervisor as a detached process
    stop.py        SIGTERM -> grace -> SIGKILL to the run's process group; port and GPU release
    procs.py       /proc: process identity (start time, run marker), group members
    diagnose.py    the doctor on the run's log, or the log's last lines when it is unavailable
    progress.py    rich rendering of a run while it starts
"""
