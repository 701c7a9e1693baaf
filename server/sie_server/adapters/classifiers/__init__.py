"""extract on text as labels: zero-shot NLI, GLiClass, fixed-label sequence-classification heads
(the ``TextClassifier`` contract is in ``adapters/runtime/classify.py``)."""
