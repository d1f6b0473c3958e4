"""A message bus for Billeting's services: casts and calls over kombu.

One ``Bus`` is one messaging space: a RabbitMQ virtual host between
processes (``amqp://user:pw@host:5672/<vhost>``), or, inside one process,
kombu's in-memory transport (``memory:///<space>``). kombu's memory
transport keeps one global broker per process and ignores virtual hosts,
so a memory bus puts its space in front of every exchange and queue name:
two buses with different spaces cannot see each other's messages, exactly
as two RabbitMQ vhosts cannot. A component that is only handed its cell's
bus therefore has no way to reach the API bus — the isolation that makes
"a cell never calls up" true by wiring.

Addressing: a *topic* names a service ("scheduler", "conductor"); a topic
with a *server* ("compute" + "host-3") reaches one process. Several
processes serving one topic share its queue and each message goes to one
of them (competing consumers), which is how schedulers scale out.

Payloads are bytes (callers encode msgspec Structs); the envelope carries
the method name, a correlation id and the reply queue of a call.
"""
from __future__ import annotations

import logging
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import urlsplit

import kombu
import msgspec
from kombu import Exchange, Queue

from billeting import typeinfo

LOG = logging.getLogger(__name__)

CONTENT_TYPE = "application/x-billeting-envelope"
_POLL_S = 0.005  # memory transport: how often an idle consumer looks for work
# How long a consumer waits for a message before it looks at its stop event
# again (and, on AMQP, at the heartbeats): a stop waits out at most this.
_DRAIN_S = 0.1


class Envelope(msgspec.Struct, frozen=True, omit_defaults=True):
    method: str
    payload: msgspec.Raw = msgspec.Raw(b"null")
    correlation_id: str | None = None
    reply_to: str | None = None
    # Set on replies to a call that failed: the error's kind and message.
    error_type: str | None = None
    error: str | None = None
    # When the sender published it (its wall clock, seconds since the epoch):
    # how long a request waited in the queue. Absent from older senders.
    sent_at: float | None = None


# The message a handler runs for (set on the handler's thread): whether the broker delivered it before, to a consumer
# that went away without acknowledging it.
_delivery = threading.local()


def redelivered() -> bool:
    """In a handler of a server with ``ack_early=False``: this message was
    delivered before to a consumer that died holding it."""
    return bool(getattr(_delivery, "redelivered", False))


def sent_at() -> float | None:
    """In a handler: when the sender published this message (its ``time.time()``), if it said."""
    return getattr(_delivery, "sent_at", None)


_encode = msgspec.json.Encoder().encode
_decode_envelope = typeinfo.decoder(Envelope).decode


class BusUnavailable(Exception):
    """The broker refused or dropped the connection."""


class CallTimeout(Exception):
    """No reply to a call within its timeout."""


class RemoteError(Exception):
    """The handler of a call raised; ``kind`` and ``payload`` say what."""

    def __init__(self, kind: str, message: str, payload: bytes = b"null") -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.payload = payload


class HandlerError(Exception):
    """Raise from a handler to send a typed error back: ``kind`` (e.g.
    "NoValidHost") and an optional payload the caller decodes."""

    def __init__(self, kind: str, message: str, payload: bytes = b"null") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.payload = payload


Handler = Callable[[bytes], bytes | None]


def space_of(url: str) -> str:
    """The messaging space a URL names (its virtual host, "/" by default)."""
    path = urlsplit(url).path
    return path[1:] if len(path) > 1 else "/"


class Bus:
    """Thread-safe. Publishing shares one connection under a lock; every
    server and the reply listener get connections of their own."""

    def __init__(self, url: str, *, heartbeat: int = 30) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("memory", "amqp", "pyamqp"):
            raise ValueError(f"unsupported bus URL {url!r}: use memory:///SPACE or amqp://USER:PW@HOST:PORT/VHOST")
        self.url = url
        self.memory = parts.scheme == "memory"
        self.space = space_of(url)
        self.url_shown = re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)
        # memory: namespace by hand (see module doc); AMQP: the vhost does it.
        self._prefix = f"{self.space}." if self.memory else ""
        self._heartbeat = 0 if self.memory else heartbeat
        self._publish_lock = threading.Lock()
        self._publisher: kombu.Connection | None = None
        self._replies: dict[str, Future] = {}
        self._replies_lock = threading.Lock()
        self._reply_queue: str | None = None
        self._reply_listener: _Listener | None = None
        self._servers: list[Server] = []
        self._closed = False

    # --- names and connections ---------------------------------------------------

    def name(self, topic: str, server: str | None = None) -> str:
        return f"{self._prefix}{topic}" + (f".{server}" if server else "")

    def connect(self) -> kombu.Connection:
        if self.memory:
            return kombu.Connection("memory://", transport_options={"polling_interval": _POLL_S})
        return kombu.Connection(self.url, heartbeat=self._heartbeat, connect_timeout=10)

    def check(self, timeout: float = 5.0) -> None:
        """Raise BusUnavailable unless the broker takes a connection now (a
        wrong password, vhost or address): services ask before they register
        anywhere, rather than fail with their records already written."""
        if self.memory:
            return
        try:
            with self.connect() as conn:
                conn.ensure_connection(max_retries=1, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - every broker failure, in one line
            text = str(exc).strip().splitlines()
            raise BusUnavailable(f"cannot connect to {self.url_shown}: {text[0] if text else type(exc).__name__}") \
                from None

    def _exchange(self) -> Exchange:
        return Exchange(self.name("billeting"), type="direct", durable=False)

    def queue(self, topic: str, server: str | None = None, *, exclusive: bool = False) -> Queue:
        name = self.name(topic, server)
        return Queue(name, exchange=self._exchange(), routing_key=name, durable=False,
                     auto_delete=exclusive, exclusive=exclusive and not self.memory)

    # --- sending -----------------------------------------------------------------

    def _publish(self, routing_key: str, envelope: Envelope, declare: Queue | None = None) -> None:
        body = _encode(envelope)
        with self._publish_lock:
            for attempt in (1, 2):
                try:
                    if self._publisher is None:
                        self._publisher = self.connect()
                    producer = self._publisher.Producer(serializer=None)
                    producer.publish(body, exchange=self._exchange(), routing_key=routing_key,
                                     content_type=CONTENT_TYPE, content_encoding="binary",
                                     declare=[declare] if declare is not None else [],
                                     retry=True, retry_policy={"max_retries": 3})
                    return
                except Exception as exc:  # noqa: BLE001 - broker failures of every kind
                    LOG.warning("publishing to %s failed (%s); reconnecting", routing_key, exc)
                    self._drop_publisher()
                    if attempt == 2:
                        raise BusUnavailable(f"cannot publish on {self.url_shown}: {exc}") from None

    def _drop_publisher(self) -> None:
        if self._publisher is not None:
            try:
                self._publisher.release()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass
            self._publisher = None

    def cast(self, topic: str, method: str, payload: bytes = b"null", *, server: str | None = None) -> None:
        """Send and forget: one of the topic's servers handles it."""
        self._publish(self.name(topic, server), Envelope(method, msgspec.Raw(payload), sent_at=time.time()),
                      declare=self.queue(topic, server))

    def call(self, topic: str, method: str, payload: bytes = b"null", *, server: str | None = None,
             timeout: float = 60.0) -> bytes:
        """Send and wait for the reply's payload. Raises CallTimeout, RemoteError."""
        reply_to = self._ensure_reply_queue()
        correlation = uuid.uuid4().hex
        future: Future = Future()
        with self._replies_lock:
            self._replies[correlation] = future
        try:
            self._publish(self.name(topic, server),
                          Envelope(method, msgspec.Raw(payload), correlation, reply_to, sent_at=time.time()),
                          declare=self.queue(topic, server))
            try:
                reply: Envelope = future.result(timeout)
            except TimeoutError:
                raise CallTimeout(f"no reply from {topic}{'.' + server if server else ''}.{method} "
                                  f"within {timeout:g} s") from None
        finally:
            with self._replies_lock:
                self._replies.pop(correlation, None)
        if reply.error_type is not None:
            raise RemoteError(reply.error_type, reply.error or "", bytes(reply.payload))
        return bytes(reply.payload)

    def _ensure_reply_queue(self) -> str:
        with self._replies_lock:
            if self._reply_queue is None:
                topic = f"reply.{uuid.uuid4().hex}"
                queue = self.queue(topic, exclusive=True)
                listener = _Listener(self, [queue], self._on_reply, name=f"bus-replies-{topic[6:14]}",
                                     ack_early=True)
                listener.start()
                self._reply_listener = listener
                self._reply_queue = queue.routing_key
            return self._reply_queue

    def _on_reply(self, envelope: Envelope) -> None:
        with self._replies_lock:
            future = self._replies.get(envelope.correlation_id or "")
        if future is not None and not future.done():
            future.set_result(envelope)

    # --- serving -----------------------------------------------------------------

    def serve(self, topic: str, handlers: dict[str, Handler], *, server: str | None = None,
              threads: int = 1, ack_early: bool = True) -> "Server":
        """Handle the topic's messages on ``threads`` worker threads until
        ``stop()``. ``ack_early`` acknowledges a message when it is taken
        (at most once: a crash loses it); otherwise when its handler returns
        (at least once: a crash hands it to another server)."""
        srv = Server(self, topic, server, handlers, threads=threads, ack_early=ack_early)
        srv.start()
        self._servers.append(srv)
        return srv

    def reply(self, request: Envelope, payload: bytes | None = None, *, error: HandlerError | None = None) -> None:
        if request.reply_to is None:
            return
        if error is not None:
            envelope = Envelope("reply", msgspec.Raw(error.payload or b"null"), request.correlation_id,
                                error_type=error.kind, error=error.message)
        else:
            envelope = Envelope("reply", msgspec.Raw(payload if payload is not None else b"null"),
                                request.correlation_id)
        self._publish(request.reply_to, envelope)

    def close(self) -> None:
        self._closed = True
        for srv in self._servers:
            srv.request_stop()
        for srv in self._servers:
            srv.stop()
        if self._reply_listener is not None:
            self._reply_listener.stop()
        with self._publish_lock:
            self._drop_publisher()


class _Listener:
    """A thread that consumes queues on a connection of its own and hands
    each envelope to ``deliver``; reconnects after broker failures."""

    def __init__(self, bus: Bus, queues: list[Queue], deliver: Callable[[Envelope], None], *,
                 name: str, ack_early: bool, prefetch: int = 1,
                 deliver_late: Callable[[Envelope, bool, Callable[[], None]], None] | None = None) -> None:
        self.bus = bus
        self.queues = queues
        self.deliver = deliver
        # ack_early=False: ``deliver_late(envelope, redelivered, done)`` hands
        # the message to a worker, which calls ``done`` when it has handled it;
        # the acknowledgement itself is sent from this thread (a connection is
        # not shared between threads), which keeps draining -- and answering
        # the broker's heartbeats -- while handlers run for as long as they need.
        self.deliver_late = deliver_late
        self._acks: queue.SimpleQueue = queue.SimpleQueue()
        self.ack_early = ack_early
        self.prefetch = prefetch
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._failed: Exception | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Returns once consuming; raises when the first connection fails."""
        self._thread.start()
        self._ready.wait(15)
        if self._failed is not None:
            self._stop.set()
            raise BusUnavailable(f"cannot consume from {self.bus.url_shown}: {self._failed}")

    def request_stop(self) -> None:
        """Stop consuming at the end of the current drain, without waiting:
        a process stopping many listeners asks them all before joining any."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.bus.connect() as conn:
                    with conn.Consumer(self.queues, on_message=self._on_message, prefetch_count=self.prefetch,
                                       accept=[CONTENT_TYPE]):
                        self._ready.set()
                        while not self._stop.is_set():
                            try:
                                conn.drain_events(timeout=_DRAIN_S)
                            except socket.timeout:
                                if not self.bus.memory:
                                    conn.heartbeat_check()
                            self._send_acks()
            except Exception as exc:  # noqa: BLE001 - any broker failure: report, then reconnect
                if not self._ready.is_set():
                    self._failed = exc
                    self._ready.set()
                    return
                if self._stop.is_set():
                    return
                LOG.warning("bus consumer %s lost its connection (%s); reconnecting", self._thread.name, exc)
                self._stop.wait(1.0)

    def flush(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for the queued acknowledgements to be sent."""
        deadline = time.monotonic() + timeout
        while not self._acks.empty() and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _send_acks(self) -> None:
        while True:
            try:
                message = self._acks.get_nowait()
            except queue.Empty:
                return
            try:
                message.ack()
            except Exception as exc:  # noqa: BLE001 - its connection is gone: the broker delivers it again
                LOG.warning("could not acknowledge a handled message on %s (%s)", self._thread.name, exc)

    def _on_message(self, message) -> None:
        try:
            envelope = _decode_envelope(message.body)
        except msgspec.DecodeError:
            LOG.error("dropping a malformed message on %s", self._thread.name)
            message.ack()
            return
        if self.ack_early:
            message.ack()
            self.deliver(envelope)
        elif self.deliver_late is not None:
            self.deliver_late(envelope, bool((message.delivery_info or {}).get("redelivered")),
                              lambda: self._acks.put(message))
        else:
            _delivery.redelivered = bool((message.delivery_info or {}).get("redelivered"))
            try:
                self.deliver(envelope)
            finally:
                _delivery.redelivered = False
                message.ack()


class Server:
    """Serves one topic (optionally one server's queue of it)."""

    def __init__(self, bus: Bus, topic: str, server: str | None, handlers: dict[str, Handler], *,
                 threads: int, ack_early: bool) -> None:
        self.bus = bus
        self.topic = topic
        self.handlers = handlers
        self.ack_early = ack_early
        self._closing = False
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"bus-{topic}")
        self._slots = threading.Semaphore(threads)
        self.listener = _Listener(bus, [bus.queue(topic, server)], self._dispatch,
                                  name=f"bus-{bus.name(topic, server)}", ack_early=ack_early, prefetch=threads,
                                  deliver_late=None if ack_early else self._dispatch_late)

    def start(self) -> None:
        self.listener.start()

    def request_stop(self) -> None:
        """Begin stopping without waiting (``stop`` then waits). A server that
        acknowledges late keeps consuming until its handlers are done."""
        if self.ack_early:
            self.listener.request_stop()
        else:
            self._closing = True

    def stop(self) -> None:
        if not self.ack_early:
            # Let the handlers in progress finish and their acknowledgements
            # go out before the connection closes; what arrives meanwhile is
            # left unacknowledged, so the broker gives it to another server.
            self._closing = True
            self.pool.shutdown(wait=True, cancel_futures=False)
            self.listener.flush(timeout=2.0)
        self.listener.stop()
        self.pool.shutdown(wait=True, cancel_futures=False)

    def _dispatch(self, envelope: Envelope) -> None:
        if self.ack_early:
            # Taken off the queue already: run on the pool, never block the listener.
            self._slots.acquire()
            self.pool.submit(self._handle_released, envelope)
        else:
            self._handle(envelope)

    def _dispatch_late(self, envelope: Envelope, redelivered: bool, done: Callable[[], None]) -> None:
        if self._closing:
            return
        # At most ``threads`` unacknowledged (the prefetch): a slot is free.
        self._slots.acquire()
        self.pool.submit(self._handle_late, envelope, redelivered, done)

    def _handle_late(self, envelope: Envelope, redelivered: bool, done: Callable[[], None]) -> None:
        _delivery.redelivered = redelivered
        try:
            self._handle(envelope)
        finally:
            _delivery.redelivered = False
            self._slots.release()
            done()

    def _handle_released(self, envelope: Envelope) -> None:
        try:
            self._handle(envelope)
        finally:
            self._slots.release()

    def _handle(self, envelope: Envelope) -> None:
        handler = self.handlers.get(envelope.method)
        if handler is None:
            LOG.error("%s has no method %r", self.topic, envelope.method)
            self.bus.reply(envelope, error=HandlerError("UnknownMethod", f"{self.topic} has no method "
                                                                          f"{envelope.method!r}"))
            return
        _delivery.sent_at = envelope.sent_at
        try:
            result = handler(bytes(envelope.payload))
        except HandlerError as exc:
            self.bus.reply(envelope, error=exc)
        except Exception as exc:  # noqa: BLE001 - a failing handler must answer, not hang the caller
            LOG.exception("%s.%s failed", self.topic, envelope.method)
            self.bus.reply(envelope, error=HandlerError(type(exc).__name__, str(exc)))
        else:
            self.bus.reply(envelope, result)
        finally:
            _delivery.sent_at = None
