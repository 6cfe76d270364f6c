"""Export real neural-network architectures with random weights to ONNX: issue 28's GPU proof.

Issue 28 asks that the GPU proof run real models rather than single-op toys: architectures from
torchvision, transformers, timm and sentence-transformers, with depthwise convolutions, a
BERT-style encoder, a decoder-only transformer, an audio encoder and a half-precision network
among them. Their trained weights cannot be had on the GPU machine (it has no network) and are
beside the point (which libraries ONNX Runtime loads depends on the operators, not on the
weights), so every model here is built from its constructor or a config object with random
weights: `weights=None`, `pretrained=False`, transformers configs; `HF_HUB_OFFLINE=1` and
`TRANSFORMERS_OFFLINE=1` are set before transformers is imported, and nothing is downloaded.
The sentence-transformers model is assembled from a random BertModel and a tokenizer made from a
made-up vocabulary, both saved to a temporary folder.

Each model is exported on CPU (eval mode, no grad; the fp16 one on CUDA, skipped with a reason
where CUDA is not available) with the TorchScript exporter (`dynamo=False`, opset 17, the batch
dimension dynamic); where that raises, with the dynamo exporter (opset 18, static shapes). Every
file is read back with onnx to list the op types it uses (subgraphs and local functions
included) and its inputs. One model failing never stops the others.

    python3 -m tools.evidence.export_models --out DIR [--only NAME,...]
    python3 -m tools.evidence.export_models --list

writes DIR/<name>.onnx per model, DIR/models.json (rewritten after every model: a list of
records with name, family, source, dtype, opset, exporter, ok, error, seconds, bytes, ops,
inputs, and more for diagnosis) and DIR/versions.json (the Python, library and GPU versions
seen). One progress line per model goes to stderr. The exit status is 0 when at least 8 models
were exported (or all of them, where --only selects fewer), else 1. `--list` names the models
and needs none of the packages. Needs torch, torchvision, transformers, timm,
sentence-transformers, onnx and onnxscript (for the dynamo exporter); standard library
otherwise: this script does not import `bundler`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
TORCHSCRIPT_OPSET = 17
DYNAMO_OPSET = 18
MIN_OK = 8
THREADS = 8
SEED = 0
IMAGE_SIZE = 224
TEXT_LEN = 32
HIDDEN = 256
BERT_VOCAB = 30522
GPT2_VOCAB = 50257
ROBERTA_VOCAB = 50265
# external data written by an exporter is folded back into the .onnx file below this size
MAX_INLINE_BYTES = 1_800_000_000
PACKAGES = (
    "torch",
    "torchvision",
    "transformers",
    "timm",
    "sentence-transformers",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "onnxruntime-gpu",
    "numpy",
    "tokenizers",
    "safetensors",
)

# what a builder returns: module, example args, input names, output names, dynamic axes
Spec = tuple[Any, tuple[Any, ...], list[str], list[str], dict[str, dict[int, str]]]
Builder = Callable[[dict[str, Any]], Spec]


class Skip(Exception):
    """A model that cannot be exported here, for a reason that is not a failure (no CUDA)."""


@dataclass(frozen=True)
class Entry:
    family: str
    source: str
    build: Builder
    dtype: str = "float32"


# --- small helpers ---------------------------------------------------------------------------


def _imp(name: str) -> Any:
    """Import lazily (so that --list works without torch), typed Any for mypy."""
    return importlib.import_module(name)


def _offline() -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ[key] = value


def _torch() -> Any:
    return _imp("torch")


def _transformers() -> Any:
    _offline()  # before transformers (and huggingface_hub) are first imported
    return _imp("transformers")


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in traceback.format_exception_only(type(exc), exc) if ln.strip()]
    text = lines[-1].strip() if lines else type(exc).__name__
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:500]


def _traceback_tail(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-limit:]


def _stamp() -> str:
    return time.strftime("%H:%M:%S")


def _say(msg: str) -> None:
    print(f"[{_stamp()}] {msg}", file=sys.stderr, flush=True)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _batch_axes(names: list[str]) -> dict[str, dict[int, str]]:
    return {n: {0: "batch"} for n in names}


def _image(size: tuple[int, int] = (IMAGE_SIZE, IMAGE_SIZE)) -> Any:
    torch = _torch()
    return torch.randn(1, 3, size[0], size[1], dtype=torch.float32)


def _vision(model: Any, size: tuple[int, int] = (IMAGE_SIZE, IMAGE_SIZE)) -> Spec:
    names_in, names_out = ["input"], ["logits"]
    return model.eval(), (_image(size),), names_in, names_out, _batch_axes(names_in + names_out)


def _ids(vocab: int, low: int = 0) -> Any:
    torch = _torch()
    return torch.randint(low, vocab, (1, TEXT_LEN), dtype=torch.int64)


def _ones() -> Any:
    torch = _torch()
    return torch.ones(1, TEXT_LEN, dtype=torch.int64)


def _zeros() -> Any:
    torch = _torch()
    return torch.zeros(1, TEXT_LEN, dtype=torch.int64)


def _wrap(inner: Any, fn: Callable[..., Any], arity: int) -> Any:
    """An nn.Module whose forward(arity tensors) returns fn(inner, *tensors): one tensor out.

    The forwards have fixed positional parameters (no *args) so that both torch.jit.trace and
    torch.export see a plain signature.
    """
    torch = _torch()
    base = torch.nn.Module

    def init(self: Any) -> None:
        base.__init__(self)
        self.inner = inner  # registered as a submodule

    def forward1(self: Any, a: Any) -> Any:
        return fn(self.inner, a)

    def forward2(self: Any, a: Any, b: Any) -> Any:
        return fn(self.inner, a, b)

    def forward3(self: Any, a: Any, b: Any, c: Any) -> Any:
        return fn(self.inner, a, b, c)

    forwards: dict[int, Callable[..., Any]] = {1: forward1, 2: forward2, 3: forward3}
    # built with type() (torch is imported lazily, so no class statement can name its base)
    cls = type(
        f"ExportWrapper{arity}",
        (base,),
        {"__init__": init, "forward": forwards[arity], "__module__": __name__},
    )
    return cls().eval()


def _hf_model(cls: Any, config: Any, meta: dict[str, Any]) -> Any:
    """A transformers model from its config, random weights, eager attention where it takes it.

    Eager attention keeps the exported graph plain MatMul/Softmax (no SDPA kernel choice).
    """
    with contextlib.suppress(Exception):
        config._attn_implementation = "eager"
    model = cls(config)
    with contextlib.suppress(Exception):
        model.set_attn_implementation("eager")
    with contextlib.suppress(Exception):
        meta["attn_implementation"] = str(model.config._attn_implementation)
    return model.eval()


def _last_hidden(output: Any) -> Any:
    """The first output (last_hidden_state) of a ModelOutput or a tuple."""
    with contextlib.suppress(AttributeError, KeyError):
        value = output.last_hidden_state
        if value is not None:
            return value
    return output[0]


# --- torchvision -----------------------------------------------------------------------------


def build_resnet50(meta: dict[str, Any]) -> Spec:
    tv = _imp("torchvision")
    return _vision(tv.models.resnet50(weights=None))


def build_mobilenet_v3_large(meta: dict[str, Any]) -> Spec:
    tv = _imp("torchvision")
    return _vision(tv.models.mobilenet_v3_large(weights=None))


def build_efficientnet_b0(meta: dict[str, Any]) -> Spec:
    tv = _imp("torchvision")
    return _vision(tv.models.efficientnet_b0(weights=None))


def build_vit_small(meta: dict[str, Any]) -> Spec:
    _imp("torchvision")
    vt = _imp("torchvision.models.vision_transformer")
    model = vt.VisionTransformer(
        image_size=IMAGE_SIZE,
        patch_size=16,
        num_layers=4,
        num_heads=4,
        hidden_dim=HIDDEN,
        mlp_dim=512,
    )
    return _vision(model)


def build_convnext_tiny(meta: dict[str, Any]) -> Spec:
    tv = _imp("torchvision")
    return _vision(tv.models.convnext_tiny(weights=None))


def build_resnet18_fp16(meta: dict[str, Any]) -> Spec:
    torch = _torch()
    if not torch.cuda.is_available():
        raise Skip("CUDA is not available: the fp16 model is exported on the GPU")
    tv = _imp("torchvision")
    model = tv.models.resnet18(weights=None).eval().half().to("cuda")
    x = torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE, dtype=torch.float16, device="cuda")
    meta["device"] = "cuda"
    names_in, names_out = ["input"], ["logits"]
    return model, (x,), names_in, names_out, _batch_axes(names_in + names_out)


# --- transformers ----------------------------------------------------------------------------


def _bert_config(tf: Any) -> Any:
    return tf.BertConfig(
        vocab_size=BERT_VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=512,
    )


def build_bert_encoder(meta: dict[str, Any]) -> Spec:
    tf = _transformers()
    model = _hf_model(tf.BertModel, _bert_config(tf), meta)

    def run(m: Any, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        out = m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return _last_hidden(out)

    names_in = ["input_ids", "attention_mask", "token_type_ids"]
    names_out = ["last_hidden_state"]
    args = (_ids(BERT_VOCAB), _ones(), _zeros())
    return _wrap(model, run, 3), args, names_in, names_out, _batch_axes(names_in + names_out)


def build_gpt2_small(meta: dict[str, Any]) -> Spec:
    tf = _transformers()
    config = tf.GPT2Config(n_layer=4, n_head=4, n_embd=HIDDEN, vocab_size=GPT2_VOCAB)
    with contextlib.suppress(Exception):
        config.use_cache = False
    model = _hf_model(tf.GPT2Model, config, meta)

    def run(m: Any, input_ids: Any) -> Any:
        return _last_hidden(m(input_ids=input_ids, use_cache=False))

    names_in, names_out = ["input_ids"], ["last_hidden_state"]
    args = (_ids(GPT2_VOCAB),)
    return _wrap(model, run, 1), args, names_in, names_out, _batch_axes(names_in + names_out)


def build_roberta_encoder(meta: dict[str, Any]) -> Spec:
    tf = _transformers()
    config = tf.RobertaConfig(
        vocab_size=ROBERTA_VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    model = _hf_model(tf.RobertaModel, config, meta)

    def run(m: Any, input_ids: Any, attention_mask: Any) -> Any:
        return _last_hidden(m(input_ids=input_ids, attention_mask=attention_mask))

    names_in, names_out = ["input_ids", "attention_mask"], ["last_hidden_state"]
    args = (_ids(ROBERTA_VOCAB, low=3), _ones())  # 0-2 are <s>, <pad>, </s>
    return _wrap(model, run, 2), args, names_in, names_out, _batch_axes(names_in + names_out)


def build_whisper_encoder(meta: dict[str, Any]) -> Spec:
    tf = _transformers()
    torch = _torch()
    config = tf.WhisperConfig(
        vocab_size=51865,
        num_mel_bins=80,
        d_model=HIDDEN,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_layers=2,
        decoder_attention_heads=4,
        decoder_ffn_dim=1024,
        max_source_positions=1500,
        max_target_positions=448,
    )
    try:
        encoder_cls = _imp("transformers.models.whisper.modeling_whisper").WhisperEncoder
        model = _hf_model(encoder_cls, config, meta)
    except Exception as exc:
        meta["note"] = f"WhisperEncoder(config) failed ({_last_line(exc)}): WhisperModel's encoder"
        meta["source"] = "transformers.WhisperModel(WhisperConfig(d_model=256, ...)).get_encoder()"
        model = _hf_model(tf.WhisperModel, config, meta).get_encoder().eval()

    def run(m: Any, input_features: Any) -> Any:
        return _last_hidden(m(input_features=input_features))

    names_in, names_out = ["input_features"], ["last_hidden_state"]
    args = (torch.randn(1, 80, 3000, dtype=torch.float32),)  # 30 s of 10 ms frames: fixed
    return _wrap(model, run, 1), args, names_in, names_out, _batch_axes(names_in + names_out)


# --- timm ------------------------------------------------------------------------------------


def _timm_size(model: Any) -> tuple[int, int]:
    """The model's default input size (H, W) where it is at most 256, else 224x224."""
    cfg: Any = None
    for attr in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, attr, None)
        if cfg:
            break
    try:
        size: Any = cfg.get("input_size") if isinstance(cfg, dict) else None
        h, w = int(size[-2]), int(size[-1])
    except Exception:
        return (IMAGE_SIZE, IMAGE_SIZE)
    if 32 <= h <= 256 and 32 <= w <= 256:
        return (h, w)
    return (IMAGE_SIZE, IMAGE_SIZE)


def _timm(meta: dict[str, Any], candidates: tuple[str, ...]) -> Spec:
    timm = _imp("timm")
    errors: list[str] = []
    for arch in candidates:
        try:
            model = timm.create_model(arch, pretrained=False)
        except Exception as exc:
            errors.append(f"{arch}: {_last_line(exc)}")
            continue
        meta["source"] = f'timm.create_model("{arch}", pretrained=False)'
        if errors:
            meta["note"] = "fell back: " + "; ".join(errors)
        return _vision(model, _timm_size(model))
    raise RuntimeError("no timm model could be created: " + "; ".join(errors))


def build_timm_efficientnet_b0(meta: dict[str, Any]) -> Spec:
    return _timm(meta, ("efficientnet_b0", "resnet18"))


def build_timm_mobilevitv2_050(meta: dict[str, Any]) -> Spec:
    # a different op mix: separable self-attention, GroupNorm, unfold/fold reshapes
    return _timm(meta, ("mobilevitv2_050", "convnextv2_atto", "regnety_002", "resnet18"))


# --- sentence-transformers -------------------------------------------------------------------

_WORDS = (
    "the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "was",
    "model", "onnx", "runtime", "graph", "tensor", "layer", "batch", "token", "input", "output",
    "sentence", "encoder", "embedding", "mean", "pool", "query", "document", "search", "rank",
    "##s", "##ing", "##ed", "##er", "##ly", ".", ",", "!", "?", "-", "'", "(", ")", "0", "1",
)  # fmt: skip


def _vocab_tokens() -> list[str]:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for word in _WORDS:
        if word not in tokens:
            tokens.append(word)
    tokens.extend(f"tok{i}" for i in range(300))
    return tokens


def _make_tokenizer(tf: Any, folder: Path) -> Any:
    """A BERT WordPiece tokenizer over a made-up vocabulary (vocab.txt written to folder)."""
    tokens = _vocab_tokens()
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    attempts: list[tuple[str, Callable[[], Any]]] = [
        # transformers 5: one tokenizers-backed class, vocabulary as a dict
        ("BertTokenizer(vocab=dict)", lambda: tf.BertTokenizer(vocab=vocab)),
        # transformers 4: the fast and the slow class from vocab.txt
        ("BertTokenizerFast(vocab_file)", lambda: tf.BertTokenizerFast(vocab_file=str(vocab_file))),
        ("BertTokenizer(vocab_file)", lambda: tf.BertTokenizer(vocab_file=str(vocab_file))),
    ]
    errors: list[str] = []
    for label, make in attempts:
        try:
            tok = make()
            size = len(tok)
        except Exception as exc:
            errors.append(f"{label}: {_last_line(exc)}")
            continue
        if size < len(tokens):
            errors.append(f"{label}: {size} tokens, not {len(tokens)}")
            continue
        return tok
    raise RuntimeError("no tokenizer could be made: " + "; ".join(errors))


def _sentence_transformer(folder: Path) -> Any:
    st = _imp("sentence_transformers")
    mods: Any = None
    errors: list[str] = []
    for where in (
        "sentence_transformers.sentence_transformer.modules",  # 6.x
        "sentence_transformers.models",  # before 6.x (a deprecated alias in 6.x)
    ):
        try:
            candidate = _imp(where)
            _ = candidate.Transformer, candidate.Pooling
        except Exception as exc:
            errors.append(f"{where}: {_last_line(exc)}")
            continue
        mods = candidate
        break
    if mods is None:
        raise RuntimeError("Transformer/Pooling modules not found: " + "; ".join(errors))
    try:
        transformer = mods.Transformer(str(folder), model_kwargs={"attn_implementation": "eager"})
    except TypeError:
        transformer = mods.Transformer(str(folder))
    try:
        pooling = mods.Pooling(HIDDEN, pooling_mode="mean")
    except TypeError:
        pooling = mods.Pooling(HIDDEN)
    model = st.SentenceTransformer(modules=[transformer, pooling], device="cpu")
    return model.eval()


def build_sentence_encoder(meta: dict[str, Any]) -> Spec:
    tf = _transformers()
    torch = _torch()
    folder = Path(tempfile.mkdtemp(prefix="export_models_st_"))
    meta["cleanup"].append(folder)
    bert = _hf_model(tf.BertModel, _bert_config(tf), meta)
    names_in, names_out = ["input_ids", "attention_mask"], ["sentence_embedding"]
    args = (_ids(len(_vocab_tokens())), _ones())
    try:
        bert.save_pretrained(str(folder))
        _make_tokenizer(tf, folder).save_pretrained(str(folder))
        model = _sentence_transformer(folder)

        def run_st(m: Any, input_ids: Any, attention_mask: Any) -> Any:
            features = {"input_ids": input_ids, "attention_mask": attention_mask}
            return m(features)["sentence_embedding"]

        # one real call before the export: an API mismatch shows here, where it can fall back
        with torch.no_grad():
            probe = run_st(model, *args)
        if tuple(probe.shape) != (1, HIDDEN):
            raise RuntimeError(f"sentence embedding of shape {tuple(probe.shape)}")
        wrapper = _wrap(model, run_st, 2)
    except Exception as exc:
        meta["note"] = (
            f"sentence-transformers could not be used ({_last_line(exc)}): "
            "the same BertModel with mean pooling, without sentence-transformers"
        )
        meta["source"] = "transformers.BertModel(BertConfig(hidden_size=256, ...)) + mean pooling"
        meta["family"] = "transformers"

        def run_mean(m: Any, input_ids: Any, attention_mask: Any) -> Any:
            hidden = _last_hidden(m(input_ids=input_ids, attention_mask=attention_mask))
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

        wrapper = _wrap(bert, run_mean, 2)
    return wrapper, args, names_in, names_out, _batch_axes(names_in + names_out)


# --- the set ---------------------------------------------------------------------------------

_BERT_SRC = (
    "BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, "
    "intermediate_size=1024, vocab_size=30522, max_position_embeddings=512)"
)

REGISTRY: dict[str, Entry] = {
    "resnet50": Entry("torchvision", "torchvision.models.resnet50(weights=None)", build_resnet50),
    "mobilenet_v3_large": Entry(
        "torchvision",
        "torchvision.models.mobilenet_v3_large(weights=None)",
        build_mobilenet_v3_large,
    ),
    "efficientnet_b0": Entry(
        "torchvision", "torchvision.models.efficientnet_b0(weights=None)", build_efficientnet_b0
    ),
    "vit_small": Entry(
        "torchvision",
        "torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=4, "
        "num_heads=4, hidden_dim=256, mlp_dim=512)",
        build_vit_small,
    ),
    "convnext_tiny": Entry(
        "torchvision", "torchvision.models.convnext_tiny(weights=None)", build_convnext_tiny
    ),
    "resnet18_fp16": Entry(
        "torchvision",
        "torchvision.models.resnet18(weights=None).half().cuda()",
        build_resnet18_fp16,
        dtype="float16",
    ),
    "bert_encoder": Entry(
        "transformers", f"transformers.BertModel({_BERT_SRC})", build_bert_encoder
    ),
    "gpt2_small": Entry(
        "transformers",
        "transformers.GPT2Model(GPT2Config(n_layer=4, n_head=4, n_embd=256, vocab_size=50257))",
        build_gpt2_small,
    ),
    "roberta_encoder": Entry(
        "transformers",
        "transformers.RobertaModel(RobertaConfig(hidden_size=256, num_hidden_layers=4, "
        "num_attention_heads=4, intermediate_size=1024, vocab_size=50265))",
        build_roberta_encoder,
    ),
    "whisper_encoder": Entry(
        "transformers",
        "transformers WhisperEncoder(WhisperConfig(d_model=256, encoder_layers=2, "
        "encoder_attention_heads=4, encoder_ffn_dim=1024, num_mel_bins=80))",
        build_whisper_encoder,
    ),
    "timm_efficientnet_b0": Entry(
        "timm", 'timm.create_model("efficientnet_b0", pretrained=False)', build_timm_efficientnet_b0
    ),
    "timm_mobilevitv2_050": Entry(
        "timm", 'timm.create_model("mobilevitv2_050", pretrained=False)', build_timm_mobilevitv2_050
    ),
    "sentence_encoder": Entry(
        "sentence-transformers",
        f"sentence_transformers.SentenceTransformer(modules=[Transformer(random BertModel("
        f"{_BERT_SRC})), Pooling(256, pooling_mode='mean')])",
        build_sentence_encoder,
    ),
}


# --- export ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _warnings_into(info: dict[str, Any]) -> Iterator[None]:
    """Record the distinct warnings raised inside (at most 8, first line each) in info."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen: list[str] = info.setdefault("warnings", [])
            for w in caught:
                text = f"{getattr(w.category, '__name__', 'Warning')}: {w.message}"
                text = (text.strip().splitlines() or [""])[0][:300]
                if text not in seen and len(seen) < 8:
                    seen.append(text)


def _supported(func: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """kwargs less those that func's signature does not take (an older or newer torch)."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return kwargs, []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs, []
    kept = {k: v for k, v in kwargs.items() if k in params}
    return kept, sorted(set(kwargs) - set(kept))


def _listing(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _remove(folder: Path, names: set[str]) -> None:
    for name in names:
        target = folder / name
        with contextlib.suppress(OSError):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink()


def _external_locations(model: Any, onnx: Any) -> set[str]:
    """The external-data files the initializers (of the main graph) point to."""
    found: set[str] = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    found.add(entry.value)
    return found


def _inline_external(path: Path, info: dict[str, Any]) -> None:
    """Fold external data back into the .onnx file where it is small enough; record what."""
    onnx = _imp("onnx")
    head = onnx.load(str(path), load_external_data=False)
    locations = _external_locations(head, onnx)
    info["external_data_locations"] = sorted(locations)
    if not locations:
        return
    total = sum((path.parent / loc).stat().st_size for loc in locations)
    if total > MAX_INLINE_BYTES:
        info["external_data_inlined"] = False
        return
    full = onnx.load(str(path))  # reads the external data in
    onnx.save_model(full, str(path), save_as_external_data=False)
    again = onnx.load(str(path), load_external_data=False)
    if _external_locations(again, onnx):
        info["external_data_inlined"] = False
        return
    _remove(path.parent, {loc for loc in locations if "/" not in loc and "\\" not in loc})
    info["external_data_inlined"] = True


def _export(
    module: Any,
    args: tuple[Any, ...],
    path: Path,
    names_in: list[str],
    names_out: list[str],
    axes: dict[str, dict[int, str]],
) -> dict[str, Any]:
    """Export with the TorchScript exporter, else the dynamo one; returns what happened."""
    torch = _torch()
    info: dict[str, Any] = {}
    folder = path.parent
    before = _listing(folder)
    with contextlib.suppress(OSError):
        path.unlink()

    ts_kwargs, dropped = _supported(
        torch.onnx.export,
        {
            "input_names": names_in,
            "output_names": names_out,
            "opset_version": TORCHSCRIPT_OPSET,
            "dynamic_axes": axes,
            "do_constant_folding": True,
            "export_params": True,
            "dynamo": False,
        },
    )
    try:
        with _warnings_into(info):
            torch.onnx.export(module, args, str(path), **ts_kwargs)
        if not path.is_file():
            raise RuntimeError("the TorchScript exporter returned without writing the file")
        info["exporter"] = "torchscript"
        info["requested_opset"] = TORCHSCRIPT_OPSET
        info["dynamic_axes"] = axes
        if dropped:
            info["dropped_kwargs"] = dropped
    except Exception as exc:
        info["torchscript_error"] = _last_line(exc)
        info["torchscript_traceback"] = _traceback_tail(exc, 2000)
        _remove(folder, _listing(folder) - before)
        with contextlib.suppress(OSError):
            path.unlink()
        dyn_kwargs, dropped = _supported(
            torch.onnx.export,
            {
                "input_names": names_in,
                "output_names": names_out,
                "opset_version": DYNAMO_OPSET,
                "dynamo": True,
                "external_data": False,
            },
        )
        if "dynamo" not in dyn_kwargs:
            raise RuntimeError(
                f"TorchScript export failed ({info['torchscript_error']}) and this "
                "torch.onnx.export has no dynamo option"
            ) from exc
        with _warnings_into(info):
            program = torch.onnx.export(module, args, str(path), **dyn_kwargs)
            if not path.is_file() and program is not None and hasattr(program, "save"):
                try:
                    program.save(str(path), external_data=False)
                except TypeError:
                    program.save(str(path))
        if not path.is_file():
            raise RuntimeError("the dynamo exporter wrote no file") from exc
        info["exporter"] = "dynamo"
        info["requested_opset"] = DYNAMO_OPSET
        info["dynamic_axes"] = None  # static shapes
        if dropped:
            info["dropped_kwargs"] = dropped

    written = sorted(_listing(folder) - before - {path.name})
    info["external_data_files"] = written
    if written:
        try:
            _inline_external(path, info)
        except Exception as exc:
            info["external_data_inlined"] = False
            info["external_data_error"] = _last_line(exc)
    return info


def _collect(nodes: Any, ops: set[str], onnx: Any) -> None:
    """Add every node's "domain:OpType" ("OpType" for the default domain), into subgraphs."""
    for node in nodes:
        domain = node.domain or ""
        ops.add(node.op_type if domain in ("", "ai.onnx") else f"{domain}:{node.op_type}")
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH or attr.HasField("g"):
                _collect(attr.g.node, ops, onnx)
            for sub in attr.graphs:
                _collect(sub.node, ops, onnx)


def _dtype_name(elem_type: int, onnx: Any) -> str:
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type).name)
    except Exception:
        try:
            return str(onnx.TensorProto.DataType.Name(elem_type)).lower()
        except Exception:
            return str(elem_type)


def _values(infos: Any, skip: set[str], onnx: Any) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for vi in infos:
        if vi.name in skip:
            continue
        tensor = vi.type.tensor_type
        shape: list[int | str | None] | None = None
        if tensor.HasField("shape"):
            shape = []
            for dim in tensor.shape.dim:
                if dim.HasField("dim_value"):
                    shape.append(int(dim.dim_value))
                elif dim.HasField("dim_param"):
                    shape.append(str(dim.dim_param))
                else:
                    shape.append(None)
        result.append(
            {"name": vi.name, "shape": shape, "dtype": _dtype_name(tensor.elem_type, onnx)}
        )
    return result


def _inspect(path: Path) -> dict[str, Any]:
    """Read the saved file back: op types, opset, inputs, outputs, size, checker verdict."""
    onnx = _imp("onnx")
    model = onnx.load(str(path), load_external_data=False)
    ops: set[str] = set()
    _collect(model.graph.node, ops, onnx)
    for function in model.functions:
        _collect(function.node, ops, onnx)
    opset: int | None = None
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            opset = int(entry.version)
    initializers = {t.name for t in model.graph.initializer}
    locations = _external_locations(model, onnx)
    size = path.stat().st_size
    for loc in locations:
        with contextlib.suppress(OSError):
            size += (path.parent / loc).stat().st_size
    info: dict[str, Any] = {
        "opset": opset,
        "opset_imports": {e.domain or "ai.onnx": int(e.version) for e in model.opset_import},
        "ops": sorted(ops),
        "nodes": len(model.graph.node),
        "functions": sorted(f"{f.domain}:{f.name}" for f in model.functions),
        "inputs": _values(model.graph.input, initializers, onnx),
        "outputs": _values(model.graph.output, set(), onnx),
        "initializers": len(initializers),
        "bytes": size,
        "uses_external_data": bool(locations),
    }
    try:
        onnx.checker.check_model(str(path))
        info["checker"] = "ok"
    except Exception as exc:
        info["checker"] = _last_line(exc)
    return info


def export_one(name: str, entry: Entry, out_dir: Path) -> dict[str, Any]:
    """Build, export and read back one model; never raises (except KeyboardInterrupt)."""
    rec: dict[str, Any] = {
        "name": name,
        "family": entry.family,
        "source": entry.source,
        "dtype": entry.dtype,
        "opset": None,
        "exporter": None,
        "ok": False,
        "error": None,
        "seconds": None,
        "bytes": None,
        "ops": [],
        "inputs": [],
    }
    meta: dict[str, Any] = {"cleanup": [], "device": "cpu"}
    path = out_dir / f"{name}.onnx"
    start = time.monotonic()
    module: Any = None
    exported = False
    torch: Any = None
    try:
        torch = _torch()
        torch.manual_seed(SEED)
        with torch.no_grad():
            module, args, names_in, names_out, axes = entry.build(meta)
            rec["build_seconds"] = round(time.monotonic() - start, 2)
            rec.update(_export(module, args, path, names_in, names_out, axes))
        exported = True
        rec["export_seconds"] = round(time.monotonic() - start - rec["build_seconds"], 2)
        rec.update(_inspect(path))
        rec["file"] = path.name
        rec["ok"] = True
    except Skip as exc:
        rec["skipped"] = True
        rec["error"] = f"skipped: {exc}"
    except Exception as exc:
        rec["error"] = _last_line(exc)
        rec["traceback"] = _traceback_tail(exc)
        if not exported:
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        rec["seconds"] = round(time.monotonic() - start, 2)
        for key in ("source", "family", "note", "device", "attn_implementation"):
            if key in meta:
                rec[key] = meta[key]
        for folder in meta.get("cleanup", []):
            shutil.rmtree(folder, ignore_errors=True)
        del module
        gc.collect()
        if torch is not None:
            with contextlib.suppress(Exception):
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    return rec


def _versions() -> dict[str, Any]:
    found: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {},
    }
    for pkg in PACKAGES:
        try:
            found["packages"][pkg] = importlib.metadata.version(pkg)
        except Exception:
            found["packages"][pkg] = None
    try:
        torch = _torch()
        found["torch_cuda"] = getattr(torch.version, "cuda", None)
        found["cuda_available"] = bool(torch.cuda.is_available())
        if found["cuda_available"]:
            found["gpu"] = str(torch.cuda.get_device_name(0))
        found["threads"] = int(torch.get_num_threads())
    except Exception as exc:
        found["torch_error"] = _last_line(exc)
    return found


def _progress(i: int, n: int, rec: dict[str, Any]) -> str:
    head = f"({i}/{n}) {rec['name']}:"
    if rec.get("ok"):
        mb = (rec.get("bytes") or 0) / 1e6
        fell = " (TorchScript failed)" if rec.get("torchscript_error") else ""
        return (
            f"{head} ok via {rec.get('exporter')}{fell} in {rec['seconds']} s, {mb:.1f} MB, "
            f"opset {rec.get('opset')}, {len(rec.get('ops') or [])} op types"
        )
    if rec.get("skipped"):
        return f"{head} {rec.get('error')}"
    return f"{head} FAILED in {rec['seconds']} s: {rec.get('error')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Export real architectures with random weights to ONNX (issue 28)."
    )
    parser.add_argument("--out", type=Path, help="folder for the .onnx files and models.json")
    parser.add_argument("--only", help="comma-separated model names (see --list)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    opts = parser.parse_args(argv)

    if opts.list:
        for name, entry in REGISTRY.items():
            print(f"{name:22} {entry.family:22} {entry.dtype:8} {entry.source}")
        return 0
    if opts.out is None:
        parser.error("--out is required (unless --list)")

    names = list(REGISTRY)
    if opts.only:
        names = [n.strip() for n in opts.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            parser.error(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(REGISTRY)}")
        if not names:
            parser.error("--only names no model")

    out_dir: Path = opts.out
    out_dir.mkdir(parents=True, exist_ok=True)
    _offline()
    started = time.monotonic()
    try:
        torch = _torch()
        torch.set_num_threads(THREADS)
    except Exception as exc:
        _say(f"torch could not be imported: {_last_line(exc)}")
    versions = _versions()
    _write_json(out_dir / "versions.json", versions)
    pkgs = ", ".join(f"{k} {v}" for k, v in versions["packages"].items() if v)
    _say(f"python {versions['python']}; {pkgs}; gpu: {versions.get('gpu', 'none')}")

    results: list[dict[str, Any]] = []
    for i, name in enumerate(names, 1):
        rec = export_one(name, REGISTRY[name], out_dir)
        results.append(rec)
        _write_json(out_dir / "models.json", results)
        _say(_progress(i, len(names), rec))

    ok = sum(1 for r in results if r.get("ok"))
    need = min(MIN_OK, len(names))
    _say(
        f"{ok} of {len(names)} models exported in {time.monotonic() - started:.1f} s "
        f"(need {need}); {out_dir / 'models.json'}"
    )
    return 0 if ok >= need else 1


if __name__ == "__main__":
    sys.exit(main())
