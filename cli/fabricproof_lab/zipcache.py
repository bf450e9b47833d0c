"""Lab nodes' Python: what Ansible's modules import from their zip is compiled once per lab, not once per task.

Every Ansible task ships its module with `ansible.module_utils` in a fresh zip (AnsiballZ, under a new temporary name),
and Python's zipimport never caches bytecode (3.11's compiles each module twice per import: once to name its file,
once to run it), so each task on a node compiles ~50 modules again: ~70 ms of the ~180 ms of CPU a `command` task
costs the node (measured on the lab with ansible-core 2.19 and Debian's Python 3.11).
The lab's nodes share one machine with the controller and the tests, so the lab keeps the compiled code, keyed by
the module's path inside the zip and its exact source text; a hit is the same code object with the current file
name, so a traceback still names the file the task really ran. Real nodes never load this: `lab up` copies this file
to <labdir>/lib/node-python/sitecustomize.py, and only the lab's sshd puts that directory on PYTHONPATH, with
FABRICPROOF_LAB_ZIPCACHE naming the lab's cache directory.

Standard library only, imported at the start of every Python on a lab node: keep it cheap.
"""

import os
import sys
import zipimport

ENV = "FABRICPROOF_LAB_ZIPCACHE"


def _refile(code, filename):
    """The code object and every code object nested in it, named `filename` (co_filename) as a fresh compile names
    it."""
    consts = tuple(_refile(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def caching(compile_source, directory):
    """A drop-in for zipimport's compile step that keeps what it compiled in `directory`."""
    import marshal

    tag = sys.implementation.cache_tag  # marshalled code is only good for the Python that wrote it

    def compile_cached(pathname, source):
        inner = pathname.partition(".zip" + os.sep)[2]
        if not inner:
            return compile_source(pathname, source)
        import _sha1  # the built-in, not hashlib: hashlib loads OpenSSL (~5 ms) in every Python on the node

        key = _sha1.sha1(inner.encode() + b"\0" + source).hexdigest()
        path = os.path.join(directory, f"{tag}-{key}")
        try:
            with open(path, "rb") as f:
                return _refile(marshal.loads(f.read()), pathname)
        except (OSError, EOFError, ValueError, TypeError):  # absent, or cut short / corrupt: compile it again
            pass
        code = compile_source(pathname, source)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:  # atomic: the forks of one play miss together and write the same entry
            with open(tmp, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(tmp, path)
        except OSError:  # a full or read-only cache costs speed, never the task
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return code

    return compile_cached


def install(directory):
    """Route zipimport's compiling through the cache in `directory`; False (nothing changed) when this Python's
    zipimport has no such step to wrap."""
    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None or not os.path.isdir(directory):
        return False
    zipimport._compile_source = caching(compile_source, directory)
    return True


if __name__ == "sitecustomize" and os.environ.get(ENV):
    install(os.environ[ENV])
