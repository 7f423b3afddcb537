import VeilCore
import VeilInterop
import VeilInteropNetwork

/// What `veil track` and `veil call` share for `--send URL`: the URLs parsed (a bad one is a usage
/// error), a sender opened for each (a host that does not resolve is an input error), and the
/// per-destination summary printed at the end.
enum InteropDestinations {
    /// The endpoints of `--send` URLs, or a `UsageError` saying what is wrong with one.
    static func endpoints(_ urls: [String]) throws -> [InteropEndpoint] {
        try urls.map { text in
            do { return try InteropEndpoint(parsing: text) } catch let error as InteropURLError { throw UsageError("--send \(error)") }
        }
    }

    /// A sender per endpoint; a host that does not resolve or cannot be reached is a
    /// `VeilError.invalidInput` naming the URL.
    static func open(_ endpoints: [InteropEndpoint], framesPerSecond: Int32, subject: String = InteropFrameEncoder.defaultSubjectName) throws -> [InteropSender] {
        try endpoints.map { endpoint in
            do {
                return try InteropSender(endpoint: endpoint, framesPerSecond: framesPerSecond, subjectName: subject)
            } catch {
                throw VeilError.invalidInput("--send \(endpoint): \(error)")
            }
        }
    }

    /// `URL (Kind, address)` for each sender, for the line said at the start.
    static func targets(_ senders: [InteropSender]) -> String {
        senders.map { "\($0.endpoint) (\($0.endpoint.kind.displayName), \($0.address))" }.joined(separator: ", ")
    }

    /// What one destination was sent, for the summary and its JSON.
    struct Summary: Codable {
        var url: String
        /// The address the host resolved to.
        var address: String
        var statistics: InteropSender.Statistics

        init(_ sender: InteropSender) {
            url = "\(sender.endpoint)"; address = "\(sender.address)"; statistics = sender.statistics
        }

        /// Two or three lines of the summary table: sent, dropped, refused, and why when something failed.
        var lines: [String] {
            let s = statistics
            var lines = [
                "\(url) (\(address))",
                "                 \(s.framesSent) frames, \(s.datagramsSent) datagrams sent (\(s.bytesSent) bytes), "
                    + "\(s.datagramsDropped) dropped, \(s.datagramsRefused) refused, \(s.datagramsFailed) failed",
            ]
            if s.datagramsRefused > 0 {
                lines.append("                 nothing listened at \(address) for some of them: is the receiver running, on that port?")
            } else if let failure = s.lastFailure {
                lines.append("                 \(failure)")
            }
            return lines
        }
    }
}
