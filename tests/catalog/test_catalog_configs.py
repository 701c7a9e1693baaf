"""Every config in configs/models loads and produces its declared shapes on a tiny model of its architecture.

The real weights are not available here, so each config's `architecture` is rebuilt as a one-layer
random model of the same type and width (tests/helpers/tiny_architectures.py); the config is pointed
at it, its adapter loaded, and one real batch run through the adapter API.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sie_server.adapters.runtime.options import EncodeOptions, ExtractOptions, ScoreOptions, canonical_outputs
from sie_server.catalog.loader import Catalog, parse_config_file
from sie_server.catalog.schema import ModelConfig
from tests.helpers.catalog import REAL_CATALOG
from tests.helpers.tiny_architectures import SUPPORTED, Spec, build, spec_for
from tests.helpers.tiny_detectors import check_detector
from tests.helpers.tiny_florence2 import check_florence2
from tests.helpers.tiny_layout import table_engines_stand_in

FILES = sorted(REAL_CATALOG.glob("*.yaml"))
TEXTS = ["the invoice total is due", "hello world, a short test passage."]
SHA = re.compile(r"^[0-9a-f]{40}$")


def load(path: Path) -> ModelConfig:
    return parse_config_file(path)


def pointed_at(config: ModelConfig, folder: Path) -> ModelConfig:
    """The same config with its weights in ``folder`` (and no remote code: the tiny model has none).
    The tiny model is safetensors, so a llamacpp profile runs it on transformers (tests/server/test_llamacpp.py
    covers llama.cpp with the packaged GGUF)."""
    data = config.model_dump(mode="json", exclude_none=True)
    data["source"] = {"path": str(folder)}
    data["architecture"].pop("trust_remote_code", None)
    for profile in data["profiles"].values():
        if profile.get("backend") == "llamacpp":
            profile["backend"] = "transformers"
    if config.adapter == "docling_layout":  # TableFormer has no tiny model (tests/adapters/test_docling_layout.py)
        data["tasks"]["extract"]["table_structure"] = False
    return ModelConfig.model_validate(data)


def png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (40, 24), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Spec], Path]:
    """A builder that makes each distinct architecture once per module."""
    root = tmp_path_factory.mktemp("catalog-architectures")
    built: dict[Spec, Path] = {}

    def get(spec: Spec) -> Path:
        if spec not in built:
            built[spec] = build(spec, root / f"arch-{len(built)}")
        return built[spec]

    return get


def test_catalog_has_every_family_and_pinned_revisions() -> None:
    assert Catalog(REAL_CATALOG).errors == {}
    configs = [load(path) for path in FILES]
    assert len(configs) >= 140
    assert len({c.id for c in configs}) == len(configs)
    for path, config in zip(FILES, configs, strict=True):
        assert path.name == config.id.replace("/", "__") + ".yaml"
        assert config.description and "\n" not in config.description.strip(), config.id
        assert {"cpu", "cuda"} <= set(config.profiles), config.id
        assert config.architecture is not None, config.id
        if config.source.hf:
            assert config.source.revision and SHA.match(config.source.revision), config.id
    families = {c.adapter for c in configs}
    assert families >= {"embedding", "cross_encoder", "splade", "colbert", "bge_m3", "clip", "colpali", "gliner"}
    assert "causal_lm" in families
    assert sum(c.adapter == "gliner" for c in configs) >= 3


def test_declared_dims_agree_with_the_architecture() -> None:
    """Encoders without a projection put out their hidden size; SPLADE its vocabulary."""
    for path in FILES:
        config = load(path)
        arch, encode = config.architecture, config.tasks.encode
        assert arch is not None
        if config.adapter in {"embedding", "decoder_embedding", "bge_m3"} or (
            config.adapter == "clip" and arch.model_type == "siglip"
        ):
            assert encode is not None and encode.dense is not None
            heads = config.runtime.dense_heads  # sentence-transformers Dense modules project the pooled vector
            assert encode.dense.dim == (heads[-1] if heads else arch.hidden_size), config.id
        if config.adapter == "bge_m3":
            assert encode is not None and encode.multivector is not None
            assert encode.multivector.dim == arch.hidden_size, config.id
        if config.adapter == "colbert":
            assert encode is not None and encode.multivector is not None
            assert encode.multivector.dim <= arch.hidden_size, config.id


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_config_runs_on_a_tiny_model_of_its_architecture(path: Path, tiny: Callable[[Spec], Path]) -> None:
    from sie_server.adapters import create_adapter

    config = load(path)
    arch = config.architecture
    assert arch is not None
    if arch.model_type not in SUPPORTED:
        assert arch.trust_remote_code, f"{config.id}: {arch.model_type} has no tiny builder and is not remote code"
        pytest.skip(f"{arch.model_type} is modelled by the hub repo's own code (trust_remote_code); not built offline")
    local = pointed_at(config, tiny(spec_for(config)))
    adapter = create_adapter(local, local.profile("cpu"), "cpu")
    # docling's layout pipeline imports torchvision when it is built (tests/helpers/tiny_layout.py)
    with table_engines_stand_in() if config.adapter == "docling_layout" else contextlib.nullcontext():
        adapter.load(Path(local.source.path or ""))
    try:
        check = CHECKS[config.adapter]
        check(adapter, config)
    finally:
        adapter.unload()


def _encode(adapter: Any, config: ModelConfig, is_query: bool = False) -> list[dict[str, Any]]:
    assert config.tasks.encode is not None
    outputs = tuple(config.tasks.encode.output_types())
    batch = adapter.encode_tokens(TEXTS, is_query=is_query, instruction=None)
    results: list[dict[str, Any]] = adapter.run(batch, EncodeOptions(canonical_outputs(outputs), is_query=is_query))
    assert len(results) == len(TEXTS)
    for result in results:
        assert set(outputs) <= set(result), f"{config.id}: asked for {outputs}, got {sorted(result)}"
    return results


def _dense(vector: Any, dim: int, normalized: bool) -> None:
    vector = np.asarray(vector)
    assert vector.shape == (dim,)
    assert np.isfinite(vector).all()
    if normalized:
        assert abs(float(np.linalg.norm(vector)) - 1) < 1e-4


def _sparse(pair: Any, dim: int) -> None:
    indices, values = pair
    assert len(indices) == len(values) > 0
    assert int(np.max(indices)) < dim and int(np.min(indices)) >= 0
    assert np.all(np.asarray(values) > 0)


def _multivector(matrix: Any, dim: int) -> None:
    matrix = np.asarray(matrix)
    assert matrix.ndim == 2 and matrix.shape[0] > 0 and matrix.shape[1] == dim
    assert np.isfinite(matrix).all()


def check_embedding(adapter: Any, config: ModelConfig) -> None:
    assert config.tasks.encode is not None and config.tasks.encode.dense is not None
    if config.adapter == "embedding":  # the Dense modules the tiny folder lists are the ones the adapter applies
        assert [layer.out_features for layer in adapter.heads.dense] == config.runtime.dense_heads
    for is_query in (False, True):
        for result in _encode(adapter, config, is_query):
            _dense(result["dense"], config.tasks.encode.dense.dim, config.runtime.normalize)


def check_decoder_embedding(adapter: Any, config: ModelConfig) -> None:
    """As any embedder; and every text, query or document, ends with the token whose state is pooled."""
    check_embedding(adapter, config)
    token = config.runtime.append_token
    if token is not None:
        eos = adapter.tokenizer.token_to_id(token)
        for is_query in (False, True):
            assert all(
                t.input_ids[-1] == eos for t in adapter.encode_tokens(TEXTS, is_query=is_query, instruction=None)
            )


def check_llm_reranker(adapter: Any, config: ModelConfig) -> None:
    """One score per pair; with a no token the score is P(yes), a probability."""
    scores = adapter.run(adapter.tokenize_pairs("invoice total", TEXTS), ScoreOptions())
    assert len(scores) == len(TEXTS)
    assert all(isinstance(s, float) and np.isfinite(s) for s in scores)
    if config.runtime.no_token is not None:
        assert all(0.0 < s < 1.0 for s in scores)


def check_splade(adapter: Any, config: ModelConfig) -> None:
    assert config.tasks.encode is not None and config.tasks.encode.sparse is not None
    dim = config.tasks.encode.sparse.dim
    assert adapter.model.config.vocab_size == dim  # the tiny model's vocabulary is the declared one
    for result in _encode(adapter, config):
        _sparse(result["sparse"], dim)


def check_colbert(adapter: Any, config: ModelConfig) -> None:
    assert config.tasks.encode is not None and config.tasks.encode.multivector is not None
    dim = config.tasks.encode.multivector.dim
    for result in _encode(adapter, config):
        _multivector(result["multivector"], dim)
    # queries: marker after [CLS], [MASK]-padded to the query length
    for result in _encode(adapter, config, is_query=True):
        assert np.asarray(result["multivector"]).shape == (config.runtime.query_max_length, dim)


def check_bge_m3(adapter: Any, config: ModelConfig) -> None:
    encode = config.tasks.encode
    assert encode is not None and encode.dense and encode.sparse and encode.multivector
    for result in _encode(adapter, config):
        _dense(result["dense"], encode.dense.dim, True)
        _sparse(result["sparse"], encode.sparse.dim)
        _multivector(result["multivector"], encode.multivector.dim)


def check_clip(adapter: Any, config: ModelConfig) -> None:
    assert config.tasks.encode is not None and config.tasks.encode.dense is not None
    dim = config.tasks.encode.dense.dim
    for result in _encode(adapter, config):
        _dense(result["dense"], dim, True)
    images = adapter.image_tokens([png()])
    [result] = adapter.run(images, EncodeOptions(("dense",), modality="image"))
    _dense(result["dense"], dim, True)


def check_colpali(adapter: Any, config: ModelConfig) -> None:
    """Queries and page images: one unit vector of the declared dim per token of the processor's input."""
    assert config.tasks.encode is not None and config.tasks.encode.multivector is not None
    dim = config.tasks.encode.multivector.dim
    pages = adapter.image_tokens([png()])
    [page] = adapter.run(pages, EncodeOptions(("multivector",), modality="image"))
    queries = _encode(adapter, config, is_query=True)
    for result, length in [(page, pages[0].length), *((q, None) for q in queries)]:
        matrix = np.asarray(result["multivector"])
        _multivector(matrix, dim)
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
        if length is not None:
            assert matrix.shape[0] == length


def check_cross_encoder(adapter: Any, config: ModelConfig) -> None:
    scores = adapter.run(adapter.tokenize_pairs("invoice total", TEXTS), ScoreOptions())
    assert len(scores) == len(TEXTS)
    assert all(isinstance(s, float) and np.isfinite(s) for s in scores)


def check_gliner(adapter: Any, config: ModelConfig) -> None:
    windows = adapter.windows(["Acme Corp sent an invoice to the cafeteria."])
    assert windows
    found = adapter.run(windows, ExtractOptions(labels=("company",), threshold=0.0))
    assert len(found) == len(windows) and any(found)  # at threshold 0 a random model still proposes spans
    for window, entities in zip(windows, found, strict=True):
        text = window.data[2]
        for entity in entities:
            assert entity["label"] == "company"
            assert 0 <= entity["start"] < entity["end"] <= len(text)
            assert 0.0 <= entity["score"] <= 1.0


def check_gliner2(adapter: Any, config: ModelConfig) -> None:
    """Labels as GLiNER's check; and a schema batch answers every declared name, spans inside the window."""
    check_gliner(adapter, config)
    schema = {"entities": ["company"], "classifications": {"kind": {"labels": ["invoice", "other"]}},
              "structures": {"bill": {"total": {"dtype": "str"}}}, "relations": ["sent_to"]}  # fmt: skip
    windows = adapter.windows(["Acme Corp sent an invoice to the cafeteria."])
    options = ExtractOptions(labels=("company",), threshold=0.0, schema=json.dumps(schema))
    [answer] = adapter.merge_schema(1, windows, adapter.run(windows, options), options.schema)
    assert set(answer["entities"]) == {"company"} and set(answer["relations"]) == {"sent_to"}
    assert [label["label"] in ("invoice", "other") for label in answer["classifications"]["kind"]] == [True]
    assert all(set(instance) == {"total"} for instance in answer["structures"]["bill"])


def check_causal_lm(adapter: Any, config: ModelConfig) -> None:
    vocab = adapter.model.config.vocab_size
    prompt = adapter.prompt_ids(None, [{"role": "user", "content": "hello world"}])
    assert adapter.context_length == config.max_sequence_length
    batch, logits = adapter.prefill([prompt, prompt[:3]])
    assert tuple(logits.shape) == (2, vocab)
    following = [int(t) for t in logits.argmax(-1)]
    step = adapter.decode(batch, following, [len(prompt), 3])
    assert tuple(step.shape) == (2, vocab) and bool(step.isfinite().all())


def check_ocr(adapter: Any, config: ModelConfig) -> None:
    """The packaged PP-OCR reads a rendered line; each line has a box inside the picture."""
    from sie_server.adapters.runtime.media import Picture, picture_tokens
    from sie_server.adapters.runtime.options import MediaOptions
    from tests.helpers.documents import text_image

    image = text_image(["Invoice 42"])
    (found,) = adapter.run([picture_tokens(Picture(image))], MediaOptions.of(None, None, None))
    assert found.data["text"] == "Invoice 42"
    (line,) = found.entities
    x, y, w, h = line["bbox"]
    assert 0 <= x < x + w <= image.width and 0 <= y < y + h <= image.height


def check_docling(adapter: Any, config: ModelConfig) -> None:
    """A document in, its blocks out; the OCR model that reads its scanned pages is in the catalog."""
    from sie_server.adapters.documents.parser import Document, document_tokens
    from sie_server.adapters.runtime.options import DocumentOptions

    [parsed] = adapter.run([document_tokens(Document(b"# Invoice\n\nTotal 42.00", "md"))], DocumentOptions())
    assert [(e["text"], e["label"]) for e in parsed.entities] == [("Invoice", "heading"), ("Total 42.00", "paragraph")]
    assert config.tasks.extract is not None
    assert config.tasks.extract.ocr_model in {load(path).id for path in FILES}


def check_docling_layout(adapter: Any, config: ModelConfig) -> None:
    """A PDF's regions as the layout model names them (the tiny one: one title over the top-left quarter),
    its scanned page listed for the OCR model, which is in the catalog; other formats as docling's."""
    from sie_server.adapters.documents.parser import Document, document_tokens
    from sie_server.adapters.runtime.options import DocumentOptions
    from tests.helpers.document_files import invoice_pdf

    document = Document(invoice_pdf(), "pdf", pages=2)
    [parsed] = adapter.run([document_tokens(document)], DocumentOptions())
    assert [(e["text"], e["label"], e["page"]) for e in parsed.entities] == [
        ("ACME Invoice Invoice total 42.00", "heading", 1)
    ]
    assert parsed.scanned == [2]
    check_docling(adapter, config)


def check_classifier(adapter: Any, config: ModelConfig) -> None:
    """Each text's labels best first, scores in [0, 1]; NLI and GLiClass score the request's labels."""
    from sie_server.adapters.runtime.options import ClassifyOptions

    labels = () if config.adapter == "sequence_classifier" else ("invoice", "greeting")
    options = ClassifyOptions.of(labels, None, None)
    adapter.check(options)
    rows = adapter.rows(TEXTS, options)
    results = adapter.run(rows, options)
    for k in range(len(TEXTS)):
        mine = [(r, x) for r, x in zip(rows, results, strict=True) if r.data.text == k]
        answer = adapter.combine([r for r, _ in mine], [x for _, x in mine], options)
        scores = [label["score"] for label in answer.labels]
        assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
        assert len(scores) == (len(labels) or len(adapter.names))


def check_speech(adapter: Any, config: ModelConfig) -> None:
    """A second of a tone in, a transcript of the declared shape out (what tiny.en hears in it is its own)."""
    import numpy as np

    from sie_server.adapters.runtime.options import MediaOptions
    from sie_server.adapters.speech.base import SAMPLE_RATE, Clip, clip_tokens

    tone = (0.1 * np.sin(np.arange(SAMPLE_RATE) * 2 * np.pi * 440 / SAMPLE_RATE)).astype(np.float32)
    options = MediaOptions.of(None, None, {"beam_size": 1})
    adapter.check(options)
    (found,) = adapter.run([clip_tokens(Clip(tone))], options)
    assert found.data["duration_ms"] == 1000 and isinstance(found.data["text"], str)
    assert isinstance(found.data["segments"], list) and found.data["language"]


CHECKS: dict[str, Callable[[Any, ModelConfig], None]] = {
    "faster_whisper": check_speech,
    "whisper": check_speech,
    "nli": check_classifier,
    "gliclass": check_classifier,
    "sequence_classifier": check_classifier,
    "florence2": check_florence2,
    "docling": check_docling,
    "docling_layout": check_docling_layout,
    "owlv2": check_detector,
    "grounding_dino": check_detector,
    "rapidocr": check_ocr,
    "tesseract": check_ocr,
    "embedding": check_embedding,
    "decoder_embedding": check_decoder_embedding,
    "llm_reranker": check_llm_reranker,
    "splade": check_splade,
    "colbert": check_colbert,
    "bge_m3": check_bge_m3,
    "clip": check_clip,
    "colpali": check_colpali,
    "cross_encoder": check_cross_encoder,
    "gliner": check_gliner,
    "gliner2": check_gliner2,
    "causal_lm": check_causal_lm,
}
