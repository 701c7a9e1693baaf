"""A tiny random-weight RT-DETR v2 layout model shaped like docling-layout-heron, and what docling's
layout pipeline needs around it in tests.

The model has heron's 17 labels, a one-block ResNet backbone, one encoder layer, two decoder layers
(transformers ties the box heads of all but the first) and ten queries; its image processor resizes
pages to 64 x 64. ``title_everywhere`` sets its heads so that every query answers "title" with the
box of the page's top-left quarter (centre at the corner, the page's width and height), so a test
knows what the layout model says.

Docling builds every table engine it knows when it builds its standard PDF pipeline, and its
TableFormer v2 module imports torchvision at the top; PyPI's torchvision does not import beside this
CPU torch. ``table_engines_stand_in`` puts a stand-in for that one module (a table engine that is
never run: the tests turn tables off) where the real one cannot be imported.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sie_server.adapters.documents.docling_layout import TABLE_ENGINES_MODULE

#: docling-layout-heron's labels, in its order (its config.json's id2label)
LABELS = (
    "caption", "footnote", "formula", "list_item", "page_footer", "page_header", "picture", "section_header",
    "table", "text", "title", "document_index", "code", "checkbox_selected", "checkbox_unselected", "form",
    "key_value_region",
)  # fmt: skip


def build_layout(folder: Path, d_model: int = 16, title_everywhere: bool = False) -> Path:
    import torch
    from transformers import RTDetrImageProcessor, RTDetrV2Config, RTDetrV2ForObjectDetection

    backbone = {
        "model_type": "rt_detr_resnet",
        "embedding_size": 8,
        "hidden_sizes": [8, 8, 8, 8],
        "depths": [1, 1, 1, 1],
        "layer_type": "basic",
        "out_features": ["stage2", "stage3", "stage4"],
    }
    config = RTDetrV2Config(
        backbone_config=backbone,
        use_pretrained_backbone=False,
        encoder_hidden_dim=16,
        encoder_in_channels=[8, 8, 8],
        feat_strides=[8, 16, 32],
        encoder_layers=1,
        encoder_ffn_dim=32,
        encoder_attention_heads=2,
        d_model=d_model,
        decoder_in_channels=[16, 16, 16],  # the encoder's width
        decoder_layers=2,
        decoder_ffn_dim=32,
        decoder_attention_heads=2,
        decoder_n_points=1,
        num_queries=10,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: k for k, label in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    model = RTDetrV2ForObjectDetection(config).eval()
    if title_everywhere:
        _title_everywhere(model)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    RTDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
    return folder


def _title_everywhere(model: object) -> None:
    """Every query scores "title" near 1 and the others near 0, and every box is centred on the top-left
    corner with the picture's size: the encoder's proposals and each decoder layer's box refinement put
    centres at 0 and sizes at 1 whatever they start from."""
    import torch

    title = LABELS.index("title")
    with torch.no_grad():
        for name, module in model.named_modules():  # type: ignore[attr-defined]
            if isinstance(module, torch.nn.Linear) and _is_class_head(name):
                module.weight.zero_()
                module.bias.fill_(-12.0)
                module.bias[title] = 12.0
        heads = [m for n, m in model.named_modules() if _is_box_head(n)]  # type: ignore[attr-defined]
        for head in heads:
            last = head.layers[-1]
            last.weight.zero_()
            last.bias.copy_(torch.tensor([-30.0, -30.0, 30.0, 30.0]))  # centre (0, 0), size 1 x 1


def _is_class_head(name: str) -> bool:
    return name.endswith("enc_score_head") or re.search(r"(^|\.)class_embed\.\d+$", name) is not None


def _is_box_head(name: str) -> bool:
    return name.endswith("enc_bbox_head") or re.search(r"(^|\.)bbox_embed\.\d+$", name) is not None


@contextmanager
def table_engines_stand_in() -> Iterator[None]:
    """Docling's TableFormer v2 module as a stand-in while the real one cannot be imported here."""
    try:
        importlib.import_module(TABLE_ENGINES_MODULE)
    except Exception:  # no torchvision, or one built for another torch
        pass
    else:
        yield
        return
    from docling.datamodel.pipeline_options import TableStructureV2Options
    from docling.models.base_table_model import BaseTableStructureModel

    class TableStructureModelV2(BaseTableStructureModel):  # never built: the tests' pipelines have tables off
        @classmethod
        def get_options_type(cls) -> type[TableStructureV2Options]:
            return TableStructureV2Options

    module = types.ModuleType(TABLE_ENGINES_MODULE)
    module.TableStructureModelV2 = TableStructureModelV2  # type: ignore[attr-defined]
    sys.modules[TABLE_ENGINES_MODULE] = module
    try:
        yield
    finally:
        sys.modules.pop(TABLE_ENGINES_MODULE, None)
