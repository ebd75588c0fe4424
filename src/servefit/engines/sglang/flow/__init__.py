"""SGLang 0.5.10 onward: one shared flow, asking each release's rules (flow/rules.py:Rules).

Every release from 0.5.10 on runs the same steps, args.py (ServerArgs resolution: the CUDA-graph
config, the memory heuristic, the mamba radix-cache strategy, speculative decoding) and pools.py
(memory profiling and pool sizing: memory.py the state pool, alloc.py what the pools allocate,
logs.py what the engine prints); where releases differ, the flow asks the release's RULES.
`declare.declare` ties the flow to one release's rules and reads the release's flag table and
architecture list (engines/sglang/profile.py:declare). 0.5.9 is a profile of its own (v0_5_9/).
"""
