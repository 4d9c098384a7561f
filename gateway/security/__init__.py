"""Keys, hashes and encryption, signed tokens, API-key cache, SSRF checks."""
