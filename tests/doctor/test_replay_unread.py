"""The replay says which measured figure the log did not print (and so was modelled)."""

from __future__ import annotations

from servefit.doctor.launches import read_log
from servefit.doctor.replay import replay
from tests.groundtruth import GT

# 2x RTX 3090, vLLM, MTP: the excerpt prints the KV cache size but neither the weights nor the
# available memory (cases.jsonl notes: "294/295 print no available memory")
CLUB294 = GT / "vllm_qwen36_27b_int4_2x3090_mtp_club294.txt"


def test_a_vllm_log_without_its_memory_lines_says_so():
    launch = read_log(str(CLUB294)).launches[-1]
    rep, _, _ = replay(launch, model="Qwen/Qwen3.6-27B", gpu="RTX 3090")
    assert rep is not None and not rep.calibrated
    assert 'not in the log: "Model loading took"; weights modelled from the config' in rep.notes
    assert (
        'not in the log: "Available KV cache memory"; the profiling run is servefit\'s model'
        in rep.notes
    )
