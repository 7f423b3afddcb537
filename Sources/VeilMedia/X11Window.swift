import CX11
import Foundation

/// A window of Veil's own on an X display, which GStreamer's X video sinks (`ximagesink`,
/// `xvimagesink`) draw into instead of a window of theirs, so that Veil can resize it and ask the
/// window manager to keep it above other windows: the compact mode of `VideoDisplay`.
///
/// Its own connection to the display: Xlib is used from one thread at a time (every call comes
/// through `VideoDisplay`'s mutex), and the sink draws through a connection of its own.
final class X11Window {
    private let display: OpaquePointer
    /// The window's X id, handed to the video sink.
    let id: Window
    private let root: Window
    private let deleteWindow: Atom
    /// The user closed the window (the window manager's close button).
    private(set) var closedByUser = false

    /// Opens `title`, `width` × `height`, on the display named by `DISPLAY` (nil: the environment's).
    init(title: String, width: Int, height: Int, displayName: String?) throws {
        guard let display = XOpenDisplay(displayName) else {
            throw MediaError(.displayUnavailable, "cannot connect to the X display \(displayName ?? "in DISPLAY")")
        }
        self.display = display
        let screen = XDefaultScreen(display)
        root = XRootWindow(display, screen)
        let black = XBlackPixel(display, screen)
        id = XCreateSimpleWindow(display, root, 0, 0, UInt32(width), UInt32(height), 0, black, black)
        XStoreName(display, id, title)
        // The close button sends a message instead of ending the connection (and the process).
        var delete = XInternAtom(display, "WM_DELETE_WINDOW", 0)
        deleteWindow = delete
        XSetWMProtocols(display, id, &delete, 1)
        XSelectInput(display, id, StructureNotifyMask)
        XMapWindow(display, id)
        XFlush(display)
    }

    deinit {
        XDestroyWindow(display, id)
        XCloseDisplay(display)
    }

    /// Resizes the window to `width` × `height`.
    func resize(width: Int, height: Int) {
        XResizeWindow(display, id, UInt32(width), UInt32(height))
        XFlush(display)
    }

    /// Asks to keep the window above others (EWMH `_NET_WM_STATE_ABOVE`), or no longer. A window
    /// manager acts on a message to the root window; the window's `_NET_WM_STATE` property is also
    /// set, which is what a window manager reads when it maps the window, and what shows the
    /// request without one.
    func keepOnTop(_ on: Bool) {
        let state = XInternAtom(display, "_NET_WM_STATE", 0), above = XInternAtom(display, "_NET_WM_STATE_ABOVE", 0)
        var event = XEvent()
        event.xclient.type = ClientMessage
        event.xclient.window = id
        event.xclient.message_type = state
        event.xclient.format = 32
        event.xclient.data.l.0 = on ? 1 : 0  // _NET_WM_STATE_ADD, _NET_WM_STATE_REMOVE
        event.xclient.data.l.1 = Int(above)
        event.xclient.data.l.3 = 1  // from an application
        XSendEvent(display, root, 0, SubstructureRedirectMask | SubstructureNotifyMask, &event)
        if on {
            var value = above
            let atomType = XInternAtom(display, "ATOM", 0)
            withUnsafeBytes(of: &value) { bytes in
                _ = XChangeProperty(display, id, state, atomType, 32, PropModeReplace,
                                    bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), 1)
            }
        } else {
            XDeleteProperty(display, id, state)
        }
        XFlush(display)
    }

    /// Reads the window's pending events; true once the user has closed it.
    func closed() -> Bool {
        while XPending(display) > 0 {
            var event = XEvent()
            XNextEvent(display, &event)
            if event.type == ClientMessage, Atom(bitPattern: event.xclient.data.l.0) == deleteWindow { closedByUser = true }
        }
        return closedByUser
    }
}
