import Dispatch
import Glibc

/// Ctrl-C (SIGINT) and SIGTERM handed to `handler` on a global queue, for the commands that end
/// cleanly on them (`veil serve` closes its clients, `veil call` leaves the room). The sources live
/// as long as the returned array.
///
/// On Linux libdispatch reads signals through a signalfd, which only sees a signal that stays
/// pending: one delivered to a thread that does not block it is consumed there (lost when ignored,
/// fatal by default) before the signalfd can read it. So both signals are blocked here, in the
/// calling thread, and every thread started afterwards (GLib's, GStreamer's, libsoup's) inherits the
/// mask. Call it first in the command, before anything that starts a thread. A thread started
/// before it would still take the default action, which ends the process: never an ignored stop.
func catchStopSignals(_ handler: @escaping @Sendable () -> Void) -> [DispatchSourceSignal] {
    var mask = sigset_t()
    sigemptyset(&mask)
    sigaddset(&mask, SIGINT)
    sigaddset(&mask, SIGTERM)
    pthread_sigmask(SIG_BLOCK, &mask, nil)
    return [SIGINT, SIGTERM].map { number in
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }
}
