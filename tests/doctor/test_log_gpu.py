"""The GPU read from a vLLM log (doctor/vllm.py, the MoE config line), so the replay needs no
--gpu: vllm_qwen3next_80b_instruct_2xh200_tp2_v0102 prints
"Using configuration from .../E=512,N=256,device_name=NVIDIA_H200.json for MoE layer."."""

from __future__ import annotations

from servefit.doctor.diagnose import diagnose
from servefit.doctor.launches import read_log
from tests.groundtruth import GT

H200 = GT / "vllm_qwen3next_80b_instruct_2xh200_tp2_v0102.txt"


def test_the_moe_config_line_names_the_gpu():
    assert "device_name=NVIDIA_H200.json for MoE layer" in H200.read_text()
    assert read_log(str(H200)).launches[-1].gpu == "NVIDIA H200"


def test_the_replay_runs_on_it_without_gpu():
    report = diagnose(read_log(str(H200)), model="Qwen/Qwen3-Next-80B-A3B-Thinking")
    rep = report.replay
    assert rep is not None and rep.gpu == "NVIDIA H200 141GB"
    # "GPU KV cache size: 973,760 tokens" (the accuracy table's doctor figure)
    assert rep.kv_tokens == 973760


def test_dtype_and_block_shape_suffixes_are_not_part_of_the_name():
    from servefit.doctor.launches import read_log as read

    line = (
        "INFO 07-06 22:50:40 [fused_moe.py:720] Using configuration from /x/configs/"
        "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json"
        " for MoE layer."
    )
    assert read([line]).launches[-1].gpu == "NVIDIA H100 80GB HBM3"
