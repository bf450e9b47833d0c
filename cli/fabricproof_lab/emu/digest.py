"""SHA-256 and BLAKE2b from the interpreter's built-in modules: the same digests without hashlib's OpenSSL load."""

# hashlib's import loads OpenSSL's _hashlib (~3-4 ms), a tenth of an emulated probe's CPU; these are the modules
# hashlib itself falls back to. Python 3.12 renamed _sha256 to _sha2.
try:
    from _sha256 import sha256
except ImportError:  # pragma: no cover - Python 3.12+
    try:
        from _sha2 import sha256  # type: ignore[no-redef]
    except ImportError:
        from hashlib import sha256  # type: ignore[no-redef]
try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a build without it
    from hashlib import blake2b  # type: ignore[no-redef]

__all__ = ["blake2b", "sha256"]
