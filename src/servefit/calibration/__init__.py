"""servefit learns the machine: what real engine starts measured, kept to plan the next ones.

A start's measured terms (free memory before the weights, the weights, vLLM's available KV
memory) are recorded by `servefit doctor LOG` and `servefit launch` as one JSON entry each
(entry.py) in the calibration store (store.py; docs/calibration.md). plan, explain and fit look
for the entry of the same engine release, GPU, model and parallel layout (match.py) and plan
with its figures (apply.py): the same launch re-planned is then exact, and a nearby one moves
only by what servefit models between the two.

The planner stays a pure function: a calibration enters a PlanRequest as measured inputs
(engines/base.py:Measured), never as state the profiles read.
"""
