"""Extract, one shape for every kind: ``registry.py`` maps the kind a model's family serves to its handler,
``protocol.py`` is what each handler does (decode inputs, queue work, assemble the answer) and what they
share, ``queue.py`` puts their work (and encode's and score's, ``engine/service.py``) on the shared scheduler,
and each kind is one module:

    entities.py        GLiNER spans (and GLiNER2 schemas) in texts
    documents.py       whole documents parsed (docling), scanned pages read by the config's OCR model
    pictures.py        images and rendered PDF pages: OCR, detectors, Florence-2
    speech.py          audio to transcripts
    classification.py  labels with scores for texts (NLI, GLiClass, sequence heads)
    guard.py           a causal LM's moderation verdict on the decode loop
"""
