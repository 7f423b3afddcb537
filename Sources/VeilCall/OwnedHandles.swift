import CGStreamer
import Synchronization

// Small owners of GStreamer handles and one-shot completions that cross threads.

/// A session description owned by Swift (freed on deinit), handed from a webrtcbin thread to the loop.
final class OwnedDescription: @unchecked Sendable {
    // Immutable after init; freed exactly once, by deinit.
    let pointer: UnsafeMutablePointer<GstWebRTCSessionDescription>
    init(_ pointer: UnsafeMutablePointer<GstWebRTCSessionDescription>) { self.pointer = pointer }
    deinit { gst_webrtc_session_description_free(pointer) }
}

/// A data channel reference handed to the loop; released if nobody takes it.
final class OwnedChannel: @unchecked Sendable {
    // Taken at most once, on the loop; deinit releases it otherwise.
    var pointer: OpaquePointer?
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    func take() -> OpaquePointer? {
        defer { pointer = nil }
        return pointer
    }
    deinit { if let pointer { g_object_unref(gpointerOf(pointer)) } }
}

/// A strong reference to a GStreamer element that may sit in a mutex.
final class ElementRef: @unchecked Sendable {
    // The pointer is immutable; the reference is released once, by deinit.
    let element: UnsafeMutablePointer<GstElement>
    init(_ element: UnsafeMutablePointer<GstElement>) { self.element = element }
    deinit { gst_object_unref(gpointerOf(element)) }
}

/// Resumes a continuation (or runs a completion) exactly once, whoever comes first.
final class ResumeOnce<T>: @unchecked Sendable {
    // The continuation is read once, under the mutex.
    let state: Mutex<CheckedContinuation<T, Never>?>
    let claimed = Mutex(false)
    init(_ continuation: CheckedContinuation<T, Never>?) { state = Mutex(continuation) }
    func resume(_ value: T) {
        let continuation = state.withLock { state -> CheckedContinuation<T, Never>? in
            defer { state = nil }
            return state
        }
        continuation?.resume(returning: value)
    }
    /// True for the first caller only.
    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}
