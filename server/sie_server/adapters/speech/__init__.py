"""Speech to text: audio in (decoded and resampled by ``engine/audio_inputs.py``), a transcript out."""
