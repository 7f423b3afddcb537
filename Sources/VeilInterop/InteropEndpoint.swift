/// Where an avatar protocol's datagrams go (or, later, come from): `vmc://HOST:PORT` for a VMC
/// Marionette such as VSeeFace, `livelink://HOST:PORT` for Unreal Engine's Live Link Face source.
/// Pure: the host is resolved where the socket is opened.
public struct InteropEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// The protocol spoken there.
    public enum Kind: String, CaseIterable, Sendable {
        /// The VMC protocol (OSC over UDP), `vmc://`.
        case vmc
        /// Live Link Face packets, `livelink://`.
        case liveLink = "livelink"

        /// The port each protocol's receivers listen on unless told otherwise: VMC Marionettes
        /// 39539, Unreal's Live Link 11111.
        public var defaultPort: UInt16 {
            switch self {
            case .vmc: return VMC.marionettePort
            case .liveLink: return LiveLinkFacePacket.defaultPort
            }
        }

        /// The name people know it by, for messages.
        public var displayName: String {
            switch self {
            case .vmc: return "VMC"
            case .liveLink: return "Live Link Face"
            }
        }
    }

    /// The protocol.
    public var kind: Kind
    /// A host name, an IPv4 address or an IPv6 address (without brackets); empty only for an
    /// endpoint parsed with `hostRequired: false` (every local address, for listening).
    public var host: String
    /// The UDP port.
    public var port: UInt16

    /// An endpoint from its parts.
    public init(kind: Kind, host: String, port: UInt16? = nil) {
        self.kind = kind; self.host = host; self.port = port ?? kind.defaultPort
    }

    /// Parses `vmc://HOST[:PORT]` or `livelink://HOST[:PORT]` (an IPv6 host in brackets:
    /// `vmc://[::1]:39539`; the port defaults to the protocol's, `Kind.defaultPort`; a trailing
    /// `/` is allowed). Throws `InteropURLError` saying what is wrong and what a right one looks like.
    public init(parsing text: String, hostRequired: Bool = true) throws {
        guard let separator = text.range(of: "://") else {
            throw InteropURLError.malformed.detailed("'\(text)' is not a URL; give \(Self.examples)")
        }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard let kind = Kind(rawValue: scheme) else {
            throw InteropURLError.unsupportedScheme.detailed("'\(text)': Veil speaks vmc:// and livelink://, not \(scheme)://; give \(Self.examples)")
        }
        var authority = Substring(text[separator.upperBound...])
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.contains("/"), !authority.contains("?"), !authority.contains("#"), !authority.contains("@") else {
            throw InteropURLError.malformed.detailed("'\(text)': only a host and a port, as in \(Self.examples)")
        }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw InteropURLError.malformed.detailed("'\(text)': an IPv6 address needs its closing ], as in \(kind.rawValue)://[::1]:\(kind.defaultPort)")
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else {
                throw InteropURLError.malformed.detailed("'\(text)': after ] comes :PORT or nothing")
            }
            if !rest.isEmpty { portText = rest.dropFirst() }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            let after = authority[authority.index(after: colon)...]
            guard !after.contains(":") else {
                throw InteropURLError.malformed.detailed("'\(text)': put an IPv6 address in brackets, as in \(kind.rawValue)://[::1]:\(kind.defaultPort)")
            }
            portText = after
        } else {
            host = authority
        }
        guard !host.isEmpty || !hostRequired else {
            throw InteropURLError.missingHost.detailed("'\(text)' names no host: give where the receiver runs, as in \(kind.rawValue)://127.0.0.1:\(kind.defaultPort)")
        }
        var port = kind.defaultPort
        if let portText {
            guard let number = UInt16(portText), number > 0 else {
                throw InteropURLError.invalidPort.detailed("'\(text)': the port must be a number from 1 to 65535, not '\(portText)' (\(kind.displayName)'s default is \(kind.defaultPort))")
            }
            port = number
        }
        self.init(kind: kind, host: String(host), port: port)
    }

    /// `vmc://127.0.0.1:39539`, `livelink://[::1]:11111`.
    public var description: String {
        "\(kind.rawValue)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    static let examples = "vmc://HOST:PORT (VMC, port \(Kind.vmc.defaultPort) by default) or livelink://HOST:PORT (Live Link Face, port \(Kind.liveLink.defaultPort) by default)"
}
