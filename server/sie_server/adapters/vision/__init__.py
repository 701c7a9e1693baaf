"""Media extractors that read or look at pictures: OCR engines, Florence-2, open-vocabulary detectors."""
