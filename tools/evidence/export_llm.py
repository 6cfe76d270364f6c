"""Export a tiny generative model (a Llama-style decoder, random weights) the way ORT's own
model builder makes LLMs for the CUDA EP, for the GPU proof of model-aware pruning (issue 42).

    python3 -m tools.evidence.export_llm --out DIR [--builder-path SITE]

- The model: `transformers.LlamaConfig` with 2 layers, hidden size 256, 4 attention heads and
  2 key/value heads (grouped-query attention), a vocabulary of 1024 and tied embeddings, made
  with seeded random weights (nothing is downloaded), and a word-level tokenizer of the same
  vocabulary (`tokenizers`), saved as a Hugging Face folder.
- The export: onnxruntime-genai's model builder (`python -m onnxruntime_genai.models.builder
  -p int4 -e cuda --extra_options shared_embeddings=true`), so the graph holds what ORT's LLM
  exports hold on the CUDA EP: `GroupQueryAttention` (rotary embedding fused into it),
  `MatMulNBits` (4-bit weights), `GatherBlockQuantized` (the tied 4-bit embedding),
  `SimplifiedLayerNormalization` and `SkipSimplifiedLayerNormalization`.
- `DIR/models.json` describes it as tools/evidence/export_models.py does (name, source, ops,
  inputs), plus `dims`: the sizes tools/evidence/gpu_probe.py gives its named dynamic dimensions
  (a past of 4 tokens and 4 new ones), so the attention's lengths agree, and `ones`: the
  attention mask, fed all ones (every token attended).

Needs torch, transformers, tokenizers, onnx and onnxruntime-genai (its builder is Python; the
GPU machine has all but onnxruntime-genai, which travels as a wheel).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NAME = "llama_tiny_int4"
VOCAB = 1024
HEAD_SIZE = 64  # hidden size 256 / 4 heads: the key/value cache's last dimension
DIMS = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 4, "kv_cache_dim": HEAD_SIZE}
DIMS["total_sequence_length"] = DIMS["sequence_length"] + DIMS["past_sequence_length"]


def hf_folder(folder: Path) -> dict[str, Any]:
    """The tiny Llama (random weights, seed 0) and its tokenizer, saved in `folder`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=words, unk_token="w0", bos_token="w1", eos_token="w2", pad_token="w3"
    )
    tokenizer.save_pretrained(folder)
    return config.to_dict()


def build(
    hf: Path, out: Path, cache: Path, builder_path: str | None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if builder_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [builder_path, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf)]
    command += ["-o", str(out), "-p", "int4", "-e", "cuda", "-c", str(cache)]
    command += ["--extra_options", "shared_embeddings=true"]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in ("torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxruntime-genai"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def describe(model: Path, seconds: float, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    import onnx

    graph = onnx.load(model, load_external_data=False).graph
    ops = sorted({(f"{n.domain}:" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                  for n in graph.node})  # fmt: skip
    inits = {i.name for i in graph.initializer}
    inputs = [
        {
            "name": arg.name,
            "shape": [d.dim_param or d.dim_value for d in arg.type.tensor_type.shape.dim],
            "dtype": onnx.helper.tensor_dtype_to_np_dtype(arg.type.tensor_type.elem_type).name,
        }
        for arg in graph.input
        if arg.name not in inits
    ]
    return {
        "name": NAME,
        "family": "onnxruntime-genai",
        "source": "transformers.LlamaForCausalLM(LlamaConfig(2 layers, hidden 256, 4 heads, "
        "2 kv heads, vocab 1024, tied embeddings)), random weights; onnxruntime_genai.models."
        "builder -p int4 -e cuda --extra_options shared_embeddings=true",
        "dtype": "int4 weights, float16 activations",
        "exporter": "onnxruntime-genai model builder",
        "ok": True,
        "error": None,
        "seconds": round(seconds, 2),
        "bytes": model.stat().st_size + (model.parent / "model.onnx.data").stat().st_size,
        "versions": versions(),
        "ops": ops,
        "inputs": inputs,
        "dims": DIMS,
        "ones": ["attention_mask"],
        "builder_tail": done.stdout.strip().splitlines()[-5:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the model's folder")
    parser.add_argument("--builder-path", help="a folder holding onnxruntime_genai")
    args = parser.parse_args()
    work = args.out / "work"
    hf = work / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    hf_folder(hf)
    built = work / "built"
    done = build(hf, built, work / "cache", args.builder_path)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
        return 1
    model = args.out / f"{NAME}.onnx"
    (built / "model.onnx").replace(model)
    for data in built.glob("model.onnx.data"):
        data.replace(args.out / data.name)  # the external data keeps its recorded name
    entry = describe(model, time.perf_counter() - begin, done)
    (args.out / "models.json").write_text(json.dumps([entry], indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: entry[k] for k in ("name", "ops", "bytes")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
