"""A board's UART on the network: an RFC 2217 server in front of a serial device (the board
emulator's pty), built on pyserial's PortManager, as ser2net serves a labgrid exporter's
serial port. TESTS ONLY. One client at a time; a client that connects and leaves (a probe) is
fine."""

from __future__ import annotations

import socket
import threading

import serial
import serial.rfc2217


class _PtySerial(serial.Serial):
    """A pty has no modem lines: they read as off, and setting them does nothing."""

    cts = dsr = ri = cd = property(lambda self: False)

    def _update_rts_state(self) -> None:
        pass

    def _update_dtr_state(self) -> None:
        pass

    def _update_break_state(self) -> None:
        pass


class Rfc2217Bridge:
    def __init__(self, device: str, host: str = "127.0.0.1"):
        self.device = device
        self._server = socket.create_server((host, 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="rfc2217", daemon=True)

    def __enter__(self) -> Rfc2217Bridge:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        device = _PtySerial(self.device, 115200, timeout=0.05)
        manager = serial.rfc2217.PortManager(device, _Writer(conn))
        done = threading.Event()

        def to_client() -> None:
            while not done.is_set() and not self._stop.is_set():
                try:
                    data = device.read(4096)
                    if data:
                        conn.sendall(b"".join(manager.escape(data)))
                except (OSError, serial.SerialException):
                    done.set()

        reader = threading.Thread(target=to_client, daemon=True)
        reader.start()
        conn.settimeout(0.2)
        try:
            while not done.is_set() and not self._stop.is_set():
                try:
                    data = conn.recv(1024)
                except TimeoutError:
                    continue
                if not data:
                    break
                device.write(b"".join(manager.filter(data)))
        except OSError:
            pass
        finally:
            done.set()
            reader.join(timeout=2)
            device.close()


class _Writer:
    def __init__(self, conn: socket.socket):
        self.conn = conn

    def write(self, data: bytes) -> None:
        try:
            self.conn.sendall(data)
        except OSError:
            pass
