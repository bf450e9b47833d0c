"""SSH transport (paramiko): one connection and ONE framed remote exec per host, strict host-key checking."""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


# paramiko imports invoke only to run ssh_config's `Match exec`, which fabricproof never reads (the inventory sets each
# host), and invoke costs every process that connects ~80 ms of CPU (asyncio, unittest.mock...), a sharded run's
# workers each. The import is refused for that moment only: a later `import invoke` in the process works as before,
# and where invoke is already loaded paramiko takes it.
_REFUSE_INVOKE = "invoke" not in sys.modules
if _REFUSE_INVOKE:
    sys.modules["invoke"] = None  # type: ignore[assignment]  # the import system's "not importable"
try:
    import paramiko
finally:
    if _REFUSE_INVOKE and sys.modules.get("invoke", ...) is None:
        del sys.modules["invoke"]

from .. import spool
from ..model import Command, CommandResult, Host
from ..runstore import RunStore
from . import framing, knownhosts, liblog
from .base import ErrorKind, HostError, RunContext, Transport
from .sshopts import SettingsError, SSHOptions, Target, target

#: The exec request: the login shell replaces itself with sh reading the script from stdin. The
#: script (and its nonce) never appears in an argv that a process on the host could read.
REMOTE_COMMAND = "exec /bin/sh -s"
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")
_READ = 1 << 16
_PAPERWORK_S = 5.0  # KEX, auth and channel setup are given at least this long, whatever the deadline
#: What a server may send before its version line: RFC 4253 allows lines of 255 bytes, paramiko reads 100 of them.
BANNER_BYTES = 64 << 10
#: How often paramiko's reader thread wakes with nothing to read, once a host is authenticated (paramiko: every 0.1 s,
#: to notice a close it could learn from the socket). Measured on 20 idle lab connections: 0.27 ms of CPU per
#: connection-second at 0.1 s, 0.03 at 1 s; a loaded run keeps a host connected for tens of seconds (~5 ms a host).
#: Data and the server's close still wake it at once; only a close of our own waits up to this long for the thread.
READER_WAKE_S = 1.0


def _said(exc: object) -> str:
    """An exception's text for a host's one-line error: paramiko quotes what the server sent (its banner line, of any
    length), so it is escaped, cut to one line and bounded."""
    return liblog.one_line(str(exc)) or type(exc).__name__


class _BannerBound:
    """The socket paramiko reads, refusing more than BANNER_BYTES before the server's version line: paramiko reads
    the lines a server may send first without a bound on their length or size (a listener streaming one endless
    line would grow a buffer until the banner timeout). Once the version line is in, it is the socket itself."""

    def __init__(self, sock: socket.socket | paramiko.Channel):
        self._sock = sock
        self._left = BANNER_BYTES
        self.transport: paramiko.Transport | None = None

    def recv(self, n: int) -> bytes:
        data = self._sock.recv(n)
        if self._left is not None:
            if self.transport is not None and self.transport.remote_version:
                self._left = None
            else:
                self._left -= len(data)
                if self._left < 0:
                    raise EOFError(f"the server sent more than {BANNER_BYTES >> 10} KiB before its SSH version line")
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


def _first(preferred: Sequence[str], offered: Sequence[str]) -> tuple[str, ...]:
    """An algorithm list with `preferred` moved to the front, the rest in their order."""
    return tuple(dict.fromkeys([*preferred, *offered]))


@dataclass
class _Connection:
    """The final SSH transport plus the jump transports it tunnels through (closed in reverse)."""

    transport: paramiko.Transport
    hops: list[paramiko.Transport] = field(default_factory=list)

    def close(self) -> None:
        for t in (self.transport, *reversed(self.hops)):
            try:
                t.close()
            except Exception:  # closing is best effort: the host may already be gone
                pass


class _Liveness:
    """Whether a connection still answers while its commands print nothing: after `interval_s` of silence a
    keepalive global request with want_reply (sshd answers any, as OpenSSH's ServerAlive relies on), asked from a
    thread of its own since paramiko waits for the reply without a timeout; silence past `interval_s * count_max`
    means the host is gone. The thread ends when the reply comes or the transport closes."""

    def __init__(self, tr: paramiko.Transport, interval_s: float, count_max: int):
        self.tr = tr
        self.interval_s = interval_s
        self.limit_s = interval_s * max(1, count_max)
        self.heard = time.monotonic()  # the last sign of life: a byte, or a keepalive's answer
        self.received = 0
        self.answered = threading.Event()
        self.asking = False

    def gone(self, received: int) -> bool:
        """Call with the bytes received so far; True once the host has been silent past the limit."""
        now = time.monotonic()
        if received != self.received or (self.asking and self.answered.is_set()):
            self.received, self.heard, self.asking = received, now, False
        if now - self.heard < self.interval_s:
            return False
        if not self.asking:
            self.asking = True
            self.answered.clear()
            threading.Thread(target=self._ask, name="ssh-keepalive", daemon=True).start()
        return now - self.heard >= self.limit_s

    def _ask(self) -> None:
        try:
            self.tr.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # noqa: BLE001 - a failed ask is no answer; the deadline and is_active() still hold
            return
        if self.tr.is_active():
            self.answered.set()


@dataclass(frozen=True)
class _Endpoint:
    """One SSH server on the way: a jump host or the target itself."""

    label: str  # for messages: inventory name, or "jump host X for Y"
    hostname: str
    port: int
    user: str
    known_name: str  # the name looked up in known_hosts
    fallback_name: str | None = None  # also accepted when known_name is new: the bare name of a non-22 port


class SSHTransport(Transport):
    """Collects over paramiko. Thread-safe: one instance serves a whole run's thread pool."""

    name = "ssh"

    def __init__(self, options: SSHOptions | None = None, ctx: RunContext | None = None):
        self.options = options or SSHOptions()
        self.default_known_hosts = tuple(self.options.default_known_hosts)
        self.known = knownhosts.KnownHosts(())
        self._keys: dict[str, paramiko.PKey] = {}
        self._keys_lock = threading.Lock()
        self._accept_lock = threading.Lock()
        self._closing = threading.Event()  # close() during a run (Ctrl-C) cuts running hosts short
        self._spool_dir = RunStore(ctx.run_dir).spool_dir if ctx is not None else None

    # ------------------------------------------------------------------ the seam
    def run_many(self, host: Host, commands: Sequence[Command], deadline: float) -> list[CommandResult]:
        try:
            tgt = target(host.name, host.vars, default_known_hosts=self.default_known_hosts)
        except SettingsError as exc:
            raise HostError(ErrorKind.CONFIG, str(exc)) from None
        conn = self._connect(tgt, deadline)
        try:
            return self._exec(conn, tgt, list(commands), deadline)
        finally:
            conn.close()

    def close(self) -> None:
        self._closing.set()
        with self._keys_lock:
            self._keys.clear()

    # ------------------------------------------------------------------ connecting
    def _connect(self, tgt: Target, deadline: float) -> _Connection:
        """Connect with retries and exponential backoff; only failures that may pass are retried."""
        backoff = self.options.retry_backoff_s
        attempt = 1
        while True:
            try:
                return self._connect_once(tgt, deadline)
            except HostError as exc:
                last_try = attempt >= self.options.connect_attempts
                if not exc.retryable or last_try or time.monotonic() + backoff >= deadline:
                    if attempt > 1:
                        exc.message += f" (after {attempt} attempts)"
                    raise
            time.sleep(backoff)
            backoff *= 2
            attempt += 1

    def _connect_once(self, tgt: Target, deadline: float) -> _Connection:
        final = _Endpoint(tgt.name, tgt.hostname, tgt.port, tgt.user,
                          knownhosts.host_id(tgt.hostname, tgt.port, tgt.host_key_alias),
                          knownhosts.fallback_id(tgt.hostname, tgt.port, tgt.host_key_alias))
        hops = [_Endpoint(f"jump host {h} for {tgt.name}", h.hostname, h.port, h.user or tgt.user,
                          knownhosts.host_id(h.hostname, h.port), knownhosts.fallback_id(h.hostname, h.port))
                for h in tgt.jumps]
        conn: _Connection | None = None
        sock: socket.socket | paramiko.Channel | None = None
        opened: list[paramiko.Transport] = []
        try:
            for k, ep in enumerate([*hops, final]):
                tr = self._handshake(ep, sock, tgt, deadline)
                opened.append(tr)
                if ep is final:
                    conn = _Connection(tr, opened[:-1])
                    break
                nxt = ([*hops, final])[k + 1]
                sock = self._tunnel(tr, ep, nxt, deadline)
        finally:
            if conn is None:
                for tr in reversed(opened):
                    tr.close()
        assert conn is not None
        return conn

    def _connect_timeout(self, tgt: Target, deadline: float) -> float:
        budget = tgt.connect_timeout_s or self.options.connect_timeout_s
        return max(0.5, min(budget, deadline - time.monotonic()))

    def _tcp(self, ep: _Endpoint, tgt: Target, deadline: float) -> socket.socket:
        timeout = self._connect_timeout(tgt, deadline)
        try:
            sock = socket.create_connection((ep.hostname, ep.port), timeout=timeout)
        except socket.gaierror as exc:
            raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: cannot resolve {ep.hostname}: {exc.strerror}",
                            retryable=exc.errno == socket.EAI_AGAIN) from None
        except TimeoutError:
            raise HostError(ErrorKind.TIMEOUT, f"{ep.label}: connecting to {ep.hostname}:{ep.port} timed out "
                                               f"after {timeout:g} s", retryable=True) from None
        except ConnectionRefusedError:
            raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: connection refused by {ep.hostname}:{ep.port}",
                            retryable=True) from None
        except OSError as exc:
            raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: cannot connect to {ep.hostname}:{ep.port}: "
                                                   f"{exc.strerror or exc}", retryable=True) from None
        # Small request/response exchanges: never wait for Nagle.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _tunnel(self, via: paramiko.Transport, ep: _Endpoint, nxt: _Endpoint, deadline: float) -> paramiko.Channel:
        try:
            return via.open_channel("direct-tcpip", (nxt.hostname, nxt.port), ("127.0.0.1", 0),
                                    timeout=max(1.0, deadline - time.monotonic()))
        except paramiko.ChannelException as exc:
            raise HostError(ErrorKind.UNREACHABLE, f"{ep.label} cannot reach {nxt.hostname}:{nxt.port}: "
                                                   f"{_said(exc.text or exc)}", retryable=True) from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: tunnel to {nxt.hostname}:{nxt.port} failed: "
                                                   f"{_said(exc)}", retryable=True) from None

    def _handshake(self, ep: _Endpoint, sock: socket.socket | paramiko.Channel | None, tgt: Target,
                   deadline: float) -> paramiko.Transport:
        if sock is None:
            sock = self._tcp(ep, tgt, deadline)
        bounded = _BannerBound(sock)
        tr = paramiko.Transport(bounded)
        bounded.transport = tr
        tr.name = liblog.thread_name(ep.label)  # what paramiko logs of this host is captured under its name
        try:
            timeout = max(_PAPERWORK_S, self._connect_timeout(tgt, deadline))
            tr.banner_timeout = tr.auth_timeout = timeout
            # The packetizer's own handshake limit ends a stalled key exchange with a bare EOFError ("closed the
            # connection"); past start_client's, it leaves the stall to the check below, which says what happened.
            tr.handshake_timeout = timeout + _PAPERWORK_S
            self._prefer_known_key_types(tr, [t for name in (ep.known_name, ep.fallback_name) if name
                                              for t in knownhosts.known_types(
                                                  self.known.relevant(tgt.known_hosts_files, name), name)])
            self._prefer_aead_ciphers(tr)
            try:
                tr.start_client(timeout=timeout)
            except paramiko.SSHException as exc:
                raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: SSH handshake with {ep.hostname}:{ep.port} "
                                                       f"failed: {_said(exc)}", retryable=True) from None
            except (EOFError, OSError) as exc:
                raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: {ep.hostname}:{ep.port} closed the "
                                                       f"connection during the handshake ({type(exc).__name__})",
                                retryable=True) from None
            if not tr.is_active() or not tr.initial_kex_done:
                # start_client returns without a word when its timeout passes mid key exchange: a server that sent
                # its banner and stalled (overloaded sshd, MaxStartups) may answer the next attempt.
                raise HostError(ErrorKind.TIMEOUT, f"{ep.label}: {ep.hostname}:{ep.port} sent its SSH banner and then "
                                                   f"stalled: no key exchange within {timeout:g} s", retryable=True)
            self._check_host_key(ep, tr.get_remote_server_key(), tgt)
            self._authenticate(tr, ep, tgt)
            bounded.settimeout(READER_WAKE_S)
            return tr
        except BaseException:
            tr.close()
            raise

    @staticmethod
    def _prefer_known_key_types(tr: paramiko.Transport, known: list[str]) -> None:
        """Ask first for the key types known_hosts holds, as OpenSSH does, so a host with several keys
        is checked against the one we know instead of failing as unknown."""
        if not known:
            return
        opts = tr.get_security_options()
        offered = list(opts.key_types)
        names = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}
        opts.key_types = _first([a for t in known for a in names.get(t, (t,)) if a in offered], offered)

    @staticmethod
    def _prefer_aead_ciphers(tr: paramiko.Transport) -> None:
        """Offer AES-GCM first (OpenSSH has had it since 6.2). With AES-CTR, paramiko checks every
        packet's HMAC with a byte-by-byte Python loop (~5 % of the client's CPU in a profile of 200 lab
        hosts); GCM authenticates inside OpenSSL. The other ciphers stay offered, after it."""
        opts = tr.get_security_options()
        opts.ciphers = _first([c for c in opts.ciphers if c.endswith("-gcm@openssh.com")], opts.ciphers)

    # ------------------------------------------------------------------ host keys
    def _judge(self, tgt: Target, name: str, keytype: str, blob: bytes) -> knownhosts.Judgement:
        return knownhosts.judge(self.known.relevant(tgt.known_hosts_files, name), name, keytype, blob)

    def _check_host_key(self, ep: _Endpoint, key: paramiko.PKey, tgt: Target) -> None:
        """OpenSSH's check_host_key: known -> go on; revoked or changed -> refuse; new -> refuse, unless the bare
        name of a non-22 port knows this very key, or --accept-new-host-keys records it."""
        keytype, blob = key.get_name(), key.asbytes()
        offered = knownhosts.fingerprint(blob)
        j = self._judge(tgt, ep.known_name, keytype, blob)
        if j.verdict is knownhosts.Verdict.KNOWN:
            return
        if j.verdict is knownhosts.Verdict.UNKNOWN and ep.fallback_name:
            bare = self._judge(tgt, ep.fallback_name, keytype, blob)
            if bare.verdict is knownhosts.Verdict.KNOWN:
                return  # as OpenSSH: "found matching key w/out port"
            if bare.verdict is knownhosts.Verdict.REVOKED:
                j = bare
        if j.verdict is knownhosts.Verdict.REVOKED:
            raise HostError(ErrorKind.HOSTKEY_MISMATCH, f"{ep.label} ({ep.known_name}) offered the {keytype} key "
                                                        f"{offered}, which {j.expected[0].source} marks @revoked")
        if j.verdict is knownhosts.Verdict.CHANGED:
            known = "; ".join(f"{e.keytype} {knownhosts.fingerprint(e.blob)} in {e.source}" for e in j.expected[:3])
            raise HostError(ErrorKind.HOSTKEY_MISMATCH,
                            f"{ep.label} ({ep.known_name}) offered the {keytype} key {offered}, but known_hosts "
                            f"has {known}. REMOTE HOST IDENTIFICATION HAS CHANGED: a reinstalled host, or someone "
                            f"in the middle. Refusing to connect, with or without --accept-new-host-keys; if the "
                            f"change is expected, replace that line")
        if not self.options.accept_new_host_keys:
            raise HostError(ErrorKind.HOSTKEY_UNKNOWN,
                            f"{ep.label} ({ep.known_name}) is not in known_hosts; it offered the {keytype} "
                            f"key {offered}. Verify it and add it to known_hosts, or run with --accept-new-host-keys")
        with self._accept_lock:  # two threads meeting the same new jump host record it once
            j = self._judge(tgt, ep.known_name, keytype, blob)
            if j.verdict is knownhosts.Verdict.UNKNOWN:
                self.known.add(tgt.new_keys_file, ep.known_name, keytype, blob)
            elif j.verdict is not knownhosts.Verdict.KNOWN:
                raise HostError(ErrorKind.HOSTKEY_MISMATCH, f"{ep.label} ({ep.known_name}) offered {offered}, "
                                                            f"which does not match the key just recorded for it")

    # ------------------------------------------------------------------ authentication
    def _load_key(self, path: str) -> paramiko.PKey:
        full = os.path.expanduser(path)
        with self._keys_lock:
            key = self._keys.get(full)
        if key is not None:
            return key
        try:
            key = paramiko.PKey.from_path(full)
        except FileNotFoundError:
            raise HostError(ErrorKind.CONFIG, f"private key file {path} not found") from None
        except PermissionError:
            raise HostError(ErrorKind.CONFIG, f"private key file {path} is not readable") from None
        except TypeError:  # cryptography: "Password was not given but private key is encrypted"
            raise HostError(ErrorKind.CONFIG, f"private key {path} is encrypted; load it into ssh-agent "
                                              f"and leave ansible_ssh_private_key_file unset") from None
        except (paramiko.SSHException, ValueError) as exc:
            raise HostError(ErrorKind.CONFIG, f"cannot read private key {path}: {exc}") from None
        with self._keys_lock:
            self._keys[full] = key
        return key

    def _authenticate(self, tr: paramiko.Transport, ep: _Endpoint, tgt: Target) -> None:
        tried: list[str] = []
        keys: list[tuple[str, paramiko.PKey]] = [(p, self._load_key(p)) for p in tgt.key_files]
        agent: paramiko.Agent | None = None
        if not keys:
            if os.environ.get("SSH_AUTH_SOCK"):
                # One agent connection per host: paramiko's agent client is not safe to share across threads.
                agent = paramiko.Agent()
                keys += [(f"agent key {k.get_fingerprint().hex()[:16]}", k) for k in agent.get_keys()]
            keys += [(p, self._load_key(p)) for p in DEFAULT_IDENTITIES if Path(p).expanduser().is_file()]
        try:
            for label, key in keys:
                tried.append(label)
                try:
                    if not tr.auth_publickey(ep.user, key) and tr.is_authenticated():
                        return
                except paramiko.BadAuthenticationType as exc:
                    tried[-1] += f" (server accepts only {', '.join(exc.allowed_types)})"
                    break
                except paramiko.AuthenticationException:
                    continue
                except (paramiko.SSHException, EOFError, OSError) as exc:
                    raise HostError(ErrorKind.UNREACHABLE, f"{ep.label}: connection lost during authentication: "
                                                           f"{_said(exc)}", retryable=True) from None
            if tgt.password is not None:
                tried.append("password")
                try:
                    tr.auth_password(ep.user, tgt.password)
                    if tr.is_authenticated():
                        return
                except paramiko.AuthenticationException:
                    pass
        finally:
            if agent is not None:
                agent.close()
        what = ", ".join(tried) if tried else "no key (set ansible_ssh_private_key_file, or load a key into ssh-agent)"
        raise HostError(ErrorKind.AUTH, f"{ep.label}: {ep.user}@{ep.hostname}:{ep.port} refused {what}")

    # ------------------------------------------------------------------ the one exec
    def _exec(self, conn: _Connection, tgt: Target, commands: list[Command],
              deadline: float) -> list[CommandResult]:
        nonce = framing.new_nonce()
        script = framing.build_script(commands, nonce, tgt.become).encode()
        tr = conn.transport
        try:
            chan = tr.open_session(timeout=max(_PAPERWORK_S, deadline - time.monotonic()))
            chan.exec_command(REMOTE_COMMAND)
            chan.sendall(script)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise HostError(ErrorKind.PROTOCOL, f"{tgt.name}: cannot start the remote shell: "
                                                f"{_said(exc)}", retryable=False) from None
        # Both streams are split into commands as they arrive; past the host's small memory bound a command's
        # output goes to a file in the run's evidence directory (renamed into place, never copied), so a host
        # printing without end costs the controller disk up to the cap, not memory.
        spooler = spool.Spooler(self._spool_dir, self.options.memory_bytes)
        out, err = framing.Demux(nonce, spooler), framing.Demux(nonce, spooler)
        received = 0
        cut = "the connection closed before the command finished"
        poller = select.poll()
        poller.register(chan.fileno(), select.POLLIN)
        alive = _Liveness(tr, self.options.alive_interval_s, self.options.alive_count_max)
        try:
            while True:
                # Past the cap the loop ends: a host printing faster than it is read must not keep it here.
                while chan.recv_ready() and received <= self.options.max_output_bytes:
                    data = chan.recv(_READ)
                    received += len(data)
                    out.feed(data, time.monotonic())
                while chan.recv_stderr_ready() and received <= self.options.max_output_bytes:
                    data = chan.recv_stderr(_READ)
                    received += len(data)
                    err.feed(data, time.monotonic())
                if (chan.eof_received or chan.closed) and not chan.recv_ready() and not chan.recv_stderr_ready():
                    if not tr.is_active():
                        cut = "the connection to the host was lost"
                    break
                if received > self.options.max_output_bytes:
                    cut = f"the host printed more than {self.options.max_output_bytes >> 20} MiB; stopped reading"
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    cut = "the host's collection deadline passed"
                    break
                if not tr.is_active():
                    cut = "the connection to the host was lost"
                    break
                if alive.gone(received):
                    cut = f"the host stopped answering: nothing, not even a keepalive reply, for {alive.limit_s:g} s"
                    break
                if self._closing.is_set():
                    cut = "the collection was interrupted"
                    break
                poller.poll(min(remaining, 1.0) * 1000)
            now = time.monotonic()
            results = framing.decode_results(commands, out.close(now), err.close(now), nonce, cut_reason=cut)
        except BaseException:
            spooler.discard()
            raise
        finally:
            chan.close()
        if all(r.error and r.error.startswith("not run") for r in results):
            spooler.discard()
            junk = framing.first_line(bytes(err.preamble)) or framing.first_line(bytes(out.preamble))
            raise HostError(ErrorKind.FAILED, f"{tgt.name}: the remote shell ran no command"
                                              f"{': ' + junk if junk else ''} ({cut})")
        spooler.discard(keep={p for r in results for p in (r.stdout_path, r.stderr_path)})
        return results
