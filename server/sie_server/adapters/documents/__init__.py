"""Document parsers: whole documents (PDF, DOCX, PPTX, XLSX, HTML, Markdown) in, their text out."""
