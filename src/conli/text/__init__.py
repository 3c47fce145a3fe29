"""Text plumbing every floor may use: words, token estimates, the spaCy pipeline."""
