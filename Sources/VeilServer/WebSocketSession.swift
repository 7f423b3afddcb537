internal import CGLib
internal import CSoup
import VeilCore
import VeilGLib

/// One server-side WebSocket connection after its HTTP upgrade: Veil's own framing over the stream
/// libsoup hands over (`soup_server_message_steal_connection`), instead of libsoup's
/// `SoupWebsocketConnection`, which reads as much as a client sends in one go, inflates compressed
/// fragments into memory before any limit applies, and answers every ping frame with a pong of its
/// own (see docs/reliability.md, "A determined stranger").
///
/// The session only moves bytes. It reads when the server asks (`read(upTo:)`, once per readiness
/// callback, so the server decides how much each connection may make it parse), frames what the
/// server sends, keeps at most one pong queued, and runs the closing handshake. What a frame means
/// is `WebSocketFrameReader`'s business, what a connection may do the server's.
///
/// Used on the server's loop thread only.
final class WebSocketSession {
    /// What a read gave.
    enum ReadResult {
        /// These bytes (never empty).
        case bytes([UInt8])
        /// Nothing now: the readiness callback comes again when there is.
        case wouldBlock
        /// The client closed its side, or the connection failed.
        case ended
    }

    /// `lingering`: the close frame is queued or sent and the client's bytes are read and dropped
    /// until it closes too (see `linger()`).
    private enum State { case open, closing, lingering, closed }

    private let stream: UnsafeMutablePointer<GIOStream>
    private let input: OpaquePointer  // GPollableInputStream (an interface: opaque to Swift)
    private let output: OpaquePointer // GPollableOutputStream
    private var state = State.open
    private var readSource: GLibSource?
    private var writeSource: GLibSource?
    private var outgoing: [[UInt8]] = []
    private var outgoingOffset = 0             // into outgoing[0]
    private var pongQueued: Int?               // index in `outgoing` of a pong not yet started
    private var writingShut = false
    private var discardable = WebSocketSession.lingerLimit
    private let onReadable: () -> Void
    private let onClosed: () -> Void

    /// Bytes read from the client so far (frames, control frames, everything after the upgrade).
    private(set) var bytesRead: UInt64 = 0
    /// `bytesRead` when the closing handshake began (the server's close, or the client's).
    private(set) var bytesReadAtClose: UInt64?
    /// Bytes queued for the client and not yet written to the socket.
    private(set) var queuedBytes = 0
    /// The kernel's view of the connection (acknowledgements, its own send queue).
    let transport: TransportSocket?

    /// Takes over `stream` (a new reference: what `soup_server_message_steal_connection` returns).
    /// `onReadable` runs when the client has sent something (or closed); it should call `read`.
    /// `onClosed` runs once when the connection ends by itself: the client's close, end of
    /// stream, or a failure. Nil if the stream cannot be read and written without blocking.
    init?(stream: UnsafeMutablePointer<GIOStream>, transport: TransportSocket?,
          onReadable: @escaping () -> Void, onClosed: @escaping () -> Void) {
        let inputStream = UnsafeMutableRawPointer(g_io_stream_get_input_stream(stream))
        let outputStream = UnsafeMutableRawPointer(g_io_stream_get_output_stream(stream))
        guard let inputStream, let outputStream,
              g_type_check_instance_is_a(inputStream.assumingMemoryBound(to: GTypeInstance.self), g_pollable_input_stream_get_type()) != 0,
              g_type_check_instance_is_a(outputStream.assumingMemoryBound(to: GTypeInstance.self), g_pollable_output_stream_get_type()) != 0 else {
            g_io_stream_close(stream, nil, nil)
            g_object_unref(UnsafeMutableRawPointer(stream))
            return nil
        }
        self.stream = stream
        input = OpaquePointer(inputStream)
        output = OpaquePointer(outputStream)
        self.transport = transport
        self.onReadable = onReadable
        self.onClosed = onClosed
        resumeReading()
    }

    deinit {
        readSource = nil
        writeSource = nil
        if state != .closed { g_io_stream_close(stream, nil, nil) }
        g_object_unref(UnsafeMutableRawPointer(stream))
    }

    /// Whether messages can still be sent and are still read (no close sent or received).
    var isOpen: Bool { state == .open }

    /// At most this many bytes are read and dropped while lingering; a client that sends more is cut.
    static let lingerLimit = 256 * 1024

    // MARK: Reading

    /// Reads at most `limit` bytes without blocking.
    func read(upTo limit: Int) -> ReadResult {
        guard state == .open || state == .closing, limit > 0 else { return .wouldBlock }
        var outcome = Received.wouldBlock
        let bytes = [UInt8](unsafeUninitializedCapacity: limit) { buffer, initialized in
            outcome = receive(into: UnsafeMutableRawBufferPointer(buffer))
            if case .bytes(let count) = outcome { initialized = count }
        }
        if case .bytes = outcome { return .bytes(bytes) }
        return outcome == .wouldBlock ? .wouldBlock : .ended
    }

    /// What one non-blocking read into `buffer` gave: a byte count (counted in `bytesRead`), or
    /// nothing now, or the end.
    private enum Received: Equatable { case bytes(Int), wouldBlock, ended }

    private func receive(into buffer: UnsafeMutableRawBufferPointer) -> Received {
        var error: UnsafeMutablePointer<GError>?
        defer { if let error { g_error_free(error) } }
        let count = g_pollable_input_stream_read_nonblocking(input, buffer.baseAddress, gsize(buffer.count), nil, &error)
        if count > 0 {
            bytesRead += UInt64(count)
            return .bytes(count)
        }
        return count < 0 && TransportSocket.isWouldBlock(error) ? .wouldBlock : .ended
    }

    /// Stops the readiness callback (the server's budget is spent): the client's bytes wait in the
    /// kernel, and TCP's flow control makes the client wait too.
    func pauseReading() {
        if state != .lingering { readSource = nil }
    }

    /// Starts (again) the readiness callback.
    func resumeReading() {
        guard state == .open || state == .closing, readSource == nil, let source = g_pollable_input_stream_create_source(input, nil) else { return }
        readSource = GLibSource(source, signature: .pollable) { [weak self] in
            self?.onReadable()
            return true
        }
    }

    // MARK: Writing

    /// Sends a text message (dropped once closing).
    func send(text: String) {
        guard state == .open else { return }
        enqueue(WebSocketFrame.encode(WebSocketFrame.text, Array(text.utf8)))
    }

    /// Answers a ping. At most one pong waits in the queue (RFC 6455 §5.5.3 allows answering only
    /// the latest ping): a newer ping replaces the payload of one not yet written.
    func pong(_ payload: [UInt8]) {
        guard state == .open else { return }
        let frame = WebSocketFrame.encode(WebSocketFrame.pong, payload)
        if let index = pongQueued, index < outgoing.count, index > 0 || outgoingOffset == 0 {
            queuedBytes += frame.count - outgoing[index].count
            outgoing[index] = frame
            return
        }
        pongQueued = outgoing.count
        enqueue(frame)
    }

    /// Sends a close frame with `code`, after what is queued; the connection ends when the client
    /// answers with its own close or closes its side (or the server aborts it).
    func close(code: UInt16, reason: String = "") {
        guard state == .open else { return }
        enqueue(WebSocketFrame.close(code: code, reason: reason))
        state = .closing
        bytesReadAtClose = bytesRead
    }

    /// Cuts the connection now, without a closing handshake (`onClosed` does not run).
    func abort() {
        guard state != .closed else { return }
        finish(notify: false)
    }

    /// Stops reading for meaning and ends the connection once what is queued (an error, the close
    /// frame) is written: for a client that broke the framing, whose further bytes mean nothing.
    func finishAfterFlush(closeCode: UInt16) {
        close(code: closeCode)
        linger()
    }

    /// Ends a connection the server has closed without losing what it sent last. Closing a socket
    /// with unread bytes in it makes the kernel reset the connection, and a client still writing
    /// then fails before it reads the error and close frame waiting for it. So once the queue is
    /// written the sending side is shut (the client reads the end of the stream after the close
    /// frame), and whatever the client still sends is read and dropped, unparsed, until it closes
    /// its side too: `lingerLimit` bytes at most, and the server's close timeout still applies.
    func linger() {
        guard state == .closing else { return }
        guard transport != nil else {
            // Nothing to shut the sending side with: end once the queue is written, as before.
            readSource = nil
            if queuedBytes == 0 { finish(notify: true) }
            return
        }
        state = .lingering
        readSource = nil
        if let source = g_pollable_input_stream_create_source(input, nil) {
            readSource = GLibSource(source, signature: .pollable) { [weak self] in
                self?.discard()
                return true
            }
        }
        shutWritingOnceFlushed()
    }

    /// While lingering, shuts the sending side once everything queued is written (once).
    private func shutWritingOnceFlushed() {
        guard state == .lingering, outgoing.isEmpty, !writingShut, let transport else { return }
        writingShut = true
        transport.shutDownWriting()
    }

    /// Reads and drops what the client sent after the close, until its end of stream.
    private func discard() {
        withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 1) { scratch in
            while state == .lingering {
                switch receive(into: scratch) {
                case .wouldBlock: return
                case .ended: return finish(notify: true)
                case .bytes(let count):
                    discardable -= count
                    if discardable <= 0 { return finish(notify: true) }
                }
            }
        }
    }

    /// The client's close frame arrived: answers it (if the server had not closed first) and ends
    /// the connection once the answer is written.
    func closeReceived(code: UInt16?) {
        guard state == .open || state == .closing else { return }
        if state == .open {
            // Echo a valid code; 1005 (no code) and the reserved ones are not sent back.
            let echo = code.flatMap { (1000...4999).contains($0) && ![1004, 1005, 1006, 1015].contains($0) ? $0 : nil } ?? 1000
            enqueue(WebSocketFrame.close(code: echo))
            state = .closing
        }
        readSource = nil
        if queuedBytes == 0 { finish(notify: true) }
    }

    /// The connection ended under it (end of stream, a failed read).
    func ended() {
        guard state != .closed else { return }
        finish(notify: true)
    }

    private func enqueue(_ frame: [UInt8]) {
        outgoing.append(frame)
        queuedBytes += frame.count
        flush()
    }

    /// Writes what is queued until the socket would block; then waits for it to be writable.
    private func flush() {
        while let first = outgoing.first, state != .closed {
            var error: UnsafeMutablePointer<GError>?
            defer { if let error { g_error_free(error) } }
            let written = first.withUnsafeBytes { buffer in
                g_pollable_output_stream_write_nonblocking(output, buffer.baseAddress! + outgoingOffset,
                                                           gsize(buffer.count - outgoingOffset), nil, &error)
            }
            if written < 0 {
                guard TransportSocket.isWouldBlock(error) else { return finish(notify: true) }
                if writeSource == nil, let source = g_pollable_output_stream_create_source(output, nil) {
                    writeSource = GLibSource(source, signature: .pollable) { [weak self] in
                        self?.writeSource = nil
                        self?.flush()
                        return false
                    }
                }
                return
            }
            outgoingOffset += written
            queuedBytes -= written
            if outgoingOffset == first.count {
                outgoing.removeFirst()
                outgoingOffset = 0
                if let index = pongQueued { pongQueued = index == 0 ? nil : index - 1 }
            } else if pongQueued == 0 {
                pongQueued = nil // being written: no longer replaceable
            }
        }
        if outgoing.isEmpty, state == .closing, readSource == nil { finish(notify: true) }
        shutWritingOnceFlushed()
    }

    private func finish(notify: Bool) {
        state = .closed
        readSource = nil
        writeSource = nil
        outgoing = []
        queuedBytes = 0
        pongQueued = nil
        g_io_stream_close(stream, nil, nil)
        if notify { onClosed() }
    }
}
