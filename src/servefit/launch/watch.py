"""`python -m servefit.launch.watch RUN_DIR`: the supervisor as its own process.

`servefit launch` starts this detached (its own session, no terminal), so the engine keeps a
parent that records its exit status after the terminal or the ssh session that launched it is
gone. Its own output goes to the run's supervisor.log. What to execute (schema.LaunchSpec, with
the real values of the secrets that the run's files hold redacted) arrives as JSON on its
standard input.
"""

from __future__ import annotations

import signal
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from servefit.launch.auth import launch_redactor
    from servefit.launch.rundir import RunDir
    from servefit.launch.schema import LaunchSpec
    from servefit.launch.supervisor import Supervisor

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m servefit.launch.watch RUN_DIR < SPEC_JSON", file=sys.stderr)
        return 2
    spec = LaunchSpec.model_validate_json(sys.stdin.buffer.read())
    engine = RunDir(args[0]).read().engine
    run = RunDir(args[0], spec=spec, redactor=launch_redactor(engine, [spec.argv], spec.env))
    # A hang-up of the terminal that started servefit must not end the supervision.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def _terminated(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminated)
    try:
        Supervisor(run).run()
    except SystemExit:
        _note(run, "the supervisor was terminated; the engine keeps running without one")
        raise
    except BaseException as exc:
        _note(run, f"the supervisor failed: {type(exc).__name__}: {exc}")
        raise
    return 0


def _note(run: object, message: str) -> None:
    try:
        with run.update() as rec:  # type: ignore[attr-defined]
            if not rec.terminal:
                rec.message = message
            rec.timings.ended = rec.timings.ended or (time.time() if rec.terminal else None)
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
