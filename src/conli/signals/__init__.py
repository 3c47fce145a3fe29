"""Word-level and forward-pass signals of seed 001: lexical overlap, alignment, the fused model."""
